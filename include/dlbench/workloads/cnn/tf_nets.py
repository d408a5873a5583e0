"""TensorFlow's own pieces of the core study's networks: the fused batch norm, weight decay, TF1 graphs.

:func:`build` is :mod:`.keras_nets`' model on TensorFlow's Keras with the harness's fused batch
norm; :class:`GraphBuilder` is :class:`~dlbench.workloads.cnn.nets.Net` as ``tf.compat.v1`` graph
ops for the distributed_replicated mode (:mod:`.tf_cluster`), so both modes train the same networks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from dlbench.workloads.cnn import keras_nets
from dlbench.workloads.cnn.nets import ARCHITECTURES, WEIGHT_DECAY, BatchNorm, Net, channels, dense_stddev, resnet_pads
from dlbench.workloads.profiles import ModelName, TrainingSpec


def tf_keras() -> Any:
    """TensorFlow's Keras (Keras 3 on the TensorFlow backend), the TensorFlow runner's."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    return tf.keras


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


def build(model: ModelName | str, spec: TrainingSpec) -> Any:
    """A TensorFlow Keras model of ``model`` (logits for ``spec.num_classes`` classes, NHWC input)
    with the harness's fused batch norm: what the TensorFlow trainer trains."""
    return keras_nets.build(model, spec, keras=tf_keras(), batch_norm=fused_batch_norm_layer)


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
                x = tf.pad(x, [[0, 0], list(resnet_pads(kh)), list(resnet_pads(kw)), [0, 0]])
                padding = "VALID"
        init = tf.compat.v1.variance_scaling_initializer()
        kernel = self.variable(f"{name}/kernel", [kh, kw, channels(x), filters], init, True)
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

        depth = channels(x)
        ones, zeros = tf.compat.v1.ones_initializer(), tf.compat.v1.zeros_initializer()
        gamma = self.variable(f"{name}/gamma", [depth], ones, True) if bn.scale else tf.ones([depth])
        beta = self.variable(f"{name}/beta", [depth], zeros, True)
        moving_mean = self.variable(f"{name}/moving_mean", [depth], zeros, False)
        moving_variance = self.variable(f"{name}/moving_variance", [depth], ones, False)
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
        fan_in = channels(x)
        init = tf.compat.v1.truncated_normal_initializer(stddev=dense_stddev(fan_in, relu))
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
