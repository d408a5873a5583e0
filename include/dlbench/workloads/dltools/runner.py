"""Training of study 001's DL-tool set, timed as the paper reports it: seconds per batch, first
epoch vs second epoch.

An epoch is a pass over the training set (or ``batches_per_epoch`` batches). A batch's time runs
from fetching its data to reading its loss back to the host (which synchronises the device), so an
epoch's seconds per batch is its wall time divided by its batches: the first epoch carries the
one-time costs (tracing the step, starting the input pipeline, first touches of memory), which the
paper's Table XIII shows as the first epoch's difference.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from dlbench.workloads.dltools import data as datasets
from dlbench.workloads.dltools import models
from dlbench.workloads.profiles import LSTM_SEQUENCE_LENGTH, DLToolModel, DLToolsSpec
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.training.measure import Clock, add_loss_samples, timed_steps

LSTM_CLIP_NORM = 5.0
"""Gradient clipping by global norm, as the PTB model of Zaremba et al. (and DLBench) trains."""


@dataclass(frozen=True)
class EpochSummary:
    epoch: int
    batches: int
    seconds: float
    seconds_per_batch: float
    batch_std: float
    batch_p95: float


def summarize_epoch(epoch: int, batch_times: list[float]) -> EpochSummary:
    total = sum(batch_times)
    ordered = sorted(batch_times)
    return EpochSummary(
        epoch=epoch,
        batches=len(batch_times),
        seconds=total,
        seconds_per_batch=total / len(batch_times),
        batch_std=statistics.stdev(batch_times) if len(batch_times) > 1 else 0.0,
        batch_p95=ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))],
    )


def _image_batches(train: datasets.TrainingData, model: DLToolModel, batch_size: int) -> Iterator[tuple[Any, Any]]:
    """tf.data over the images in memory: scaled to [0, 1] (FCN5: flattened to 784), batched,
    prefetched (the tools' parallel data loading). The pass wraps around, as the tools' readers do."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    flat = model is DLToolModel.FCN5

    def scale(images: Any, labels: Any) -> tuple[Any, Any]:
        images = tf.cast(images, tf.float32) / 255.0
        if flat:
            images = tf.reshape(images, (-1, models.FCN5_LAYERS[0]))
        return images, labels

    dataset = (
        tf.data.Dataset.from_tensor_slices((train.inputs, train.labels))
        .repeat()
        .batch(batch_size, drop_remainder=True)
        .map(scale, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    return iter(dataset)


def _ptb_matrix(ids: Any, batch_size: int) -> Any:
    """The PTB reader's layout: the word stream cut into ``batch_size`` rows, read 32 columns at a time."""
    columns = ids.shape[0] // batch_size
    if columns < LSTM_SEQUENCE_LENGTH + 1:
        raise ValueError(
            f"{ids.shape[0]} words are too few for batch {batch_size} of {LSTM_SEQUENCE_LENGTH}-word sequences"
        )
    return ids[: batch_size * columns].reshape(batch_size, columns)


def train(
    doc: ResultDocument,
    *,
    model_name: DLToolModel,
    spec: DLToolsSpec,
    batch_size: int,
    data_mode: str,
    data_dir: str | None = None,
    clock: Clock = time.perf_counter,
) -> list[EpochSummary]:
    """Load or generate the data, build the network, train ``spec.epochs`` epochs and add the samples."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    t0 = clock()
    model_spec = spec.model(model_name)
    train_data = datasets.load(
        model_name,
        mode=data_mode,
        data_dir=data_dir,
        batch_size=batch_size,
        batches_per_epoch=spec.batches_per_epoch,
        seed=doc.repetition,
    )
    batches = spec.batches(model_name, batch_size, None if spec.batches_per_epoch else train_data.examples)
    net = models.build(model_name)
    optimizer = tf.keras.optimizers.SGD(learning_rate=model_spec.learning_rate, momentum=model_spec.momentum)
    optimizer.build(net.trainable_variables)
    losses: list[float] = []
    lstm = model_name is DLToolModel.LSTM

    if lstm:
        matrix = _ptb_matrix(train_data.inputs, batch_size)
        windows = (matrix.shape[1] - 1) // LSTM_SEQUENCE_LENGTH
        zeros = [tf.zeros((batch_size, models.LSTM_HIDDEN)) for _ in range(2 * models.LSTM_LAYERS)]

        @tf.function
        def lstm_step(words: Any, targets: Any, states: list[Any]) -> tuple[Any, list[Any]]:
            with tf.GradientTape() as tape:
                logits, *new_states = net([words, *states], training=True)
                per_word = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
                # The PTB model's cost: summed over the 32 steps, averaged over the batch.
                loss = tf.reduce_sum(per_word) / batch_size
            grads = tape.gradient(loss, net.trainable_variables)
            grads, _ = tf.clip_by_global_norm(grads, LSTM_CLIP_NORM)
            optimizer.apply_gradients(zip(grads, net.trainable_variables, strict=True))
            return loss, new_states

        def epoch_steps() -> Callable[[], None]:
            state: dict[str, Any] = {"i": 0, "states": zeros}  # zero every epoch, as the reader's epochs do

            def run() -> None:
                i = state["i"] % windows
                lo = i * LSTM_SEQUENCE_LENGTH
                words = tf.constant(matrix[:, lo : lo + LSTM_SEQUENCE_LENGTH])
                targets = tf.constant(matrix[:, lo + 1 : lo + 1 + LSTM_SEQUENCE_LENGTH])
                loss, state["states"] = lstm_step(words, targets, state["states"])
                losses.append(float(loss.numpy()) / LSTM_SEQUENCE_LENGTH)  # per word, for the trajectory
                state["i"] += 1

            return run
    else:
        iterator = _image_batches(train_data, model_name, batch_size)

        @tf.function
        def image_step(images: Any, labels: Any) -> Any:
            with tf.GradientTape() as tape:
                logits = net(images, training=True)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            grads = tape.gradient(loss, net.trainable_variables)
            optimizer.apply_gradients(zip(grads, net.trainable_variables, strict=True))
            return loss

        def epoch_steps() -> Callable[[], None]:
            def run() -> None:
                losses.append(float(image_step(*next(iterator)).numpy()))

            return run

    setup_seconds = clock() - t0
    summaries = [
        summarize_epoch(epoch, timed_steps(epoch_steps(), batches, clock)) for epoch in range(1, spec.epochs + 1)
    ]

    per_batch = batch_size * (LSTM_SEQUENCE_LENGTH if lstm else 1)
    unit = "words/s" if lstm else "images/s"
    labels = {"model": model_name.value, "data": train_data.kind, "batch_size": batch_size}
    for s in summaries:
        doc.add("seconds_per_batch", s.seconds_per_batch, "s", epoch=s.epoch, **labels)
        doc.add("epoch_time", s.seconds, "s", epoch=s.epoch, **labels)
        doc.add("throughput", s.batches * per_batch / s.seconds, unit, epoch=s.epoch, **labels)
        doc.add("batch_time_std", s.batch_std, "s", epoch=s.epoch, **labels)
        doc.add("batch_time_p95", s.batch_p95, "s", epoch=s.epoch, **labels)
    first, second = summaries[0], summaries[1]
    doc.add("first_epoch_excess", (first.seconds_per_batch / second.seconds_per_batch - 1) * 100, "%", **labels)
    doc.add("data_load_time", train_data.load_seconds, "s", **labels)
    doc.add("setup_time", setup_seconds, "s", **labels)
    for gpu in tf.config.list_logical_devices("GPU"):
        try:
            doc.add(
                "peak_memory",
                tf.config.experimental.get_memory_info(gpu.name)["peak"],
                "bytes",
                device=gpu.name,
                scope="device",
            )
        except (ValueError, KeyError):
            pass
    doc.labels.update(
        {
            "data": train_data.kind,
            "data_source": train_data.source[:500],
            "dataset": datasets.dataset_name(model_name),
            "examples": str(train_data.examples),
            "batches_per_epoch": str(batches),
            "model_parameters": str(models.trainable_parameters(net)),
            "device": "gpu" if tf.config.list_logical_devices("GPU") else "cpu",
            **train_data.notes,
        }
    )
    num_classes = models.PTB_VOCABULARY if lstm else models.NUM_CLASSES
    add_loss_samples(doc, losses, num_classes, **labels)
    return summaries
