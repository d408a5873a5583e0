"""The core study's networks as Keras 3 models, on whatever backend Keras runs (TensorFlow, JAX).

:class:`KerasNet` implements :class:`~dlbench.workloads.cnn.nets.Net` with Keras layers, so the
architectures written once in :mod:`.nets` become functional Keras models: TensorFlow's trainer
builds them with its fused batch norm (:func:`dlbench.workloads.cnn.tf_nets.build`), JAX's with
Keras' own (:func:`keras_batch_norm`). Imports Keras only where a model is built: which backend it
loads is the calling trainer's choice, never this module's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dlbench.workloads.cnn.nets import ARCHITECTURES, BatchNorm, channels, dense_stddev, resnet_pads
from dlbench.workloads.profiles import ModelName, TrainingSpec

BatchNormFactory = Callable[[BatchNorm], Any]
"""``BatchNorm -> Keras layer``: how a :class:`KerasNet` normalises after an unbiased convolution."""


def _conv_initializer(keras: Any) -> Any:
    # tf.compat.v1.variance_scaling_initializer()'s defaults, what convnet_builder.conv uses.
    return keras.initializers.VarianceScaling(scale=1.0, mode="fan_in", distribution="truncated_normal")


def keras_batch_norm(keras: Any) -> BatchNormFactory:
    """Keras' own BatchNormalization with the harness's settings, for a backend without TensorFlow's
    fused kernel (JAX): moving averages with momentum ``bn.decay`` (Keras' momentum is the decay),
    gamma only where the model's batch norm has a scale, beta always."""

    def layer(bn: BatchNorm) -> Any:
        return keras.layers.BatchNormalization(momentum=bn.decay, epsilon=bn.epsilon, scale=bn.scale, center=True)

    return layer


def is_batch_norm(layer: Any) -> bool:
    # The standalone package: tf.keras.layers.BatchNormalization is this very class (Keras 3), and a
    # JAX process has no TensorFlow to import.
    import keras  # heavy: Keras loads its backend (TensorFlow or JAX); only a built model gets here

    return isinstance(layer, keras.layers.BatchNormalization) or type(layer).__name__ == "FusedBatchNorm"


class KerasNet:
    """:class:`Net` as Keras layers on symbolic tensors (a functional model).

    ``keras`` is the Keras module whose layers build the model and ``batch_norm`` what follows an
    unbiased convolution: TensorFlow's Keras with the harness's fused batch norm
    (:mod:`.tf_nets`), or Keras 3 on another backend with the one that backend has
    (:func:`keras_batch_norm`)."""

    def __init__(self, keras: Any, batch_norm: BatchNormFactory) -> None:
        self.keras = keras
        self.layers = self.keras.layers
        self.batch_norm = batch_norm

    def conv(self, x: Any, filters: int, kh: int, kw: int, stride: int = 1, padding: str = "SAME", *,
             bn: BatchNorm | None = None, relu: bool = True) -> Any:
        if padding == "SAME_RESNET":
            if stride == 1:
                padding = "SAME"
            else:
                x = self.layers.ZeroPadding2D((resnet_pads(kh), resnet_pads(kw)))(x)
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
        init = self.keras.initializers.TruncatedNormal(stddev=dense_stddev(channels(x), relu))
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


def build(model: ModelName | str, spec: TrainingSpec, *, keras: Any, batch_norm: BatchNormFactory) -> Any:
    """A Keras model producing logits for ``spec.num_classes`` classes on NHWC input, of the
    ``keras`` module given with its ``batch_norm`` (see :class:`KerasNet`)."""
    net = KerasNet(keras, batch_norm)
    model = ModelName(model)
    inputs = net.keras.Input(shape=(spec.image_size, spec.image_size, 3), name="images")
    outputs = ARCHITECTURES[model](net, inputs, spec.num_classes)
    return net.keras.Model(inputs, outputs, name=model.value)


def l2_variables(model: Any) -> list[Any]:
    """The trainable variables weight decay applies to: all but batch norm's (``filter_l2_loss_vars``)."""
    return [w for layer in model.layers if not is_batch_norm(layer) for w in layer.trainable_weights]
