"""The three image-classification models of the core study, built with Keras.

InceptionV3 and ResNet-50 are Keras applications (random weights: we time training, not
accuracy). AlexNet is the one-tower variant of tf_cnn_benchmarks (``models/alexnet_model.py``),
the reference the study ran: 11x11/4 VALID stem, 5x5 and three 3x3 convolutions, three 3x3/2
max pools, two 4096 dense layers with dropout.
"""

from __future__ import annotations

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
