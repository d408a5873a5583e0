"""The three image-classification models of the core study, built with Keras.

InceptionV3 and ResNet-50 are Keras applications (random weights: we time training, not
accuracy). AlexNet is the one-tower variant of tf_cnn_benchmarks (``models/alexnet_model.py``),
the reference the study ran: 11x11/4 VALID stem, 5x5 and three 3x3 convolutions, three 3x3/2
max pools, two 4096 dense layers with dropout.

The same three networks also exist as TF1 graph builders (:data:`GRAPH_MODELS`) for the
distributed_replicated mode, which needs graph mode (see the comment above them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dlbench.workloads.profiles import ModelName, TrainingSpec


def alexnet(image_size: int, num_classes: int) -> Any:
    import tensorflow as tf

    layers = tf.keras.layers
    inputs = tf.keras.Input(shape=(image_size, image_size, 3), name="images")
    x = layers.Conv2D(64, 11, strides=4, padding="valid", activation="relu", name="conv1")(inputs)
    x = layers.MaxPooling2D(3, strides=2, name="pool1")(x)
    x = layers.Conv2D(192, 5, padding="same", activation="relu", name="conv2")(x)
    x = layers.MaxPooling2D(3, strides=2, name="pool2")(x)
    x = layers.Conv2D(384, 3, padding="same", activation="relu", name="conv3")(x)
    x = layers.Conv2D(384, 3, padding="same", activation="relu", name="conv4")(x)
    x = layers.Conv2D(256, 3, padding="same", activation="relu", name="conv5")(x)
    x = layers.MaxPooling2D(3, strides=2, name="pool5")(x)
    x = layers.Flatten()(x)
    x = layers.Dense(4096, activation="relu", name="fc6")(x)
    x = layers.Dropout(0.5)(x)
    x = layers.Dense(4096, activation="relu", name="fc7")(x)
    x = layers.Dropout(0.5)(x)
    outputs = layers.Dense(num_classes, name="logits")(x)
    return tf.keras.Model(inputs, outputs, name="alexnet")


def build(model: ModelName | str, spec: TrainingSpec) -> Any:
    """A Keras model producing logits for ``spec.num_classes`` classes on NHWC input."""
    import tensorflow as tf

    model = ModelName(model)
    shape = (spec.image_size, spec.image_size, 3)
    if model is ModelName.ALEXNET:
        return alexnet(spec.image_size, spec.num_classes)
    if model is ModelName.RESNET50:
        return tf.keras.applications.ResNet50(
            weights=None, input_shape=shape, classes=spec.num_classes, classifier_activation=None
        )
    if model is ModelName.INCEPTION3:
        return tf.keras.applications.InceptionV3(
            weights=None, input_shape=shape, classes=spec.num_classes, classifier_activation=None
        )
    raise ValueError(f"unknown model {model!r}")


# --- Graph-mode builders (TF1 ``tf.compat.v1`` graphs: distributed_replicated) ---------------------
#
# tf_cnn_benchmarks' distributed_replicated mode is between-graph replication: every worker builds
# its own TF1 graph, with global variables on the parameter servers and local copies on its own
# device. Keras 3 (what tf.keras is now) cannot build TF1 graphs. The tf_keras package (Keras 2)
# can, but its wheel requires the ``tensorflow`` distribution, which pip cannot see tensorflow-cpu
# provide: installing it would put the CUDA ``tensorflow`` build over tensorflow-cpu in the same
# site-packages. So, like tf_cnn_benchmarks' own model builders, these layers are plain ops. They
# reproduce the Keras models above layer for layer (same shapes, same variables, same default
# initialisers; tests/workloads/test_distributed.py checks the parameter counts are equal), so the
# single and distributed scenarios train the same networks.

VariableFactory = Callable[[str, list[int], Any, bool], Any]
"""``(name, shape, initializer, trainable) -> variable`` the tower's ops read; the caller decides
where variables live (for distributed_replicated: a local copy of a global on a parameter server)."""


class GraphBuilder:
    """Keras-equivalent layers as ``tf.compat.v1`` graph ops for one tower (NHWC, training mode)."""

    def __init__(self, variable: VariableFactory, *, training: bool = True) -> None:
        self.variable = variable
        self.training = training
        self.updates: list[Any] = []  # batch-norm moving-average updates, run with every step

    def conv(self, x: Any, filters: int, kernel: int | tuple[int, int], *, strides: int = 1,
             padding: str = "valid", use_bias: bool = True, name: str) -> Any:
        """Keras Conv2D (default padding 'valid', glorot-uniform kernel, zero bias)."""
        import tensorflow as tf

        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        kernel_var = self.variable(f"{name}/kernel", [kh, kw, int(x.shape[-1]), filters],
                                   tf.compat.v1.glorot_uniform_initializer(), True)
        y = tf.nn.conv2d(x, kernel_var, strides=strides, padding=padding.upper())
        if use_bias:
            y = tf.nn.bias_add(y, self.variable(f"{name}/bias", [filters], tf.compat.v1.zeros_initializer(), True))
        return y

    def batch_norm(self, x: Any, *, scale: bool = True, epsilon: float = 1e-3, momentum: float = 0.99,
                   name: str) -> Any:
        """Keras BatchNormalization in training mode: batch statistics, moving averages updated."""
        import tensorflow as tf

        channels = int(x.shape[-1])
        ones, zeros = tf.compat.v1.ones_initializer(), tf.compat.v1.zeros_initializer()
        gamma = self.variable(f"{name}/gamma", [channels], ones, True) if scale else tf.ones([channels])
        beta = self.variable(f"{name}/beta", [channels], zeros, True)
        moving_mean = self.variable(f"{name}/moving_mean", [channels], zeros, False)
        moving_variance = self.variable(f"{name}/moving_variance", [channels], ones, False)
        if not self.training:
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(x, gamma, beta, mean=moving_mean, variance=moving_variance,
                                                       epsilon=epsilon, is_training=False)
            return y
        y, mean, variance = tf.compat.v1.nn.fused_batch_norm(x, gamma, beta, epsilon=epsilon, is_training=True)
        self.updates.append(moving_mean.assign(moving_mean * momentum + mean * (1 - momentum)))
        self.updates.append(moving_variance.assign(moving_variance * momentum + variance * (1 - momentum)))
        return y

    def dense(self, x: Any, units: int, *, name: str) -> Any:
        import tensorflow as tf

        kernel = self.variable(f"{name}/kernel", [int(x.shape[-1]), units],
                               tf.compat.v1.glorot_uniform_initializer(), True)
        bias = self.variable(f"{name}/bias", [units], tf.compat.v1.zeros_initializer(), True)
        return tf.nn.bias_add(tf.matmul(x, kernel), bias)

    @staticmethod
    def max_pool(x: Any, size: int, strides: int, padding: str = "valid") -> Any:
        import tensorflow as tf

        return tf.nn.max_pool2d(x, size, strides, padding.upper())

    @staticmethod
    def avg_pool(x: Any, size: int, strides: int, padding: str = "valid") -> Any:
        import tensorflow as tf

        return tf.nn.avg_pool2d(x, size, strides, padding.upper())

    def dropout(self, x: Any, rate: float) -> Any:
        import tensorflow as tf

        return tf.nn.dropout(x, rate=rate) if self.training else x


def graph_alexnet(b: GraphBuilder, images: Any, num_classes: int) -> Any:
    """:func:`alexnet` as graph ops."""
    import tensorflow as tf

    relu = tf.nn.relu
    x = relu(b.conv(images, 64, 11, strides=4, padding="valid", name="conv1"))
    x = b.max_pool(x, 3, 2)
    x = relu(b.conv(x, 192, 5, padding="same", name="conv2"))
    x = b.max_pool(x, 3, 2)
    x = relu(b.conv(x, 384, 3, padding="same", name="conv3"))
    x = relu(b.conv(x, 384, 3, padding="same", name="conv4"))
    x = relu(b.conv(x, 256, 3, padding="same", name="conv5"))
    x = b.max_pool(x, 3, 2)
    x = tf.reshape(x, [-1, int(x.shape[1]) * int(x.shape[2]) * int(x.shape[3])])
    x = b.dropout(relu(b.dense(x, 4096, name="fc6")), 0.5)
    x = b.dropout(relu(b.dense(x, 4096, name="fc7")), 0.5)
    return b.dense(x, num_classes, name="logits")


def graph_resnet50(b: GraphBuilder, images: Any, num_classes: int) -> Any:
    """Keras ``applications.ResNet50`` (v1: stride on the first 1x1 convolution, biased convolutions,
    batch-norm epsilon 1.001e-5) as graph ops."""
    import tensorflow as tf

    relu = tf.nn.relu
    eps = 1.001e-5

    def block(x: Any, filters: int, stride: int, conv_shortcut: bool, name: str) -> Any:
        if conv_shortcut:
            shortcut = b.batch_norm(b.conv(x, 4 * filters, 1, strides=stride, name=f"{name}_0_conv"),
                                    epsilon=eps, name=f"{name}_0_bn")
        else:
            shortcut = x
        y = relu(b.batch_norm(b.conv(x, filters, 1, strides=stride, name=f"{name}_1_conv"),
                              epsilon=eps, name=f"{name}_1_bn"))
        y = relu(b.batch_norm(b.conv(y, filters, 3, padding="same", name=f"{name}_2_conv"),
                              epsilon=eps, name=f"{name}_2_bn"))
        y = b.batch_norm(b.conv(y, 4 * filters, 1, name=f"{name}_3_conv"), epsilon=eps, name=f"{name}_3_bn")
        return relu(shortcut + y)

    x = tf.pad(images, [[0, 0], [3, 3], [3, 3], [0, 0]])
    x = relu(b.batch_norm(b.conv(x, 64, 7, strides=2, name="conv1_conv"), epsilon=eps, name="conv1_bn"))
    x = b.max_pool(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), 3, 2)
    for stage, (filters, blocks, stride) in enumerate(((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)), start=2):
        x = block(x, filters, stride, True, f"conv{stage}_block1")
        for index in range(2, blocks + 1):
            x = block(x, filters, 1, False, f"conv{stage}_block{index}")
    x = tf.reduce_mean(x, axis=[1, 2])
    return b.dense(x, num_classes, name="predictions")


def graph_inception3(b: GraphBuilder, images: Any, num_classes: int) -> Any:
    """Keras ``applications.InceptionV3`` (unbiased convolutions, batch norm without scale) as graph ops."""
    import tensorflow as tf

    counter = iter(range(1_000))

    def cbn(x: Any, filters: int, rows: int, cols: int, padding: str = "same", strides: int = 1) -> Any:
        index = next(counter)
        y = b.conv(x, filters, (rows, cols), strides=strides, padding=padding, use_bias=False, name=f"conv2d_{index}")
        return tf.nn.relu(b.batch_norm(y, scale=False, name=f"batch_normalization_{index}"))

    def concat(*branches: Any) -> Any:
        return tf.concat(list(branches), axis=3)

    x = cbn(images, 32, 3, 3, strides=2, padding="valid")
    x = cbn(x, 32, 3, 3, padding="valid")
    x = cbn(x, 64, 3, 3)
    x = b.max_pool(x, 3, 2)
    x = cbn(x, 80, 1, 1, padding="valid")
    x = cbn(x, 192, 3, 3, padding="valid")
    x = b.max_pool(x, 3, 2)
    for pool_filters in (32, 64, 64):  # mixed 0, 1, 2: 35 x 35
        branch1x1 = cbn(x, 64, 1, 1)
        branch5x5 = cbn(cbn(x, 48, 1, 1), 64, 5, 5)
        branch3x3dbl = cbn(cbn(cbn(x, 64, 1, 1), 96, 3, 3), 96, 3, 3)
        branch_pool = cbn(b.avg_pool(x, 3, 1, "same"), pool_filters, 1, 1)
        x = concat(branch1x1, branch5x5, branch3x3dbl, branch_pool)
    # mixed 3: 17 x 17
    branch3x3 = cbn(x, 384, 3, 3, strides=2, padding="valid")
    branch3x3dbl = cbn(cbn(cbn(x, 64, 1, 1), 96, 3, 3), 96, 3, 3, strides=2, padding="valid")
    x = concat(branch3x3, branch3x3dbl, b.max_pool(x, 3, 2))
    for width in (128, 160, 160, 192):  # mixed 4, 5, 6, 7
        branch1x1 = cbn(x, 192, 1, 1)
        branch7x7 = cbn(cbn(cbn(x, width, 1, 1), width, 1, 7), 192, 7, 1)
        branch7x7dbl = cbn(x, width, 1, 1)
        branch7x7dbl = cbn(cbn(branch7x7dbl, width, 7, 1), width, 1, 7)
        branch7x7dbl = cbn(cbn(branch7x7dbl, width, 7, 1), 192, 1, 7)
        branch_pool = cbn(b.avg_pool(x, 3, 1, "same"), 192, 1, 1)
        x = concat(branch1x1, branch7x7, branch7x7dbl, branch_pool)
    # mixed 8: 8 x 8
    branch3x3 = cbn(cbn(x, 192, 1, 1), 320, 3, 3, strides=2, padding="valid")
    branch7x7x3 = cbn(cbn(cbn(x, 192, 1, 1), 192, 1, 7), 192, 7, 1)
    branch7x7x3 = cbn(branch7x7x3, 192, 3, 3, strides=2, padding="valid")
    x = concat(branch3x3, branch7x7x3, b.max_pool(x, 3, 2))
    for _ in range(2):  # mixed 9, 10
        branch1x1 = cbn(x, 320, 1, 1)
        branch3x3 = cbn(x, 384, 1, 1)
        branch3x3 = concat(cbn(branch3x3, 384, 1, 3), cbn(branch3x3, 384, 3, 1))
        branch3x3dbl = cbn(cbn(x, 448, 1, 1), 384, 3, 3)
        branch3x3dbl = concat(cbn(branch3x3dbl, 384, 1, 3), cbn(branch3x3dbl, 384, 3, 1))
        branch_pool = cbn(b.avg_pool(x, 3, 1, "same"), 192, 1, 1)
        x = concat(branch1x1, branch3x3, branch3x3dbl, branch_pool)
    x = tf.reduce_mean(x, axis=[1, 2])
    return b.dense(x, num_classes, name="predictions")


GRAPH_MODELS: dict[ModelName, Callable[[GraphBuilder, Any, int], Any]] = {
    ModelName.ALEXNET: graph_alexnet,
    ModelName.RESNET50: graph_resnet50,
    ModelName.INCEPTION3: graph_inception3,
}
"""Graph-mode builders: ``(builder, images, num_classes) -> logits``."""
