"""TensorFlow's CNN training on one instance: the core study's networks, measured the study's way.

The study's protocol (:mod:`dlbench.workloads.training.measure`) around a ``tf.function`` step;
variables placed as the profile says (:func:`strategy_for`). Each step ends by reading the loss
back to the host, which synchronises the device, so a step's time is the device's time. A job
across instances (:mod:`.tf_cluster`) runs the same loop on its strategy; :mod:`.tf_trainer` is
the framework's :class:`~dlbench.workloads.training.trainer.Trainer`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from dlbench.workloads.cnn import keras_nets, tf_data, tf_nets
from dlbench.workloads.profiles import DataKind, ModelName, Precision, TrainingSpec
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.tf_instance import framework_labels
from dlbench.workloads.training.measure import (
    Clock,
    StepSummary,
    add_loss_samples,
    add_training_samples,
    warmup_and_measure,
)


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
        model = tf_nets.build(model_name, spec)
        decayed = keras_nets.l2_variables(model)
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
            loss += tf.nn.scale_regularization_loss(tf_nets.weight_decay_loss(decayed))
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
            return tf_data.synthetic_batch(
                spec.batch_size_per_device, spec.image_size, spec.num_classes, seed=ctx.replica_id_in_sync_group
            )

        batch = strategy_obj.experimental_distribute_values_from_function(per_replica)

        def step() -> Any:
            return distributed_step(*batch).numpy()
    else:
        if not data_dir:
            raise ValueError("data 'real' needs --data-dir pointing at ImageNet-format TFRecords")
        dataset = tf_data.real_dataset(data_dir, global_batch, spec.image_size, spec.num_classes)
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
