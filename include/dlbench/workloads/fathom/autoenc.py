"""Fathom's ``autoenc``: the variational autoencoder of ``fathom/autoenc/variational.py`` on MNIST.

The network (Kingma and Welling's VAE as tensorflow/models' autoencoder example writes it, which
Fathom copied): the 784 pixels map linearly to the mean and to the log variance of a 200-dimension
Gaussian (two separate linear layers, Xavier-initialised), a sample z = mean + sqrt(exp(log_var)) *
eps with eps ~ N(0, 1), and z maps linearly back to 784 pixels (weights and biases initialised to
zero, as Fathom's). Loss: 0.5 * the squared error summed over the whole batch, plus the batch's
mean KL divergence, the two added as Fathom adds them. Adam with learning rate 0.001.

Inputs: MNIST's training images scaled to [0, 1] and standardised per pixel (scikit-learn's
``StandardScaler``, which Fathom applies: mean 0 and variance 1 per pixel, a constant pixel left
at 0), each batch a random contiguous block (Fathom's ``get_random_block_from_data``). Real MNIST
is read with dltools' idx reader from ``--data-dir``; otherwise generated 28x28 images go through
the same scaling.

This module imports TensorFlow: :func:`dlbench.workloads.fathom.workload.workload` imports it only
when ``autoenc`` runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from dlbench.workloads.dltools import data as dltools_data
from dlbench.workloads.fathom.steps import forward_step, gradient_step
from dlbench.workloads.fathom.workload import (
    DataMode,
    DataUnavailable,
    FathomData,
    FathomWorkload,
    InferStep,
    TrainStep,
    find_real,
)
from dlbench.workloads.profiles import DataKind, FathomModel
from dlbench.workloads.profiles.fathom import AutoencSpec

MNIST_SHAPE = (28, 28)
PIXELS = MNIST_SHAPE[0] * MNIST_SHAPE[1]
"""Fathom's ``n_input``: 784, MNIST's flattened image (the workload reads only MNIST)."""

GENERATED_BLOCKS = 2
"""Generated batches a run cycles through (random data: more would change nothing)."""


def standardise(images: Any) -> Any:
    """N x 28 x 28 uint8 -> N x 784 float32 in [0, 1], then per pixel minus the mean over the set,
    divided by the standard deviation (1 where it is 0), in float64: scikit-learn's
    ``StandardScaler().fit_transform``, which Fathom applies."""
    flat = images.reshape(images.shape[0], -1).astype(np.float64) / 255.0
    std = flat.std(axis=0)
    # scikit-learn's rule for a constant feature: a scale below 10 machine epsilons counts as 0.
    return ((flat - flat.mean(axis=0)) / np.where(std < 10 * np.finfo(np.float64).eps, 1.0, std)).astype(np.float32)


def random_blocks(pixels: Any, batch_size: int, count: int, seed: int) -> list[Any]:
    """``count`` random contiguous blocks of ``batch_size`` rows (Fathom's sampling)."""
    if pixels.shape[0] < batch_size:
        raise DataUnavailable(f"MNIST has {pixels.shape[0]} images, fewer than a batch of {batch_size}")
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, pixels.shape[0] - batch_size + 1, size=count)
    return [pixels[s:s + batch_size] for s in starts]


def vae_parameters(spec: AutoencSpec) -> int:
    """Two encoders (mean, log variance: n_input x latent + latent each), one decoder."""
    encoder = PIXELS * spec.latent_size + spec.latent_size
    decoder = spec.latent_size * PIXELS + PIXELS
    return 2 * encoder + decoder


def build_vae(spec: AutoencSpec) -> Any:
    layers = tf.keras.layers
    pixels = tf.keras.Input((PIXELS,), name="pixels")
    z_mean = layers.Dense(spec.latent_size, kernel_initializer="glorot_uniform", name="z_mean")(pixels)
    z_log_sigma_sq = layers.Dense(spec.latent_size, kernel_initializer="glorot_uniform",
                                  name="z_log_sigma_sq")(pixels)

    def sample(moments: list[Any]) -> Any:
        mean, log_var = moments
        return mean + tf.sqrt(tf.exp(log_var)) * tf.random.normal(tf.shape(mean))

    z = layers.Lambda(sample, name="z")([z_mean, z_log_sigma_sq])
    reconstruction = layers.Dense(PIXELS, kernel_initializer="zeros", name="reconstruction")(z)
    return tf.keras.Model(pixels, [reconstruction, z_mean, z_log_sigma_sq], name="autoenc")


def vae_loss(pixels: Any, reconstruction: Any, z_mean: Any, z_log_sigma_sq: Any) -> Any:
    """Fathom's cost: the summed squared error of the batch plus the mean KL term."""
    reconstr_loss = 0.5 * tf.reduce_sum(tf.square(reconstruction - pixels))
    latent_loss = -0.5 * tf.reduce_sum(1 + z_log_sigma_sq - tf.square(z_mean) - tf.exp(z_log_sigma_sq), 1)
    return tf.reduce_mean(reconstr_loss + latent_loss)


def case_parameters(spec: AutoencSpec) -> dict[str, Any]:
    return {"input_size": PIXELS, "latent_size": spec.latent_size}


def data(spec: AutoencSpec, batch_size: int, *, mode: DataMode, data_dir: Path | None, seed: int,
         steps: int) -> FathomData:
    found = find_real(mode, data_dir, dltools_data.find_mnist, "no MNIST training set found; expected ",
                      lambda where: dltools_data.expected_layout("fcn5", where))
    if found is not None:
        images, _ = dltools_data.read_mnist(*found)
        blocks = random_blocks(standardise(images), batch_size, steps, seed)
        kind, source = DataKind.REAL, ",".join(str(p) for p in found)
    else:
        rng = np.random.default_rng(seed)
        images = rng.integers(0, 256, size=(GENERATED_BLOCKS * batch_size, *MNIST_SHAPE), dtype=np.uint8)
        blocks = [block for block in standardise(images).reshape(GENERATED_BLOCKS, batch_size, -1)]
        kind, source = DataKind.SYNTHETIC, f"generated: uniform uint8 {MNIST_SHAPE[0]}x{MNIST_SHAPE[1]} images"
    return FathomData([(tf.constant(block),) for block in blocks], kind, source)


def train_step(net: Any, spec: AutoencSpec) -> TrainStep:
    """Adam on Fathom's cost."""

    def loss(pixels: Any) -> Any:
        reconstruction, z_mean, z_log_sigma_sq = net(pixels, training=True)
        return vae_loss(pixels, reconstruction, z_mean, z_log_sigma_sq)

    return gradient_step(net, tf.keras.optimizers.Adam(learning_rate=spec.learning_rate), loss)


def infer_step(net: Any, spec: AutoencSpec) -> InferStep:
    """The reconstruction (the latent moments stay on the device)."""
    return forward_step(lambda pixels: net(pixels, training=False)[0])


WORKLOAD = FathomWorkload(FathomModel.AUTOENC, "images/s", "mnist", build_vae, vae_parameters, case_parameters, data,
                          train_step, infer_step)
