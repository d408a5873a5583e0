"""Fathom's three ImageNet classifiers, ``alexnet``, ``vgg`` and ``residual``, in Keras.

Each is the network of rdadolf/fathom's ``fathom/<name>/<name>.py`` layer for layer (docs/fathom.md
lists every choice): 224x224x3 inputs, 1001 classes (Fathom's ``ImagenetModel``: ImageNet's 1000 +
background), the mean softmax cross-entropy of integer labels, Adam at the workload's learning rate
(``ImagenetModel.build_train``). Initialisers are Keras' defaults, not Fathom's (its AlexNet draws
the dense weights from N(0, 1), which overflows the loss; the initialiser changes no step's work).

This module imports TensorFlow: :func:`dlbench.workloads.fathom.workload.workload` imports it only
when one of these models runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf

from dlbench.workloads.fathom.steps import forward_step, gradient_step
from dlbench.workloads.fathom.workload import (
    DataMode,
    DataSource,
    FathomData,
    FathomWorkload,
    InferStep,
    TrainStep,
    generated_only,
)
from dlbench.workloads.profiles import DataKind, FathomModel
from dlbench.workloads.profiles.fathom import AlexNetSpec, ResidualSpec, VGGSpec

ImageSpec = AlexNetSpec | VGGSpec | ResidualSpec

DISTINCT_BATCHES = 2
"""Generated batches a run cycles through: more than one, so no step sees the previous step's
input, few, so a paper-size batch (VGG, AlexNet at 224x224) costs little memory."""

LRN = {"depth_radius": 4, "bias": 1.0, "alpha": 0.001 / 9.0, "beta": 0.75}
"""AlexNet's local response normalisation: ``tf.nn.lrn(x, 4, bias=1.0, alpha=0.001/9, beta=0.75)``."""


def _conv(n: int, k: int, s: int, n_in: int) -> int:
    """Weights + biases of a k x k convolution from ``n_in`` to ``n`` channels (``s`` is unused: the
    stride changes activations, not parameters; kept to read like the layer list)."""
    del s
    return k * k * n_in * n + n


def _dense(n_in: int, n: int, bias: bool = True) -> int:
    return n_in * n + (n if bias else 0)


def _pool_valid(size: int, k: int, s: int) -> int:
    return (size - k) // s + 1


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# -- AlexNet -------------------------------------------------------------------------------------


def alexnet_parameters(spec: AlexNetSpec) -> int:
    """conv1 11x11/4 SAME, pool 3/2 VALID, conv2 5x5, pool, conv3..5 3x3, pool, then dense layers
    from the last pool's pixels."""
    f = spec.filters
    side = _pool_valid(_ceil_div(spec.image_size, 4), 3, 2)  # conv1 (SAME, stride 4), pool1
    side = _pool_valid(side, 3, 2)  # conv2 keeps it, pool2
    side = _pool_valid(side, 3, 2)  # conv3..5 keep it, pool5
    convs = _conv(f[0], 11, 4, 3) + _conv(f[1], 5, 1, f[0]) + _conv(f[2], 3, 1, f[1]) + _conv(f[3], 3, 1, f[2]) \
        + _conv(f[4], 3, 1, f[3])
    return convs + _dense(side * side * f[4], spec.fc_width) + _dense(spec.fc_width, spec.fc_width) \
        + _dense(spec.fc_width, spec.classes)


def build_alexnet(spec: AlexNetSpec) -> Any:
    layers = tf.keras.layers
    f = spec.filters

    def lrn(x: Any) -> Any:
        return tf.nn.local_response_normalization(x, **LRN)

    images = tf.keras.Input((spec.image_size, spec.image_size, 3), name="images")
    x = layers.Conv2D(f[0], 11, strides=4, padding="same", activation="relu", name="conv1")(images)
    x = layers.MaxPool2D(3, strides=2, padding="valid", name="pool1")(x)
    x = layers.Lambda(lrn, name="norm1")(x)
    x = layers.Conv2D(f[1], 5, padding="same", activation="relu", name="conv2")(x)
    x = layers.MaxPool2D(3, strides=2, padding="valid", name="pool2")(x)
    x = layers.Lambda(lrn, name="norm2")(x)
    x = layers.Conv2D(f[2], 3, padding="same", activation="relu", name="conv3")(x)
    x = layers.Conv2D(f[3], 3, padding="same", activation="relu", name="conv4")(x)
    x = layers.Conv2D(f[4], 3, padding="same", activation="relu", name="conv5")(x)
    x = layers.MaxPool2D(3, strides=2, padding="valid", name="pool5")(x)
    x = layers.Flatten()(x)
    # Fathom declares a dropout (keep 0.8) but never applies it to AlexNet's layers.
    x = layers.Dense(spec.fc_width, activation="relu", name="fc1")(x)
    x = layers.Dense(spec.fc_width, activation="relu", name="fc2")(x)
    logits = layers.Dense(spec.classes, name="logits")(x)
    return tf.keras.Model(images, logits, name="alexnet")


# -- VGG ----------------------------------------------------------------------------------------


def vgg_parameters(spec: VGGSpec) -> int:
    """3x3 SAME convolutions stage by stage, a 2x2/2 VALID pool after each stage, then fc6, fc7
    (``fc_width``) and fc8 (``classes``), all biased."""
    total, channels, side = 0, 3, spec.image_size
    for stage in spec.stages:
        for n in stage:
            total += _conv(n, 3, 1, channels)
            channels = n
        side = _pool_valid(side, 2, 2)
    return total + _dense(side * side * channels, spec.fc_width) + _dense(spec.fc_width, spec.fc_width) \
        + _dense(spec.fc_width, spec.classes)


def build_vgg(spec: VGGSpec) -> Any:
    layers = tf.keras.layers
    images = tf.keras.Input((spec.image_size, spec.image_size, 3), name="images")
    x = images
    for s, stage in enumerate(spec.stages, start=1):
        for c, n in enumerate(stage, start=1):
            x = layers.Conv2D(n, 3, padding="same", activation="relu", name=f"conv{s}_{c}")(x)
        x = layers.MaxPool2D(2, strides=2, padding="valid", name=f"pool{s}")(x)
    x = layers.Flatten()(x)
    drop = 1.0 - spec.keep_probability
    x = layers.Dense(spec.fc_width, activation="relu", name="fc6")(x)
    x = layers.Dropout(drop, name="fc6_drop")(x)
    x = layers.Dense(spec.fc_width, activation="relu", name="fc7")(x)
    x = layers.Dropout(drop, name="fc7_drop")(x)
    # Fathom's fc_op is tf.nn.relu_layer for fc8 too: its logits pass through a ReLU. Kept.
    logits = layers.Dense(spec.classes, activation="relu", name="fc8")(x)
    return tf.keras.Model(images, logits, name="vgg")


# -- Residual -----------------------------------------------------------------------------------


def residual_parameters(spec: ResidualSpec) -> int:
    """Stem 7x7 (biased), a 1x1 to the first stage's width (biased), per unit 1x1 + 3x3 + 1x1
    (biased), a bias-free 1x1 between stages, a bias-free linear classifier."""
    blocks = spec.blocks
    total = _conv(spec.stem_filters, 7, 2, 3) + _conv(blocks[0].filters, 1, 1, spec.stem_filters)
    for i, block in enumerate(blocks):
        unit = _conv(block.bottleneck, 1, 1, block.filters) + _conv(block.bottleneck, 3, 1, block.bottleneck) \
            + _conv(block.filters, 1, 1, block.bottleneck)
        total += block.repeats * unit
        if i + 1 < len(blocks):
            total += block.filters * blocks[i + 1].filters
    return total + _dense(blocks[-1].filters, spec.classes, bias=False)


def build_residual(spec: ResidualSpec) -> Any:
    layers = tf.keras.layers
    blocks = spec.blocks
    images = tf.keras.Input((spec.image_size, spec.image_size, 3), name="images")
    x = layers.Conv2D(spec.stem_filters, 7, strides=2, padding="same", activation="relu", name="conv1")(images)
    x = layers.MaxPool2D(3, strides=2, padding="same", name="pool1")(x)
    # Fathom's conv2d defaults to no activation: this 1x1 is linear.
    x = layers.Conv2D(blocks[0].filters, 1, padding="valid", name="conv2")(x)
    for i, block in enumerate(blocks):
        for r in range(block.repeats):
            name = f"block_{i}_repeat_{r}"
            y = layers.Conv2D(block.bottleneck, 1, activation="relu", name=f"{name}_conv_in")(x)
            y = layers.Conv2D(block.bottleneck, 3, padding="same", activation="relu", name=f"{name}_conv_bottleneck")(y)
            y = layers.Conv2D(block.filters, 1, activation="relu", name=f"{name}_conv_out")(y)
            x = layers.Add(name=f"{name}_add")([y, x])
        if i + 1 < len(blocks):
            x = layers.Conv2D(blocks[i + 1].filters, 1, use_bias=False, name=f"block_{i}_conv_upscale")(x)
    x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    logits = layers.Dense(spec.classes, use_bias=False, name="linear")(x)
    return tf.keras.Model(images, logits, name="residual")


# -- the workload -------------------------------------------------------------------------------


def _case(spec: ImageSpec) -> dict[str, Any]:
    return {"image_size": spec.image_size, "classes": spec.classes}


def alexnet_case(spec: AlexNetSpec) -> dict[str, Any]:
    return _case(spec) | {"filters": "-".join(map(str, spec.filters)), "fc_width": spec.fc_width}


def vgg_case(spec: VGGSpec) -> dict[str, Any]:
    return _case(spec) | {"stages": "/".join("-".join(map(str, s)) for s in spec.stages), "fc_width": spec.fc_width,
                          "keep_probability": spec.keep_probability}


def residual_case(spec: ResidualSpec) -> dict[str, Any]:
    return _case(spec) | {"stem_filters": spec.stem_filters,
                          "blocks": "/".join(f"{b.repeats}x{b.filters}:{b.bottleneck}" for b in spec.blocks)}


def image_data(model: FathomModel) -> DataSource:
    """``model``'s data: generated images (ImageNet is not read here)."""

    def data(spec: ImageSpec, batch_size: int, *, mode: DataMode, data_dir: Path | None, seed: int,
             steps: int) -> FathomData:
        generated_only(mode, f"{model} trains on ImageNet, which this suite does not read")
        tf.random.set_seed(seed)
        shape = (batch_size, spec.image_size, spec.image_size, 3)
        batches = [
            (tf.random.uniform(shape, -1.0, 1.0), tf.random.uniform((batch_size,), 0, spec.classes, tf.int32))
            for _ in range(min(steps, DISTINCT_BATCHES))
        ]
        return FathomData(batches, DataKind.SYNTHETIC, f"generated: uniform [-1, 1) images {shape}, "
                          f"uniform labels of {spec.classes} classes")

    return data


def train_step(net: Any, spec: ImageSpec) -> TrainStep:
    """Adam on the mean softmax cross-entropy of the integer labels."""

    def loss(images: Any, labels: Any) -> Any:
        logits = net(images, training=True)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))

    return gradient_step(net, tf.keras.optimizers.Adam(learning_rate=spec.learning_rate), loss)


def infer_step(net: Any, spec: ImageSpec) -> InferStep:
    return forward_step(lambda images: net(images, training=False))


def _classifier(model: FathomModel, build: Callable[[Any], Any], arithmetic: Callable[[Any], int],
                case: Callable[[Any], dict[str, Any]]) -> FathomWorkload:
    return FathomWorkload(model, "images/s", "imagenet", build, arithmetic, case, image_data(model), train_step,
                          infer_step, loss_classes=1001)


WORKLOADS: dict[FathomModel, FathomWorkload] = {
    FathomModel.ALEXNET: _classifier(FathomModel.ALEXNET, build_alexnet, alexnet_parameters, alexnet_case),
    FathomModel.VGG: _classifier(FathomModel.VGG, build_vgg, vgg_parameters, vgg_case),
    FathomModel.RESIDUAL: _classifier(FathomModel.RESIDUAL, build_residual, residual_parameters, residual_case),
}
