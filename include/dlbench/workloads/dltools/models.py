"""The four networks of study 001's DL-tool set, as Keras models.

- FCN5 (Table VI): 784 inputs, hidden layers of 2048, 4096 and 1024 sigmoid units, 10 softmax
  outputs (the softmax is in the loss: the model returns logits).
- AlexNet for CIFAR-10: the CIFAR variant of the benchmark the paper cites ([1], DLBench's
  "AlexNet-R", after cuda-convnet's CIFAR net): three 5x5 convolutions of 32, 32 and 64 filters
  (stride 1, padding 2), 3x3/2 max, max and average pooling, ReLU, one fully connected layer to 10.
- ResNet-50 for CIFAR-10: He et al.'s CIFAR ResNet (section 4.2 of [14]) with 6n+2 = 50 weight
  layers (n = 8): a 3x3 convolution of 16 filters, three stages of 8 basic blocks (two 3x3
  convolutions with batch norm) of 16, 32 and 64 filters at 32, 16 and 8 pixels, parameter-free
  shortcuts (subsample by 2 and zero-pad the channels, option A), global average pooling, 10 outputs.
- LSTM: word-level PTB language model (Zaremba et al. [38], the paper's citation, as DLBench runs
  it): a 10000-word vocabulary embedded in 256 dimensions, 2 LSTM layers of 256 states unrolled over
  32 steps, a 10000-way softmax per step; the state is carried from batch to batch within an epoch.
"""

from __future__ import annotations

from typing import Any

from dlbench.workloads.profiles import LSTM_SEQUENCE_LENGTH, DLToolModel

FCN5_LAYERS = (784, 2048, 4096, 1024, 10)
"""Table VI: input, three sigmoid hidden layers, softmax output."""
CIFAR_SHAPE = (32, 32, 3)
NUM_CLASSES = 10
ALEXNET_FILTERS = (32, 32, 64)
RESNET_BLOCKS_PER_STAGE = 8
"""6n + 2 = 50 weight layers."""
RESNET_FILTERS = (16, 32, 64)
LSTM_HIDDEN = 256
LSTM_LAYERS = 2
PTB_VOCABULARY = 10000
BN_MOMENTUM, BN_EPSILON = 0.9, 1e-5


def build(model: DLToolModel | str) -> Any:
    """A fresh Keras model of ``model``."""
    builders = {
        DLToolModel.FCN5: fcn5,
        DLToolModel.ALEXNET: alexnet_cifar10,
        DLToolModel.RESNET50: resnet50_cifar10,
        DLToolModel.LSTM: lstm_ptb,
    }
    return builders[DLToolModel(model)]()


def fcn5() -> Any:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    keras = tf.keras
    inputs = keras.Input((FCN5_LAYERS[0],), name="pixels")
    x = inputs
    for i, units in enumerate(FCN5_LAYERS[1:-1], start=1):
        x = keras.layers.Dense(units, activation="sigmoid", kernel_initializer="glorot_uniform", name=f"hidden{i}")(x)
    logits = keras.layers.Dense(FCN5_LAYERS[-1], name="output")(x)
    return keras.Model(inputs, logits, name="fcn5")


def alexnet_cifar10() -> Any:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    keras = tf.keras
    layers = keras.layers
    conv_init = keras.initializers.TruncatedNormal(stddev=1e-2)
    inputs = keras.Input(CIFAR_SHAPE, name="images")
    x = inputs
    for i, filters in enumerate(ALEXNET_FILTERS, start=1):
        # 5x5 with 2 pixels of zero padding and stride 1 keeps the size: "same".
        x = layers.Conv2D(filters, 5, padding="same", kernel_initializer=conv_init, name=f"conv{i}")(x)
        if i < len(ALEXNET_FILTERS):
            x = layers.MaxPooling2D(3, strides=2, padding="valid", name=f"pool{i}")(x)  # 32 -> 15 -> 7
            x = layers.ReLU(name=f"relu{i}")(x)
        else:
            x = layers.ReLU(name=f"relu{i}")(x)
            x = layers.AveragePooling2D(3, strides=2, padding="valid", name=f"pool{i}")(x)  # 7 -> 3
    x = layers.Flatten(name="flatten")(x)  # 3 x 3 x 64 = 576
    logits = layers.Dense(NUM_CLASSES, kernel_initializer=conv_init, name="output")(x)
    return keras.Model(inputs, logits, name="alexnet_cifar10")


def _channel_pad_layer() -> Any:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    class ChannelPad(tf.keras.layers.Layer):
        """Option A shortcut: zero channels added on both sides (no parameters)."""

        def __init__(self, extra: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.extra = extra

        def call(self, x: Any) -> Any:
            half = self.extra // 2
            return tf.pad(x, [[0, 0], [0, 0], [0, 0], [half, self.extra - half]])

        def compute_output_shape(self, shape: Any) -> Any:
            return (*shape[:-1], shape[-1] + self.extra)

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "extra": self.extra}

    return ChannelPad


def resnet50_cifar10() -> Any:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    keras = tf.keras
    layers = keras.layers
    channel_pad = _channel_pad_layer()

    def conv_bn(x: Any, filters: int, stride: int, name: str) -> Any:
        x = layers.Conv2D(
            filters,
            3,
            strides=stride,
            padding="same",
            use_bias=False,
            kernel_initializer="he_normal",
            name=f"{name}_conv",
        )(x)
        return layers.BatchNormalization(momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name=f"{name}_bn")(x)

    inputs = keras.Input(CIFAR_SHAPE, name="images")
    x = layers.ReLU(name="stem_relu")(conv_bn(inputs, RESNET_FILTERS[0], 1, "stem"))
    for stage, filters in enumerate(RESNET_FILTERS, start=1):
        for block in range(1, RESNET_BLOCKS_PER_STAGE + 1):
            stride = 2 if stage > 1 and block == 1 else 1
            name = f"stage{stage}_block{block}"
            shortcut = x
            y = layers.ReLU(name=f"{name}_relu1")(conv_bn(x, filters, stride, f"{name}_a"))
            y = conv_bn(y, filters, 1, f"{name}_b")
            if stride != 1:
                shortcut = layers.AveragePooling2D(1, strides=stride, name=f"{name}_subsample")(shortcut)
            if shortcut.shape[-1] != filters:
                shortcut = channel_pad(filters - shortcut.shape[-1], name=f"{name}_pad")(shortcut)
            x = layers.ReLU(name=f"{name}_relu2")(layers.Add(name=f"{name}_add")([y, shortcut]))
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    logits = layers.Dense(NUM_CLASSES, name="output")(x)
    return keras.Model(inputs, logits, name="resnet50_cifar10")


def lstm_ptb(vocabulary: int = PTB_VOCABULARY) -> Any:
    """Inputs: word ids (batch, 32) and the 2 x (h, c) states; outputs: logits (batch, 32, vocab)
    and the new states, so the caller carries them to the next batch (truncated BPTT)."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    keras = tf.keras
    layers = keras.layers
    init = keras.initializers.RandomUniform(-0.1, 0.1)
    words = keras.Input((LSTM_SEQUENCE_LENGTH,), dtype="int32", name="words")
    states = [keras.Input((LSTM_HIDDEN,), name=f"{kind}{i}") for i in range(LSTM_LAYERS) for kind in ("h", "c")]
    x = layers.Embedding(vocabulary, LSTM_HIDDEN, embeddings_initializer=init, name="embedding")(words)
    new_states = []
    for i in range(LSTM_LAYERS):
        x, h, c = layers.LSTM(
            LSTM_HIDDEN,
            return_sequences=True,
            return_state=True,
            unit_forget_bias=False,
            kernel_initializer=init,
            recurrent_initializer=init,
            name=f"lstm{i + 1}",
        )(x, initial_state=states[2 * i : 2 * i + 2])
        new_states += [h, c]
    logits = layers.Dense(vocabulary, kernel_initializer=init, name="softmax")(x)
    return keras.Model([words, *states], [logits, *new_states], name="lstm_ptb")


def trainable_parameters(model: Any) -> int:
    import numpy as np  # heavy: numpy loads with TensorFlow, only when a model is built

    return int(sum(int(np.prod(w.shape)) for w in model.trainable_weights))
