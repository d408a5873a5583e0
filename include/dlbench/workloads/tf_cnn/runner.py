"""TensorFlow image-classification training, measured the way the core study measures it.

Throughput is images/sec over the measured steps only (warm-up excluded); per-step times are
kept as samples so variance and outliers stay visible. Each step ends by reading the loss
back to the host, which synchronises the device, so a step's time is the device's time.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dlbench.workloads.profiles import DataKind, ModelName, TrainingSpec
from dlbench.workloads.result import ResultDocument

Clock = Callable[[], float]


@dataclass(frozen=True)
class StepSummary:
    warmup_steps: int
    measured_steps: int
    images_per_step: int
    measured_seconds: float
    images_per_sec: float
    step_mean: float
    step_std: float
    step_median: float
    step_p95: float


def summarize_steps(step_times: Sequence[float], warmup: int, images_per_step: int) -> StepSummary:
    """Throughput over the steps after ``warmup`` (the study's definition)."""
    if warmup < 0 or len(step_times) <= warmup:
        raise ValueError(f"need more than {warmup} step times, got {len(step_times)}")
    measured = list(step_times[warmup:])
    total = sum(measured)
    ordered = sorted(measured)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return StepSummary(
        warmup_steps=warmup,
        measured_steps=len(measured),
        images_per_step=images_per_step,
        measured_seconds=total,
        images_per_sec=len(measured) * images_per_step / total if total > 0 else float("inf"),
        step_mean=statistics.fmean(measured),
        step_std=statistics.stdev(measured) if len(measured) > 1 else 0.0,
        step_median=statistics.median(measured),
        step_p95=p95,
    )


def timed_steps(step: Callable[[], Any], total_steps: int, clock: Clock = time.perf_counter) -> list[float]:
    """Run ``step`` ``total_steps`` times; return each call's duration by ``clock``."""
    durations = []
    for _ in range(total_steps):
        start = clock()
        step()
        durations.append(clock() - start)
    return durations


def make_strategy(spec: TrainingSpec) -> tuple[Any, str, int]:
    """All visible GPUs of the instance, variables on CPU (parameter server) or mirrored."""
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if not gpus:
        return tf.distribute.get_strategy(), "cpu", 1
    if spec.variable_update == "parameter_server" and spec.local_parameter_device == "cpu":
        if len(gpus) == 1:
            # CentralStorageStrategy with one GPU places variables on it; pin them on the CPU.
            return tf.distribute.OneDeviceStrategy("/gpu:0"), "parameter_server_cpu", 1
        strategy = tf.distribute.experimental.CentralStorageStrategy(parameter_device="/cpu:0")
        return strategy, "parameter_server_cpu", len(gpus)
    strategy = tf.distribute.MirroredStrategy()
    return strategy, "mirrored", strategy.num_replicas_in_sync


def train(
    doc: ResultDocument,
    *,
    model_name: ModelName,
    spec: TrainingSpec,
    data: DataKind,
    data_dir: str | None = None,
    clock: Clock = time.perf_counter,
) -> StepSummary:
    """Build the model, train warm-up + measured steps, and add the samples to ``doc``."""
    import tensorflow as tf

    from dlbench.workloads.tf_cnn import data as datasets
    from dlbench.workloads.tf_cnn import models

    t0 = clock()
    strategy, placement, replicas = make_strategy(spec)
    global_batch = spec.batch_size_per_device * replicas
    with strategy.scope():
        model = models.build(model_name, spec)
        optimizer = tf.keras.optimizers.SGD(learning_rate=spec.learning_rate)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE
        )
    model_params = int(sum(int(tf.size(w)) for w in model.trainable_weights))

    def replica_step(images: Any, labels: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = tf.nn.compute_average_loss(loss_fn(labels, logits), global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=False))
        return loss

    @tf.function
    def distributed_step(images: Any, labels: Any) -> Any:
        losses = strategy.run(replica_step, args=(images, labels))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    if data is DataKind.SYNTHETIC:
        def per_replica(ctx: Any) -> tuple[Any, Any]:
            return datasets.synthetic_batch(
                spec.batch_size_per_device, spec.image_size, spec.num_classes, seed=ctx.replica_id_in_sync_group
            )

        batch = strategy.experimental_distribute_values_from_function(per_replica)

        def step() -> Any:
            return distributed_step(*batch).numpy()
    else:
        if not data_dir:
            raise ValueError("data 'real' needs --data-dir pointing at ImageNet-format TFRecords")
        dataset = datasets.real_dataset(data_dir, global_batch, spec.image_size, spec.num_classes)
        iterator = iter(strategy.experimental_distribute_dataset(dataset))

        def step() -> Any:
            return distributed_step(*next(iterator)).numpy()

    setup_seconds = clock() - t0
    step_times = timed_steps(step, spec.warmup_steps + spec.measured_steps, clock)
    summary = summarize_steps(step_times, spec.warmup_steps, global_batch)

    labels = {"model": model_name.value, "data": data.value, "batch_size": global_batch}
    doc.add("throughput", summary.images_per_sec, "images/s", **labels)
    doc.add("measured_time", summary.measured_seconds, "s", **labels)
    doc.add("setup_time", setup_seconds, "s", **labels)
    doc.add("step_time_mean", summary.step_mean, "s", **labels)
    doc.add("step_time_std", summary.step_std, "s", **labels)
    doc.add("step_time_p95", summary.step_p95, "s", **labels)
    for index, seconds in enumerate(step_times):
        doc.add("step_time", seconds, "s", step=index, warmup=index < spec.warmup_steps, **labels)
    for gpu in tf.config.list_logical_devices("GPU"):
        try:
            peak = tf.config.experimental.get_memory_info(gpu.name)["peak"]
            doc.add("peak_memory", peak, "bytes", device=gpu.name, scope="device")
        except (ValueError, KeyError):
            pass
    # What the machine decided (not what was asked): labels, so the benchmark's parameters,
    # and with them its identity in the warehouse, stay equal across platforms.
    doc.labels.update({
        "replicas": str(replicas), "placement": placement, "model_parameters": str(model_params),
        "global_batch_size": str(global_batch),
    })
    final_loss = step()  # one extra step outside the timed ones: the loss must be finite
    if not (final_loss == final_loss):  # NaN check without numpy import
        raise FloatingPointError("training diverged: loss is NaN")
    return summary


def versions() -> dict[str, str]:
    import tensorflow as tf

    build = tf.sysconfig.get_build_info()
    out = {"tensorflow": tf.__version__, "keras": tf.keras.__version__ if hasattr(tf.keras, "__version__") else ""}
    if build.get("cuda_version"):
        out["cuda"] = str(build["cuda_version"])
    if build.get("cudnn_version"):
        out["cudnn"] = str(build["cudnn_version"])
    out["tf_cpu_threads"] = str(os.cpu_count())
    return out
