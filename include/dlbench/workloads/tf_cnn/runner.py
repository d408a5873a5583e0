"""TensorFlow image-classification training, measured the way the core study measures it.

Throughput is images/sec over the measured steps only (warm-up excluded); per-step times are
kept as samples so variance and outliers stay visible. Each step ends by reading the loss
back to the host, which synchronises the device, so a step's time is the device's time.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dlbench.workloads import harness
from dlbench.workloads.profiles import DataKind, ModelName, Precision, TrainingSpec
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.tf_cnn import data as datasets
from dlbench.workloads.tf_cnn import models

Clock = Callable[[], float]


class StepCounts(Protocol):
    """What :func:`warmup_and_measure` reads of a spec: any suite's spec with these two counts
    (TrainingSpec, the transformer's) runs the same protocol."""

    @property
    def warmup_steps(self) -> int: ...

    @property
    def measured_steps(self) -> int: ...


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


@dataclass(frozen=True)
class LossTrajectory:
    """A few points of a run's loss curve and whether it diverged (NaN/inf or exploding).

    A timing run measures speed, not convergence: tf_cnn_benchmarks' AlexNet at batch 512 and
    learning rate 0.005 diverges, and its images/s are still the study's numbers. So divergence is
    recorded next to the timings, never a failure."""

    points: tuple[tuple[int, float], ...]  # (step, loss), steps counted from the first warm-up step
    diverged: bool
    reason: str  # "" | "nan" | "inf" | "exploding"
    first_nonfinite_step: int | None


EXPLODING_FACTOR = 100.0
"""A finite loss above this many times chance level (ln of the number of classes, what a freshly
initialised classifier scores) counts as exploding."""


def loss_trajectory(losses: Sequence[float], num_classes: int, points: int = 10) -> LossTrajectory:
    """Sample ``losses`` (one per step) at the first step, every ``len // points`` steps and the last,
    and classify the run: ``nan``/``inf`` if any loss is not finite, ``exploding`` if a finite loss
    exceeds :data:`EXPLODING_FACTOR` x ln(``num_classes``)."""
    if not losses:
        return LossTrajectory((), False, "", None)
    every = max(1, len(losses) // max(1, points))
    steps = sorted({0, len(losses) - 1, *range(0, len(losses), every)})
    nonfinite = [i for i, value in enumerate(losses) if not math.isfinite(value)]
    limit = EXPLODING_FACTOR * math.log(max(2, num_classes))
    if nonfinite:
        reason = "nan" if math.isnan(losses[nonfinite[0]]) else "inf"
    elif any(value > limit for value in losses):
        reason = "exploding"
    else:
        reason = ""
    return LossTrajectory(tuple((i, float(losses[i])) for i in steps), bool(reason), reason,
                          nonfinite[0] if nonfinite else None)


def add_loss_samples(doc: ResultDocument, losses: Sequence[float], num_classes: int, **labels: Any) -> LossTrajectory:
    """The loss trajectory as ``loss`` samples (finite points only: a document holds finite numbers)
    plus the ``diverged``/``divergence`` labels and, if any, the first non-finite step."""
    trajectory = loss_trajectory(losses, num_classes)
    for step, value in trajectory.points:
        if math.isfinite(value):
            doc.add("loss", value, "nats", step=step, **labels)
    if trajectory.first_nonfinite_step is not None:
        doc.add("first_nonfinite_loss_step", trajectory.first_nonfinite_step, "step", **labels)
    doc.labels.update({"diverged": str(trajectory.diverged).lower(), "divergence": trajectory.reason})
    return trajectory


def timed_steps(step: Callable[[], Any], total_steps: int, clock: Clock = time.perf_counter) -> list[float]:
    """Run ``step`` ``total_steps`` times; return each call's duration by ``clock``."""
    durations = []
    for _ in range(total_steps):
        start = clock()
        step()
        durations.append(clock() - start)
    return durations


def make_strategy(spec: TrainingSpec) -> tuple[Any, str, int]:
    """All visible GPUs of the instance (CUDA_VISIBLE_DEVICES limits them), variables where the
    profile says (:func:`strategy_for`); no GPU: TensorFlow's default strategy on the CPU."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if not gpus:
        return tf.distribute.get_strategy(), "cpu", 1
    return strategy_for(gpus, spec)


def strategy_for(devices: list[str], spec: TrainingSpec) -> tuple[Any, str, int]:
    """The study's placement on ``devices`` (one tower each). ``parameter_server`` keeps the
    variables on ``local_parameter_device``: the CPU (``/cpu:0``, also with ONE device: a
    ``OneDeviceStrategy`` or a default ``CentralStorageStrategy`` would put them on the GPU and
    the label would lie) or the first device; ``mirrored`` keeps a copy on every device.
    Returns (strategy, placement label, replicas). Separate from device discovery so a test can
    check the placement on logical CPU devices where no GPU exists."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    if spec.variable_update == "parameter_server":
        parameter_device = "/cpu:0" if spec.local_parameter_device == "cpu" else devices[0]
        strategy = tf.distribute.experimental.CentralStorageStrategy(compute_devices=devices,
                                                                      parameter_device=parameter_device)
        return strategy, f"parameter_server_{spec.local_parameter_device}", len(devices)
    strategy = tf.distribute.MirroredStrategy(devices=devices)
    return strategy, "mirrored", strategy.num_replicas_in_sync


def variable_device(model: Any) -> str:
    """The device of the model's first weight (``/job:.../device:CPU:0``), the variables'
    placement as TensorFlow resolved it; '' when unknown."""
    copies = variable_copies(model)
    return copies[0] if copies else ""


def variable_copies(model: Any) -> list[str]:
    """Devices holding the first weight: one for a parameter server, one per device when
    mirrored (a Keras 3 variable wraps the ``tf.Variable`` in ``.value``)."""
    weights = list(getattr(model, "trainable_weights", ()))
    if not weights:
        return []
    tf_variable = getattr(weights[0], "value", weights[0])
    return [str(v.device) for v in getattr(tf_variable, "values", None) or [tf_variable]]


def gpus_unused(machine_gpus: int, tf_gpus: int, built_with_cuda: bool, visible: str | None) -> str | None:
    """Why a GPU machine would train on its CPU (None when it will not): a CPU build of TensorFlow
    (the default image) or a CUDA that does not load. ``CUDA_VISIBLE_DEVICES=""`` (gpus: none)
    asks for the CPU on purpose. A run that silently measured the CPU of a GPU machine would be
    compared with GPU numbers elsewhere: it fails instead, naming the fix."""
    if machine_gpus == 0 or tf_gpus > 0 or visible == "":
        return None
    if not built_with_cuda:
        return (f"this machine has {machine_gpus} GPU(s) but TensorFlow is a CPU build: use the GPU workload image "
                f"(make image-gpu; docs/gpus.md) or set the provider's gpus: none for a CPU-only comparison")
    return (f"this machine has {machine_gpus} GPU(s) but TensorFlow sees none (CUDA libraries or driver not loaded: "
            f"check the NVIDIA runtime and TensorFlow's CUDA dependencies)")


def realtime() -> float:
    """Epoch seconds on CLOCK_REALTIME: the one clock that concurrent jobs on different machines share
    (NTP-synchronised), so the controller can tell how long their measured windows overlapped."""
    return time.clock_gettime(time.CLOCK_REALTIME)


def loop_windows(step: Callable[[], Any], window_steps: int, clock: Clock = time.perf_counter,
                 on_window: Callable[[int], None] | None = None) -> tuple[list[float], int, float]:
    """Repeat windows of ``window_steps`` timed steps until SIGTERM (:class:`harness.Stopped`).

    A background load of the shared-resource scenario runs for as long as the job it disturbs,
    which it cannot know in advance; the executor stops it. Each step runs inside
    :func:`harness.deferred_stop`, so a step that completed is always recorded. Returns every
    completed step's time, the number of complete windows, and the wall time (:func:`realtime`)
    when the last step ended."""
    times: list[float] = []
    ended = realtime()
    try:
        while True:
            for _ in range(window_steps):
                with harness.deferred_stop():
                    start = clock()
                    step()
                    times.append(clock() - start)
                    ended = realtime()
            if on_window is not None:
                on_window(len(times) // window_steps)
    except harness.Stopped:
        pass
    # Complete windows, counted from the steps: a stop during a window's last step still counts it.
    windows = len(times) // window_steps
    return times, windows, ended


def warmup_and_measure(doc: ResultDocument, step: Callable[[], Any], spec: StepCounts, clock: Clock, *,
                       loop: bool, before_measured: Callable[[], Any] | None = None
                       ) -> tuple[list[float], tuple[float, float]]:
    """The study's protocol around one framework's ``step``, the same for every framework: the
    warm-up steps, ``before_measured`` (a barrier across workers), then the measured steps — or,
    with ``loop``, windows of them until SIGTERM (a shared-resource background; its document
    records the windows and that SIGTERM ended it). Returns every step's time (warm-up first) and
    the measured window in :func:`realtime`."""
    step_times = timed_steps(step, spec.warmup_steps, clock)
    if before_measured is not None:
        before_measured()
    window_start = realtime()
    if loop:
        measured, windows, window_end = loop_windows(
            step, spec.measured_steps, clock, on_window=lambda n: harness.progress(f"loop {n} done"))
        if not measured:
            raise harness.Stopped()  # stopped before a single measured step: nothing was measured
        harness.ended_by_stop(doc)
        doc.add("loops", windows, "count")
    else:
        measured = timed_steps(step, spec.measured_steps, clock)
        window_end = realtime()
    return step_times + measured, (window_start, window_end)


def add_training_samples(
    doc: ResultDocument,
    *,
    step_times: Sequence[float],
    warmup_steps: int,
    images_per_step: int,
    setup_seconds: float,
    window: tuple[float, float],
    labels: dict[str, Any],
    unit: str = "images/s",
) -> StepSummary:
    """The samples every tf_cnn training document has (whatever the scenario or role); another
    suite's steps count their own items (``images_per_step`` of ``unit``: the transformer's tokens/s)."""
    summary = summarize_steps(step_times, warmup_steps, images_per_step)
    doc.add("throughput", summary.images_per_sec, unit, **labels)
    doc.add("measured_time", summary.measured_seconds, "s", **labels)
    doc.add("setup_time", setup_seconds, "s", **labels)
    doc.add("step_time_mean", summary.step_mean, "s", **labels)
    doc.add("step_time_std", summary.step_std, "s", **labels)
    doc.add("step_time_p95", summary.step_p95, "s", **labels)
    for index, seconds in enumerate(step_times):
        doc.add("step_time", seconds, "s", step=index, warmup=index < warmup_steps, **labels)
    doc.add("measured_window_start", window[0], "s", clock="CLOCK_REALTIME")
    doc.add("measured_window_end", window[1], "s", clock="CLOCK_REALTIME")
    return summary


def train(
    doc: ResultDocument,
    *,
    model_name: ModelName,
    spec: TrainingSpec,
    data: DataKind,
    data_dir: str | None = None,
    clock: Clock = time.perf_counter,
    strategy: tuple[Any, str] | None = None,
    before_measured: Callable[[], Any] | None = None,
    loop: bool = False,
) -> StepSummary:
    """Build the model, train warm-up + measured steps, and add the samples to ``doc``.

    ``strategy`` (a ``tf.distribute`` strategy and its placement label) replaces the one chosen
    from the instance's GPUs: multi-worker training passes its MultiWorkerMirroredStrategy. Then
    throughput counts this worker's images (its local replicas), like every role's document, and
    ``before_measured`` (a barrier across workers) runs between warm-up and the measured steps.
    ``loop``: repeat windows of measured steps until SIGTERM (a shared-resource background).
    """
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only a training run needs it

    t0 = clock()
    set_precision(spec.precision)
    if strategy is None:
        strategy_obj, placement, replicas = make_strategy(spec)
        local_replicas = replicas
        unused = gpus_unused(len(doc.environment.gpus), 0 if placement == "cpu" else replicas,
                             tf.test.is_built_with_cuda(), os.environ.get("CUDA_VISIBLE_DEVICES"))
        if unused:
            raise RuntimeError(unused)
    else:
        strategy_obj, placement = strategy
        replicas = strategy_obj.num_replicas_in_sync
        local_replicas = max(1, len(getattr(strategy_obj.extended, "worker_devices", ())))
    global_batch = spec.batch_size_per_device * replicas
    local_batch = spec.batch_size_per_device * local_replicas
    with strategy_obj.scope():
        model = models.build(model_name, spec)
        decayed = models.l2_variables(model)
        # The harness's optimizer (tf.compat.v1.train.GradientDescentOptimizer): one fused
        # ResourceApplyGradientDescent per variable. Keras 3's SGD multiplies the gradient into a
        # temporary and then subtracts it, an extra pass over every weight each step (AlexNet: 62M).
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(spec.learning_rate)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE
        )
    model_params = int(sum(int(tf.size(w)) for w in model.trainable_weights))

    def replica_step(images: Any, labels: Any) -> Any:
        with tf.GradientTape() as tape:
            # float32 logits for the loss (a no-op at fp32; under bf16 the loss stays float32).
            logits = tf.cast(model(images, training=True), tf.float32)
            loss = tf.nn.compute_average_loss(loss_fn(labels, logits), global_batch_size=global_batch)
            # tf_cnn_benchmarks' total loss: cross entropy + weight decay (once over the replicas).
            loss += tf.nn.scale_regularization_loss(models.weight_decay_loss(decayed))
        grads = tape.gradient(loss, model.trainable_variables)
        # The TF variables behind the Keras ones (what a TF1 optimizer updates; under a
        # distribution strategy, its distributed variables, so gradients are still all-reduced).
        optimizer.apply_gradients(zip(grads, [v.value for v in model.trainable_variables], strict=True))
        return loss

    @tf.function
    def distributed_step(images: Any, labels: Any) -> Any:
        losses = strategy_obj.run(replica_step, args=(images, labels))
        return strategy_obj.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    if data is DataKind.SYNTHETIC:
        def per_replica(ctx: Any) -> tuple[Any, Any]:
            return datasets.synthetic_batch(
                spec.batch_size_per_device, spec.image_size, spec.num_classes, seed=ctx.replica_id_in_sync_group
            )

        batch = strategy_obj.experimental_distribute_values_from_function(per_replica)

        def step() -> Any:
            return distributed_step(*batch).numpy()
    else:
        if not data_dir:
            raise ValueError("data 'real' needs --data-dir pointing at ImageNet-format TFRecords")
        dataset = datasets.real_dataset(data_dir, global_batch, spec.image_size, spec.num_classes)
        if strategy is not None:
            # Every worker reads the whole data set (the study replicates it on every node), as
            # the distributed_replicated workers do; no sharding by file or by element.
            options = tf.data.Options()
            options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
            dataset = dataset.with_options(options)
        iterator = iter(strategy_obj.experimental_distribute_dataset(dataset))

        def step() -> Any:
            return distributed_step(*next(iterator)).numpy()

    losses: list[float] = []

    def run_step() -> None:
        losses.append(float(step()))

    setup_seconds = clock() - t0
    step_times, window = warmup_and_measure(doc, run_step, spec, clock, loop=loop, before_measured=before_measured)
    labels = {"model": model_name.value, "data": data.value, "batch_size": local_batch}
    summary = add_training_samples(
        doc, step_times=step_times, warmup_steps=spec.warmup_steps, images_per_step=local_batch,
        setup_seconds=setup_seconds, window=window, labels=labels)
    for gpu in tf.config.list_logical_devices("GPU"):
        try:
            peak = tf.config.experimental.get_memory_info(gpu.name)["peak"]
            doc.add("peak_memory", peak, "bytes", device=gpu.name, scope="device")
        except (ValueError, KeyError):
            pass
    # What the machine decided (not what was asked): labels, so the benchmark's parameters,
    # and with them its identity in the warehouse, stay equal across platforms.
    doc.labels.update({
        # replicas: this process's (a worker's local devices); global_batch_size covers every worker.
        "replicas": str(local_replicas), "placement": placement, "model_parameters": str(model_params),
        "global_batch_size": str(global_batch),
        # Where the weights really live (not the profile's wish): the placement label's proof.
        "variable_device": variable_device(model),
        **framework_labels(placement != "cpu" and bool(tf.config.list_logical_devices("GPU"))),
    })
    # Divergence is a property of the run, not a failure of the timing (LossTrajectory).
    add_loss_samples(doc, losses, spec.num_classes, **labels)
    return summary


def set_precision(precision: Precision) -> None:
    """The profile's precision for TensorFlow, before the model is built. fp32 turns TensorFloat-32
    OFF (TensorFlow enables it by default on Ampere and newer, which would make "fp32" GPUs round
    matmul inputs to 10 bits); tf32 turns it on and needs a GPU that has it; bf16 is Keras' mixed
    policy (bfloat16 compute, float32 variables; the loss is computed in float32)."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only a training run needs it

    if precision is Precision.TF32:
        capable = [g for g in tf.config.list_physical_devices("GPU")
                   if tf.config.experimental.get_device_details(g).get("compute_capability", (0, 0)) >= (8, 0)]
        if not capable:
            raise RuntimeError("precision tf32 needs an NVIDIA GPU of compute capability 8.0 or newer (Ampere); "
                               "this machine has none: use fp32 or bf16")
    tf.config.experimental.enable_tensor_float_32_execution(precision is Precision.TF32)
    tf.keras.mixed_precision.set_global_policy("mixed_bfloat16" if precision is Precision.BF16 else "float32")


def framework_labels(on_gpu: bool) -> dict[str, str]:
    """What every framework's document says of how it ran (PyTorch's and JAX's runners set the same keys)."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only a training run needs it

    return {"framework_version": tf.__version__, "backend": "gpu" if on_gpu else "cpu", "compiler": "tf.function"}


def versions() -> dict[str, str]:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    build = tf.sysconfig.get_build_info()
    out = {"tensorflow": tf.__version__, "keras": tf.keras.__version__ if hasattr(tf.keras, "__version__") else ""}
    if build.get("cuda_version"):
        out["cuda"] = str(build["cuda_version"])
    if build.get("cudnn_version"):
        out["cudnn"] = str(build["cudnn_version"])
    out["tf_cpu_threads"] = str(os.cpu_count())
    return out
