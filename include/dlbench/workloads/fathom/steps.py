"""The training and inference steps of Fathom's workloads, built once for all eight.

Every Fathom training step is the same four moves: the loss under a gradient tape, its gradients,
Fathom's treatment of them (none, a clip by global norm, memnet's per-gradient clip and noise),
the optimizer's update. What differs is the loss, the treatment and the optimizer, which each
workload passes in; how a step is traced and called is written here only. Likewise an inference
step is a ``tf.function`` of the forward pass over the batch's first inputs.

This module imports TensorFlow: only the workload modules (themselves imported when their model
runs) import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from dlbench.workloads.fathom.workload import Batch, InferStep, TrainStep

Gradients = Callable[[list[Any]], list[Any]]
"""What a workload does to the gradients before the update (in the order of the variables)."""


def gradient_step(net: Any, optimizer: Any, loss: Callable[..., Any], *, treat: Gradients | None = None,
                  per_sample: bool = False) -> TrainStep:
    """One training step of ``net``: ``loss(*batch)`` (the value Fathom minimises) under a tape,
    its gradients with respect to ``net``'s trainable variables, ``treat`` applied to them, and
    ``optimizer``'s update (built here, once, so its slots are not created inside the traced step).

    The step returns the loss the document records: the minimised value, or with ``per_sample``
    that value divided by the batch's size (the first dimension of the batch's first tensor), for a
    workload that minimises a batch's sum (memnet, speech), so its losses compare across batch sizes.
    """
    variables = net.trainable_variables
    optimizer.build(variables)

    @tf.function
    def step(*tensors: Any) -> Any:
        with tf.GradientTape() as tape:
            value = loss(*tensors)
        grads = tape.gradient(value, variables)
        if treat is not None:
            grads = treat(grads)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return value / tf.cast(tf.shape(tensors[0])[0], value.dtype) if per_sample else value

    def run(batch: Batch) -> Any:
        return step(*batch)

    return run


def forward_step(forward: Callable[..., Any], inputs: int = 1) -> InferStep:
    """An inference step: ``forward`` traced once and called on the batch's first ``inputs``
    tensors (the network's inputs; the targets that follow them are for training only)."""
    traced = tf.function(forward)

    def run(batch: Batch) -> Any:
        return traced(*batch[:inputs])

    return run
