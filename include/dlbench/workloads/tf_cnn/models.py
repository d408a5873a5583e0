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

Each architecture is written once, against :class:`Net`; :class:`KerasNet` turns it into a Keras
model (single instance, multi-worker mirrored) and :class:`GraphBuilder` into ``tf.compat.v1`` graph
ops (distributed_replicated, see the comment above it), so both modes train the same network. The
same :class:`KerasNet` builds the JAX runner's model from Keras 3 on the JAX backend (:func:`build`
with ``keras`` and :func:`keras_batch_norm`), so that framework trains the same networks too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dlbench.workloads.profiles import ModelName, TrainingSpec

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


def _channels(x: Any) -> int:
    return int(x.shape[-1])


def _resnet_pads(kernel: int) -> tuple[int, int]:
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
            if depth == _channels(x) and stride == 1:
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


# --- Keras ---------------------------------------------------------------------------------------------------------


BatchNormFactory = Callable[[BatchNorm], Any]
"""``BatchNorm -> Keras layer``: how a :class:`KerasNet` normalises after an unbiased convolution."""


def _tf_keras() -> Any:
    """TensorFlow's Keras (Keras 3 on the TensorFlow backend), the TensorFlow runner's."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    return tf.keras


def _conv_initializer(keras: Any) -> Any:
    # tf.compat.v1.variance_scaling_initializer()'s defaults, what convnet_builder.conv uses.
    return keras.initializers.VarianceScaling(scale=1.0, mode="fan_in", distribution="truncated_normal")


def _dense_stddev(fan_in: int, relu: bool) -> float:
    """convnet_builder.affine's initialiser: He for relu layers, LeCun for the linear one."""
    return math.sqrt((2.0 if relu else 1.0) / fan_in)


def fused_batch_norm_layer(bn: BatchNorm, **kwargs: Any) -> Any:
    """A Keras layer doing what the harness's batch norm does: ``FusedBatchNormV3`` (one kernel
    for statistics and normalisation; Keras 3's BatchNormalization runs moments and normalisation
    as separate ops) and moving averages with decay ``bn.decay``."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    class FusedBatchNorm(tf.keras.layers.Layer):
        def build(self, input_shape: Any) -> None:
            shape = (int(input_shape[-1]),)
            self.gamma = self.add_weight(shape=shape, name="gamma", initializer="ones", autocast=False) \
                if bn.scale else None
            self.beta = self.add_weight(shape=shape, name="beta", initializer="zeros", autocast=False)
            self.moving_mean = self.add_weight(shape=shape, name="moving_mean", initializer="zeros",
                                               trainable=False, autocast=False)
            self.moving_variance = self.add_weight(shape=shape, name="moving_variance", initializer="ones",
                                                   trainable=False, autocast=False)

        def call(self, x: Any, training: bool | None = None) -> Any:
            beta = self.beta.value
            gamma = self.gamma.value if self.gamma is not None else tf.ones_like(beta)
            if not training:
                y, _, _ = tf.compat.v1.nn.fused_batch_norm(
                    x, gamma, beta, mean=self.moving_mean.value, variance=self.moving_variance.value,
                    epsilon=bn.epsilon, is_training=False)
                return y
            y, mean, variance = tf.compat.v1.nn.fused_batch_norm(x, gamma, beta, epsilon=bn.epsilon, is_training=True)
            d = bn.decay
            self.moving_mean.assign(self.moving_mean.value * d + mean * (1 - d))
            self.moving_variance.assign(self.moving_variance.value * d + variance * (1 - d))
            return y

    return FusedBatchNorm(**kwargs)


def keras_batch_norm(keras: Any) -> BatchNormFactory:
    """Keras' own BatchNormalization with the harness's settings, for a backend without TensorFlow's
    fused kernel (JAX): moving averages with momentum ``bn.decay`` (Keras' momentum is the decay),
    gamma only where the model's batch norm has a scale, beta always."""

    def layer(bn: BatchNorm) -> Any:
        return keras.layers.BatchNormalization(momentum=bn.decay, epsilon=bn.epsilon, scale=bn.scale, center=True)

    return layer


def _is_batch_norm(layer: Any) -> bool:
    # The standalone package: tf.keras.layers.BatchNormalization is this very class (Keras 3), and a
    # JAX process has no TensorFlow to import.
    import keras  # heavy: Keras loads its backend (TensorFlow or JAX); only a built model gets here

    return isinstance(layer, keras.layers.BatchNormalization) or type(layer).__name__ == "FusedBatchNorm"


class KerasNet:
    """:class:`Net` as Keras layers on symbolic tensors (a functional model).

    ``keras`` is the Keras module whose layers build the model: TensorFlow's (the default, with the
    fused batch norm of :func:`fused_batch_norm_layer`) or Keras 3 on another backend with the
    ``batch_norm`` that backend has (:func:`keras_batch_norm`)."""

    def __init__(self, keras: Any | None = None, batch_norm: BatchNormFactory | None = None) -> None:
        self.keras = _tf_keras() if keras is None else keras
        self.layers = self.keras.layers
        self.batch_norm: BatchNormFactory = fused_batch_norm_layer if batch_norm is None else batch_norm

    def conv(self, x: Any, filters: int, kh: int, kw: int, stride: int = 1, padding: str = "SAME", *,
             bn: BatchNorm | None = None, relu: bool = True) -> Any:
        if padding == "SAME_RESNET":
            if stride == 1:
                padding = "SAME"
            else:
                x = self.layers.ZeroPadding2D((_resnet_pads(kh), _resnet_pads(kw)))(x)
                padding = "VALID"
        activation = "relu" if relu and bn is None else None
        y = self.layers.Conv2D(filters, (kh, kw), strides=stride, padding=padding.lower(), use_bias=bn is None,
                               activation=activation, kernel_initializer=_conv_initializer(self.keras))(x)
        if bn is not None:
            y = self.batch_norm(bn)(y)
            if relu:
                y = self.layers.ReLU()(y)
        return y

    def max_pool(self, x: Any, size: int, stride: int, padding: str = "VALID") -> Any:
        return self.layers.MaxPooling2D(size, stride, padding=padding.lower())(x)

    def avg_pool(self, x: Any, size: int, stride: int, padding: str = "VALID") -> Any:
        return self.layers.AveragePooling2D(size, stride, padding=padding.lower())(x)

    def dense(self, x: Any, units: int, *, relu: bool) -> Any:
        init = self.keras.initializers.TruncatedNormal(stddev=_dense_stddev(_channels(x), relu))
        return self.layers.Dense(units, activation="relu" if relu else None, kernel_initializer=init)(x)

    def dropout(self, x: Any, rate: float) -> Any:
        return self.layers.Dropout(rate)(x)

    def flatten(self, x: Any) -> Any:
        return self.layers.Flatten()(x)

    def spatial_mean(self, x: Any) -> Any:
        return self.layers.GlobalAveragePooling2D()(x)

    def concat(self, xs: Sequence[Any]) -> Any:
        return self.layers.Concatenate(axis=-1)(list(xs))

    def add_relu(self, a: Any, b: Any) -> Any:
        return self.layers.ReLU()(self.layers.Add()([a, b]))


def build(model: ModelName | str, spec: TrainingSpec, *, keras: Any | None = None,
          batch_norm: BatchNormFactory | None = None) -> Any:
    """A Keras model producing logits for ``spec.num_classes`` classes on NHWC input: TensorFlow's
    Keras by default, else the ``keras`` module given with its ``batch_norm`` (see :class:`KerasNet`)."""
    net = KerasNet(keras, batch_norm)
    model = ModelName(model)
    inputs = net.keras.Input(shape=(spec.image_size, spec.image_size, 3), name="images")
    outputs = ARCHITECTURES[model](net, inputs, spec.num_classes)
    return net.keras.Model(inputs, outputs, name=model.value)


def l2_variables(model: Any) -> list[Any]:
    """The trainable variables weight decay applies to: all but batch norm's (``filter_l2_loss_vars``)."""
    return [w for layer in model.layers if not _is_batch_norm(layer) for w in layer.trainable_weights]


def weight_decay_loss(variables: Sequence[Any], weight_decay: float = WEIGHT_DECAY) -> Any:
    """``weight_decay * sum(tf.nn.l2_loss(v))``, the term the harness adds to the loss."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    return weight_decay * tf.add_n([tf.nn.l2_loss(v) for v in variables])


# --- Graph-mode builders (TF1 ``tf.compat.v1`` graphs: distributed_replicated) ---------------------
#
# tf_cnn_benchmarks' distributed_replicated mode is between-graph replication: every worker builds
# its own TF1 graph, with global variables on the parameter servers and local copies on its own
# device. Keras 3 (what tf.keras is now) cannot build TF1 graphs. The tf_keras package (Keras 2)
# can, but its wheel requires the ``tensorflow`` distribution, which pip cannot see tensorflow-cpu
# provide: installing it would put the CUDA ``tensorflow`` build over tensorflow-cpu in the same
# site-packages. So, like tf_cnn_benchmarks' own model builders, these layers are plain ops, driven
# by the same architecture functions as the Keras models (tests/workloads/test_distributed.py
# checks the variables' shapes are equal), so the single and distributed scenarios train the same
# networks.

VariableFactory = Callable[[str, list[int], Any, bool], Any]
"""``(name, shape, initializer, trainable) -> variable`` the tower's ops read; the caller decides
where variables live (for distributed_replicated: a local copy of a global on a parameter server)."""


class GraphBuilder:
    """:class:`Net` as ``tf.compat.v1`` graph ops for one tower (NHWC), like ``ConvNetBuilder``."""

    def __init__(self, variable: VariableFactory, *, training: bool = True) -> None:
        self.variable = variable
        self.training = training
        self.updates: list[Any] = []  # batch-norm moving-average updates, run with every step
        self.l2_variables: list[Any] = []  # what weight decay applies to (not batch norm's)
        self.counts: dict[str, int] = {}

    def _name(self, kind: str) -> str:
        index = self.counts.get(kind, 0)
        self.counts[kind] = index + 1
        return f"{kind}{index}"

    def conv(self, x: Any, filters: int, kh: int, kw: int, stride: int = 1, padding: str = "SAME", *,
             bn: BatchNorm | None = None, relu: bool = True) -> Any:
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        name = self._name("conv")
        if padding == "SAME_RESNET":
            if stride == 1:
                padding = "SAME"
            else:
                x = tf.pad(x, [[0, 0], list(_resnet_pads(kh)), list(_resnet_pads(kw)), [0, 0]])
                padding = "VALID"
        init = tf.compat.v1.variance_scaling_initializer()
        kernel = self.variable(f"{name}/kernel", [kh, kw, _channels(x), filters], init, True)
        self.l2_variables.append(kernel)
        y = tf.nn.conv2d(x, kernel, strides=stride, padding=padding)
        if bn is None:
            bias = self.variable(f"{name}/bias", [filters], tf.compat.v1.zeros_initializer(), True)
            self.l2_variables.append(bias)
            y = tf.nn.bias_add(y, bias)
        else:
            y = self.batch_norm(y, bn, name=f"{name}/batchnorm")
        return tf.nn.relu(y) if relu else y

    def batch_norm(self, x: Any, bn: BatchNorm, *, name: str) -> Any:
        """Fused batch norm in training mode: batch statistics, moving averages updated (decay ``bn.decay``)."""
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        channels = _channels(x)
        ones, zeros = tf.compat.v1.ones_initializer(), tf.compat.v1.zeros_initializer()
        gamma = self.variable(f"{name}/gamma", [channels], ones, True) if bn.scale else tf.ones([channels])
        beta = self.variable(f"{name}/beta", [channels], zeros, True)
        moving_mean = self.variable(f"{name}/moving_mean", [channels], zeros, False)
        moving_variance = self.variable(f"{name}/moving_variance", [channels], ones, False)
        if not self.training:
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(x, gamma, beta, mean=moving_mean, variance=moving_variance,
                                                       epsilon=bn.epsilon, is_training=False)
            return y
        y, mean, variance = tf.compat.v1.nn.fused_batch_norm(x, gamma, beta, epsilon=bn.epsilon, is_training=True)
        d = bn.decay
        self.updates.append(moving_mean.assign(moving_mean * d + mean * (1 - d)))
        self.updates.append(moving_variance.assign(moving_variance * d + variance * (1 - d)))
        return y

    def dense(self, x: Any, units: int, *, relu: bool) -> Any:
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        name = self._name("affine")
        fan_in = _channels(x)
        init = tf.compat.v1.truncated_normal_initializer(stddev=_dense_stddev(fan_in, relu))
        kernel = self.variable(f"{name}/weights", [fan_in, units], init, True)
        bias = self.variable(f"{name}/biases", [units], tf.compat.v1.zeros_initializer(), True)
        self.l2_variables.extend([kernel, bias])
        y = tf.nn.bias_add(tf.matmul(x, kernel), bias)
        return tf.nn.relu(y) if relu else y

    @staticmethod
    def max_pool(x: Any, size: int, stride: int, padding: str = "VALID") -> Any:
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        return tf.nn.max_pool2d(x, size, stride, padding)

    @staticmethod
    def avg_pool(x: Any, size: int, stride: int, padding: str = "VALID") -> Any:
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        return tf.nn.avg_pool2d(x, size, stride, padding)

    def dropout(self, x: Any, rate: float) -> Any:
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        return tf.nn.dropout(x, rate=rate) if self.training else x

    @staticmethod
    def flatten(x: Any) -> Any:
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        return tf.reshape(x, [-1, math.prod(int(d) for d in x.shape[1:])])

    @staticmethod
    def spatial_mean(x: Any) -> Any:
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        return tf.reduce_mean(x, axis=[1, 2])

    @staticmethod
    def concat(xs: Sequence[Any]) -> Any:
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        return tf.concat(list(xs), axis=3)

    @staticmethod
    def add_relu(a: Any, b: Any) -> Any:
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        return tf.nn.relu(a + b)

    def weight_decay_loss(self, weight_decay: float = WEIGHT_DECAY) -> Any:
        return weight_decay_loss(self.l2_variables, weight_decay)


def _graph(architecture: Callable[[Net, Any, int], Any]) -> Callable[[GraphBuilder, Any, int], Any]:
    def build_graph(b: GraphBuilder, images: Any, num_classes: int) -> Any:
        return architecture(b, images, num_classes)

    build_graph.__doc__ = f"{architecture.__name__} as graph ops."
    return build_graph


GRAPH_MODELS: dict[ModelName, Callable[[GraphBuilder, Any, int], Any]] = {
    name: _graph(architecture) for name, architecture in ARCHITECTURES.items()
}
"""Graph-mode builders: ``(builder, images, num_classes) -> logits``."""
