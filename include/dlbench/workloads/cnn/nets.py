"""The three image-classification models of the core study, equal to tf_cnn_benchmarks' layer for layer.

The study timed tf_cnn_benchmarks (``scripts/tf_cnn_benchmarks/models/{resnet_model,inception_model,
alexnet_model}.py`` built by ``convnet_builder.py``), so each network here is that harness's, not
Keras applications' look-alike (docs/models.md lists what differed and what it cost):

* ResNet-50 v1: unbiased convolutions each followed by batch norm (decay 0.9, epsilon 1e-5, with
  scale), stride 2 on the first 1x1 convolution of a stage, 7x7/2 stem on an explicitly padded
  input, 3x3/2 SAME max pool, projection shortcuts (convolution + batch norm) where depth changes.
* InceptionV3: unbiased convolutions + batch norm (decay 0.999, epsilon 1e-3, no scale), the
  mixed_10 pool branch a *max* pool (mixed_9's is average), no auxiliary head (the harness's default).
* AlexNet: the one-tower variant, biased convolutions, no batch norm, 227x227 input (224 + 3 so the
  VALID 11x11/4 stem gives 55x55), two 4096 fully-connected layers each followed by dropout 0.5.

Every network ends in a linear fully-connected layer to ``num_classes`` (1001 for ImageNet in the
harness: label 0 is background). Initialisers are the harness's: variance scaling (fan-in, truncated
normal) for convolutions, truncated normal with stddev sqrt(2/fan_in) (relu) or sqrt(1/fan_in)
(linear) for fully-connected layers, zero biases. Weight decay (:data:`WEIGHT_DECAY`, the harness's
default) is an L2 loss on every trainable variable except batch norm's (biases included, as its
``filter_l2_loss_vars`` does).

Each architecture is written once, against :class:`Net`, and imports no framework: each
framework's module turns it into its own model. ``keras_nets.KerasNet`` into a Keras 3 model
(TensorFlow's single instance and multi-worker mirrored with ``tf_nets``' fused batch norm; JAX's
with Keras' own), ``tf_nets.GraphBuilder`` into ``tf.compat.v1`` graph ops (distributed_replicated)
and ``torch_nets.TorchNet`` into a ``torch.nn.Module``, so every framework and mode trains the same
networks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dlbench.workloads.profiles import ModelName

WEIGHT_DECAY = 4e-5
"""tf_cnn_benchmarks' ``--weight_decay`` default; the study did not change it."""


@dataclass(frozen=True)
class BatchNorm:
    """The harness's batch-norm settings for one model (``ConvNetBuilder.batch_norm``'s arguments)."""

    decay: float
    epsilon: float
    scale: bool


RESNET_BN = BatchNorm(decay=0.9, epsilon=1e-5, scale=True)  # ResnetModel.batch_norm_config
INCEPTION_BN = BatchNorm(decay=0.999, epsilon=1e-3, scale=False)  # ConvNetBuilder.batch_norm defaults


class Net(Protocol):
    """The operations the architectures are written in (a subset of ``ConvNetBuilder``)."""

    def conv(self, x: Any, filters: int, kh: int, kw: int, stride: int = 1, padding: str = "SAME", *,
             bn: BatchNorm | None = None, relu: bool = True) -> Any: ...

    def max_pool(self, x: Any, size: int, stride: int, padding: str = "VALID") -> Any: ...

    def avg_pool(self, x: Any, size: int, stride: int, padding: str = "VALID") -> Any: ...

    def dense(self, x: Any, units: int, *, relu: bool) -> Any: ...

    def dropout(self, x: Any, rate: float) -> Any: ...

    def flatten(self, x: Any) -> Any: ...

    def spatial_mean(self, x: Any) -> Any: ...

    def concat(self, xs: Sequence[Any]) -> Any: ...

    def add_relu(self, a: Any, b: Any) -> Any: ...


def channels(x: Any) -> int:
    return int(x.shape[-1])


def resnet_pads(kernel: int) -> tuple[int, int]:
    """convnet_builder's ``SAME_RESNET`` padding for a strided convolution: (before, after)."""
    return (kernel - 1) // 2, kernel - 1 - (kernel - 1) // 2


# --- the architectures -------------------------------------------------------------------------------------------


def alexnet_net(net: Net, images: Any, num_classes: int) -> Any:
    """``AlexnetModel.add_inference`` + the final affine layer."""
    x = net.conv(images, 64, 11, 11, 4, "VALID")
    x = net.max_pool(x, 3, 2)
    x = net.conv(x, 192, 5, 5)
    x = net.max_pool(x, 3, 2)
    x = net.conv(x, 384, 3, 3)
    x = net.conv(x, 384, 3, 3)
    x = net.conv(x, 256, 3, 3)
    x = net.max_pool(x, 3, 2)
    x = net.flatten(x)  # 256 * 6 * 6 at 227x227
    x = net.dropout(net.dense(x, 4096, relu=True), 0.5)
    x = net.dropout(net.dense(x, 4096, relu=True), 0.5)
    return net.dense(x, num_classes, relu=False)


def resnet50_net(net: Net, images: Any, num_classes: int) -> Any:
    """``ResnetModel('resnet50')`` (v1, layer counts 3, 4, 6, 3) + the final affine layer."""
    bn = RESNET_BN
    x = net.conv(images, 64, 7, 7, 2, "SAME_RESNET", bn=bn)
    x = net.max_pool(x, 3, 2, "SAME")
    for depth, blocks, first_stride in ((256, 3, 1), (512, 4, 2), (1024, 6, 2), (2048, 3, 2)):
        for index in range(blocks):
            stride = first_stride if index == 0 else 1
            # bottleneck_block_v1: depth == input depth only after a stage's first block, where
            # the stride is 1, so the shortcut is the identity or a projection (never a pool).
            if depth == channels(x) and stride == 1:
                shortcut = x
            else:
                shortcut = net.conv(x, depth, 1, 1, stride, bn=bn, relu=False)
            y = net.conv(x, depth // 4, 1, 1, stride, bn=bn)
            y = net.conv(y, depth // 4, 3, 3, 1, "SAME_RESNET", bn=bn)
            y = net.conv(y, depth, 1, 1, 1, bn=bn, relu=False)
            x = net.add_relu(shortcut, y)
    x = net.spatial_mean(x)
    return net.dense(x, num_classes, relu=False)


def inception3_net(net: Net, images: Any, num_classes: int) -> Any:
    """``Inceptionv3Model`` (auxiliary head off, the harness's default) + the final affine layer."""
    bn = INCEPTION_BN

    def conv(x: Any, filters: int, kh: int, kw: int, stride: int = 1, padding: str = "SAME") -> Any:
        return net.conv(x, filters, kh, kw, stride, padding, bn=bn)

    def chain(x: Any, *layers: tuple[Any, ...]) -> Any:
        for layer in layers:
            x = conv(x, *layer)
        return x

    x = conv(images, 32, 3, 3, 2, "VALID")
    x = conv(x, 32, 3, 3, 1, "VALID")
    x = conv(x, 64, 3, 3)
    x = net.max_pool(x, 3, 2)
    x = conv(x, 80, 1, 1, 1, "VALID")
    x = conv(x, 192, 3, 3, 1, "VALID")
    x = net.max_pool(x, 3, 2)
    for n in (32, 64, 64):  # inception_v3_a: mixed, mixed_1, mixed_2 (35x35)
        x = net.concat([conv(x, 64, 1, 1),
                        chain(x, (48, 1, 1), (64, 5, 5)),
                        chain(x, (64, 1, 1), (96, 3, 3), (96, 3, 3)),
                        conv(net.avg_pool(x, 3, 1, "SAME"), n, 1, 1)])
    x = net.concat([conv(x, 384, 3, 3, 2, "VALID"),  # inception_v3_b: mixed_3 (17x17)
                    chain(x, (64, 1, 1), (96, 3, 3), (96, 3, 3, 2, "VALID")),
                    net.max_pool(x, 3, 2)])
    for n in (128, 160, 160, 192):  # inception_v3_c: mixed_4 .. mixed_7
        x = net.concat([conv(x, 192, 1, 1),
                        chain(x, (n, 1, 1), (n, 1, 7), (192, 7, 1)),
                        chain(x, (n, 1, 1), (n, 7, 1), (n, 1, 7), (n, 7, 1), (192, 1, 7)),
                        conv(net.avg_pool(x, 3, 1, "SAME"), 192, 1, 1)])
    x = net.concat([chain(x, (192, 1, 1), (320, 3, 3, 2, "VALID")),  # inception_v3_d: mixed_8 (8x8)
                    chain(x, (192, 1, 1), (192, 1, 7), (192, 7, 1), (192, 3, 3, 2, "VALID")),
                    net.max_pool(x, 3, 2)])
    for pool in ("avg", "max"):  # inception_v3_e: mixed_9 (average pool), mixed_10 (max pool)
        branch3x3 = conv(x, 384, 1, 1)
        branch3x3dbl = chain(x, (448, 1, 1), (384, 3, 3))
        pooled = net.avg_pool(x, 3, 1, "SAME") if pool == "avg" else net.max_pool(x, 3, 1, "SAME")
        x = net.concat([conv(x, 320, 1, 1),
                        conv(branch3x3, 384, 1, 3), conv(branch3x3, 384, 3, 1),
                        conv(branch3x3dbl, 384, 1, 3), conv(branch3x3dbl, 384, 3, 1),
                        conv(pooled, 192, 1, 1)])
    x = net.spatial_mean(x)  # the harness's 8x8 VALID average pool + reshape at 299x299
    return net.dense(x, num_classes, relu=False)


ARCHITECTURES: dict[ModelName, Callable[[Net, Any, int], Any]] = {
    ModelName.ALEXNET: alexnet_net,
    ModelName.RESNET50: resnet50_net,
    ModelName.INCEPTION3: inception3_net,
}


def dense_stddev(fan_in: int, relu: bool) -> float:
    """convnet_builder.affine's initialiser: He for relu layers, LeCun for the linear one."""
    return math.sqrt((2.0 if relu else 1.0) / fan_in)
