"""The core study's three networks as PyTorch modules, from the same architecture functions.

:data:`nets.ARCHITECTURES` are written once against the :class:`nets.Net` protocol. Here
:class:`TorchNet` implements that protocol on :class:`Symbol` placeholders that carry only a shape:
running an architecture function on it records one ``torch.nn`` module per call (its input
channels known from the placeholder's shape) and the edges between them, and :class:`GraphModule`
replays that graph in ``forward``. So the PyTorch runner trains tf_cnn_benchmarks' networks, not
torchvision's look-alikes, with the harness's details:

* TensorFlow's padding rules: ``SAME`` may pad one pixel more after than before (ResNet-50's 3x3/2
  max pool on 112x112); where the two sides differ the padding is explicit (``F.pad``, with -inf
  for max pools; average pools divide by the pixels inside the image, as TensorFlow does), else the
  layer's own symmetric padding. ``SAME_RESNET`` is convnet_builder's explicit padding for strided
  convolutions.
* Convolutions are unbiased when batch norm follows; :class:`BatchNorm` has beta always and gamma
  only where the model's :class:`nets.BatchNorm` has ``scale`` (InceptionV3 has none: a constant
  one multiplies instead, so the trainable parameter counts equal TensorFlow's), moving averages
  with momentum ``1 - decay`` (PyTorch's momentum weighs the new batch, TensorFlow's decay the old
  average).
* The harness's initialisers: variance scaling (fan-in, truncated normal) for convolutions,
  truncated normal with stddev sqrt(2/fan_in) (relu) or sqrt(1/fan_in) (linear) for dense layers,
  zero biases; dropout 0.5; flatten in NHWC order, so a dense layer's weights line up with
  TensorFlow's.

Tensors are NCHW (PyTorch's dimension order) in ``channels_last`` memory (NHWC in memory, the
study's ``data_format``): oneDNN on CPUs and cuDNN's tensor-core kernels on GPUs run convolutions
natively in NHWC, so no layer transposes, and an NHWC batch (the data's layout) permuted to NCHW
already *is* a channels-last tensor, without a copy.

This module imports torch at the top: only the PyTorch runner (and its tests) import it, on a
machine where :mod:`.frameworks` found torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own convention
from torch import nn

from dlbench.workloads.cnn import nets
from dlbench.workloads.profiles import ModelName, TrainingSpec

# tf.compat.v1.variance_scaling_initializer's truncated normal: the stddev of a normal truncated at
# two standard deviations is this fraction of the untruncated one, so TF divides by it.
_TRUNCATED_STDDEV = 0.87962566103423978


@dataclass(frozen=True)
class Symbol:
    """A tensor of the graph being traced: the node that produces it and its NHWC shape without the
    batch dimension ((H, W, C), or (features,) after flatten), which is what the architectures read."""

    node: int
    shape: tuple[int, ...]


def _out_size(size: int, kernel: int, stride: int, padding: str) -> int:
    """TensorFlow's output size: VALID ceil((size - kernel + 1) / stride), SAME ceil(size / stride)."""
    if padding == "VALID":
        return (size - kernel) // stride + 1
    return -(-size // stride)


def same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's SAME padding of one dimension: (before, after), the odd pixel after."""
    total = max((_out_size(size, kernel, stride, "SAME") - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _pads(shape: tuple[int, ...], kh: int, kw: int, stride: int, padding: str) -> tuple[tuple[int, int], ...]:
    if padding == "VALID":
        return (0, 0), (0, 0)
    if padding == "SAME_RESNET":
        return nets.resnet_pads(kh), nets.resnet_pads(kw)
    return same_pads(shape[0], kh, stride), same_pads(shape[1], kw, stride)


def _layer_padding(pads: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], tuple[int, int, int, int] | None]:
    """(symmetric padding for the layer itself, explicit ``F.pad`` argument or None)."""
    (top, bottom), (left, right) = pads
    if top == bottom and left == right:
        return (top, left), None
    return (0, 0), (left, right, top, bottom)


def _truncated_normal_(tensor: torch.Tensor, stddev: float) -> None:
    nn.init.trunc_normal_(tensor, mean=0.0, std=stddev, a=-2 * stddev, b=2 * stddev)


class BatchNorm(nn.Module):
    """``FusedBatchNormV3`` as the harness configures it: gamma only when ``bn.scale``."""

    def __init__(self, channels: int, bn: nets.BatchNorm) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels)) if bn.scale else None
        if not bn.scale:
            # TensorFlow multiplies by a constant tf.ones: a buffer (not trained, not saved).
            self.register_buffer("unit_scale", torch.ones(channels), persistent=False)
        self.bias = nn.Parameter(torch.zeros(channels))
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))
        self.momentum = 1.0 - bn.decay
        self.eps = bn.epsilon

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight if self.weight is not None else self.unit_scale
        return F.batch_norm(x, self.running_mean, self.running_var, weight, self.bias, self.training,
                            self.momentum, self.eps)


class Conv(nn.Module):
    """convnet_builder.conv: (explicit padding) convolution, bias or batch norm, relu."""

    def __init__(self, in_channels: int, filters: int, kh: int, kw: int, stride: int,
                 pads: tuple[tuple[int, int], ...], bn: nets.BatchNorm | None, relu: bool) -> None:
        super().__init__()
        padding, self.explicit = _layer_padding(pads)
        self.conv = nn.Conv2d(in_channels, filters, (kh, kw), stride, padding=padding, bias=bn is None)
        fan_in = in_channels * kh * kw
        _truncated_normal_(self.conv.weight, math.sqrt(1.0 / fan_in) / _TRUNCATED_STDDEV)
        if self.conv.bias is not None:
            nn.init.zeros_(self.conv.bias)
        self.bn = BatchNorm(filters, bn) if bn is not None else None
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.explicit is not None:
            x = F.pad(x, self.explicit)
        y = self.conv(x)
        if self.bn is not None:
            y = self.bn(y)
        return F.relu(y, inplace=True) if self.relu else y


class MaxPool(nn.Module):
    def __init__(self, size: int, stride: int, pads: tuple[tuple[int, int], ...]) -> None:
        super().__init__()
        padding, self.explicit = _layer_padding(pads)
        if self.explicit is None and max(padding) > size // 2:  # beyond what the layer may pad itself
            (top, bottom), (left, right) = pads
            padding, self.explicit = (0, 0), (left, right, top, bottom)
        self.pool = nn.MaxPool2d(size, stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.explicit is not None:
            x = F.pad(x, self.explicit, value=-math.inf)  # TensorFlow's SAME max pool ignores padding
        return self.pool(x)


class AvgPool(nn.Module):
    """TensorFlow's average pool: SAME padding is not counted (divides by the pixels in the image)."""

    def __init__(self, size: int, stride: int, pads: tuple[tuple[int, int], ...], shape: tuple[int, ...]) -> None:
        super().__init__()
        padding, self.explicit = _layer_padding(pads)
        self.size, self.stride = size, stride
        if self.explicit is None and max(padding) <= size // 2:
            self.pool = nn.AvgPool2d(size, stride, padding=padding, count_include_pad=False)
            return
        (top, bottom), (left, right) = pads
        self.explicit = (left, right, top, bottom)
        self.pool = nn.AvgPool2d(size, stride)
        # Per output pixel: size*size / the pixels of its window inside the image (shape-only, so
        # computed once here).
        inside = F.pad(torch.ones(1, 1, shape[0], shape[1]), self.explicit)
        counts = F.avg_pool2d(inside, size, stride) * (size * size)
        self.register_buffer("scale", (size * size) / counts, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.explicit is None:
            return self.pool(x)
        return self.pool(F.pad(x, self.explicit)) * self.scale.to(x.dtype)


class Dense(nn.Module):
    """convnet_builder.affine: weights, biases, optional relu."""

    def __init__(self, fan_in: int, units: int, relu: bool) -> None:
        super().__init__()
        self.linear = nn.Linear(fan_in, units)
        _truncated_normal_(self.linear.weight, nets.dense_stddev(fan_in, relu))
        nn.init.zeros_(self.linear.bias)
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return F.relu(y, inplace=True) if self.relu else y


class Flatten(nn.Module):
    """Flatten in NHWC order (TensorFlow's); on a channels-last tensor the permute is free."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)


class SpatialMean(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3))


class Concat(nn.Module):
    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return torch.cat(xs, dim=1)


class AddRelu(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.relu(a + b, inplace=True)


class TorchNet:
    """:class:`nets.Net` on :class:`Symbol` placeholders: each call adds a module and its inputs."""

    def __init__(self, image_size: int, channels: int = 3) -> None:
        self.layers: list[nn.Module] = []
        self.inputs: list[tuple[int, ...]] = []
        self.input = Symbol(0, (image_size, image_size, channels))

    def _add(self, layer: nn.Module, inputs: Sequence[Symbol], shape: tuple[int, ...]) -> Symbol:
        self.layers.append(layer)
        self.inputs.append(tuple(x.node for x in inputs))
        return Symbol(len(self.layers), shape)  # node 0 is the input

    def conv(self, x: Symbol, filters: int, kh: int, kw: int, stride: int = 1, padding: str = "SAME", *,
             bn: nets.BatchNorm | None = None, relu: bool = True) -> Symbol:
        if padding == "SAME_RESNET" and stride == 1:
            padding = "SAME"  # convnet_builder pads explicitly only for strided convolutions
        pads = _pads(x.shape, kh, kw, stride, padding)
        h = _out_size(x.shape[0] + sum(pads[0]), kh, stride, "VALID")
        w = _out_size(x.shape[1] + sum(pads[1]), kw, stride, "VALID")
        return self._add(Conv(x.shape[-1], filters, kh, kw, stride, pads, bn, relu), [x], (h, w, filters))

    def _pool_shape(self, x: Symbol, size: int, stride: int, padding: str) -> tuple[int, ...]:
        return (_out_size(x.shape[0], size, stride, padding), _out_size(x.shape[1], size, stride, padding), x.shape[2])

    def max_pool(self, x: Symbol, size: int, stride: int, padding: str = "VALID") -> Symbol:
        pads = _pads(x.shape, size, size, stride, padding)
        return self._add(MaxPool(size, stride, pads), [x], self._pool_shape(x, size, stride, padding))

    def avg_pool(self, x: Symbol, size: int, stride: int, padding: str = "VALID") -> Symbol:
        pads = _pads(x.shape, size, size, stride, padding)
        return self._add(AvgPool(size, stride, pads, x.shape), [x], self._pool_shape(x, size, stride, padding))

    def dense(self, x: Symbol, units: int, *, relu: bool) -> Symbol:
        return self._add(Dense(x.shape[-1], units, relu), [x], (units,))

    def dropout(self, x: Symbol, rate: float) -> Symbol:
        return self._add(nn.Dropout(rate), [x], x.shape)

    def flatten(self, x: Symbol) -> Symbol:
        return self._add(Flatten(), [x], (math.prod(x.shape),))

    def spatial_mean(self, x: Symbol) -> Symbol:
        return self._add(SpatialMean(), [x], (x.shape[-1],))

    def concat(self, xs: Sequence[Symbol]) -> Symbol:
        heights, widths = {x.shape[0] for x in xs}, {x.shape[1] for x in xs}
        if len(heights) != 1 or len(widths) != 1:
            raise ValueError(f"concat of different spatial sizes: {[x.shape for x in xs]}")
        return self._add(Concat(), xs, (*xs[0].shape[:2], sum(x.shape[-1] for x in xs)))

    def add_relu(self, a: Symbol, b: Symbol) -> Symbol:
        if a.shape != b.shape:
            raise ValueError(f"add of different shapes: {a.shape} and {b.shape}")
        return self._add(AddRelu(), [a, b], a.shape)


class GraphModule(nn.Module):
    """The traced network: ``forward`` runs the recorded modules in order, each on its recorded
    inputs, and drops every intermediate result after its last use (autograd keeps what backward
    needs), so the replay holds no more memory than a hand-written ``forward``."""

    def __init__(self, layers: Sequence[nn.Module], inputs: Sequence[tuple[int, ...]], output: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.edges = [tuple(i) for i in inputs]
        self.output = output
        last_use: dict[int, int] = {}
        for index, sources in enumerate(self.edges):
            for source in sources:
                last_use[source] = index
        # After running layer i, the nodes whose last reader it was (never the output).
        self.release: list[tuple[int, ...]] = [() for _ in self.edges]
        for node, index in last_use.items():
            if node != output:
                self.release[index] += (node,)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        values: list[Any] = [images] + [None] * len(self.edges)
        for index, (layer, sources) in enumerate(zip(self.layers, self.edges, strict=True)):
            values[index + 1] = layer(*(values[s] for s in sources))
            for node in self.release[index]:
                values[node] = None
        return values[self.output]


def trace(model: ModelName | str, image_size: int, num_classes: int) -> GraphModule:
    """The network ``model`` for ``image_size`` x ``image_size`` RGB input and ``num_classes`` logits."""
    net = TorchNet(image_size)
    logits = nets.ARCHITECTURES[ModelName(model)](net, net.input, num_classes)
    return GraphModule(net.layers, net.inputs, logits.node)


def build(model: ModelName | str, spec: TrainingSpec) -> GraphModule:
    """:func:`trace` at the profile's image size and classes (float32 weights, on the CPU)."""
    return trace(model, spec.image_size, spec.num_classes)


def is_batch_norm(module: nn.Module) -> bool:
    return isinstance(module, BatchNorm | nn.BatchNorm2d)


def l2_parameters(model: nn.Module) -> list[nn.Parameter]:
    """What weight decay applies to: every trainable parameter but batch norm's (keras_nets.l2_variables)."""
    excluded = {id(p) for m in model.modules() if is_batch_norm(m) for p in m.parameters(recurse=False)}
    return [p for p in model.parameters() if p.requires_grad and id(p) not in excluded]


def trainable_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def tensorflow_shape(parameter: torch.Tensor) -> tuple[int, ...]:
    """A parameter's shape in TensorFlow's layout: conv kernels (kh, kw, in, out), dense (in, out)."""
    shape = tuple(parameter.shape)
    if len(shape) == 4:
        return shape[2], shape[3], shape[1], shape[0]
    if len(shape) == 2:
        return shape[1], shape[0]
    return shape
