"""JAX image-classification training: the TensorFlow runner's networks and protocol, XLA-compiled.

The networks are :mod:`.nets`' architectures built by the same :class:`~.keras_nets.KerasNet`, with
Keras 3 on its JAX backend (Keras rather than Flax: one definition per network, which the
architectures already are against Keras, and Keras ``fit`` on JAX is the idiomatic baseline the
bench compares with). The training step is not ``fit``: it is one ``jax.jit``-compiled function
of the model's state (``model.stateless_call`` on the trainable and non-trainable variables,
``jax.value_and_grad``, plain SGD written out as in Table 1), whose state buffers are donated so
XLA updates the weights in place. Loss: mean sparse softmax cross entropy from the logits plus the
harness's weight decay (L2 on every trainable variable but batch norm's, :func:`.keras_nets.l2_variables`).

Protocol and samples are every framework's (:mod:`dlbench.workloads.training.measure`): warm-up,
then measured steps, each ending by reading the loss to the host (a synchronisation, so a step's
time is the device's). XLA compiles the step ahead of time, before step 0, and that time is in
``setup_time`` and its own ``compile_time`` sample: no step, warm-up or measured, ever includes a
compilation, so ``--warmup-steps 0`` still measures steps only.

Every local device trains (a ``jax.sharding.Mesh`` over them: the batch split, the weights
replicated); across instances (``jax_distributed``), every process's devices form one global mesh
after ``jax.distributed.initialize``. XLA sees the whole step as one program over the global batch,
so batch norm's statistics are over the global batch (TensorFlow's towers normalise per device).

Keras picks its backend when it is first imported, from ``KERAS_BACKEND``: this module sets it to
``jax`` before importing Keras and refuses to run if TensorFlow's Keras was imported first in the
same process (one workload process per job, so that never happens through the command).
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import time
from collections.abc import Callable
from typing import Any

from dlbench.workloads import harness
from dlbench.workloads.cnn import keras_nets, nets
from dlbench.workloads.profiles import DataKind, ModelName, Precision, TrainingSpec
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.training.cluster import ClusterRole, run_worker_interruptibly
from dlbench.workloads.training.measure import (
    Clock,
    StepSummary,
    add_loss_samples,
    add_training_samples,
    warmup_and_measure,
)


def _keras() -> Any:
    """Keras 3 on the JAX backend (RuntimeError if this process's Keras already runs on another)."""
    os.environ["KERAS_BACKEND"] = "jax"
    import keras  # heavy: Keras loads its backend (JAX); only a JAX training run needs it

    if keras.backend.backend() != "jax":
        raise RuntimeError(
            f"Keras in this process runs on the {keras.backend.backend()} backend, not jax: it was imported before "
            "the JAX runner set KERAS_BACKEND=jax (TensorFlow's Keras, or KERAS_BACKEND set otherwise); run the JAX "
            "trainer in its own process (python -m dlbench.workloads tf-cnn --framework jax)")
    return keras


def tf32_devices(devices: list[Any]) -> list[Any]:
    """The devices with TensorFloat-32 matrix units: NVIDIA GPUs of compute capability 8.0 or newer."""
    found = []
    for device in devices:
        capability = str(getattr(device, "compute_capability", "") or "")
        if device.platform == "gpu" and capability and int(capability.split(".")[0]) >= 8:
            found.append(device)
    return found


def configure_precision(precision: Precision, jax: Any, keras: Any) -> None:
    """Set JAX's matmul/convolution precision and Keras' dtype policy before the model is built.

    fp32 asks XLA for full float32 (``highest``: on Ampere or newer GPUs XLA's default may round
    to TF32, which would be tf32 under fp32's name); tf32 asks for TF32 and is refused where no
    device has it (a CPU); bf16 is Keras' ``mixed_bfloat16`` (bfloat16 compute, float32 weights),
    the loss computed in float32."""
    if precision is Precision.TF32:
        devices = jax.local_devices()
        if not devices or len(tf32_devices(devices)) != len(devices):
            kinds = ", ".join(sorted({f"{d.platform}:{d.device_kind}" for d in devices})) or "none"
            raise RuntimeError(f"precision tf32 needs NVIDIA GPUs with TensorFloat-32 (compute capability 8.0 or "
                               f"newer); JAX's devices here: {kinds}. Use fp32 or bf16 on this machine")
        jax.config.update("jax_default_matmul_precision", "tensorfloat32")
    else:
        jax.config.update("jax_default_matmul_precision", "highest")
    keras.config.set_dtype_policy("mixed_bfloat16" if precision is Precision.BF16 else "float32")


def gpus_unused(machine_gpus: int, backend: str, visible: str | None) -> str | None:
    """Why a GPU machine would train on its CPU (None when it will not): a CPU build of jaxlib or a
    CUDA that does not load. ``CUDA_VISIBLE_DEVICES=""`` asks for the CPU on purpose."""
    if machine_gpus == 0 or backend != "cpu" or visible == "":
        return None
    return (f"this machine has {machine_gpus} GPU(s) but JAX runs on its CPU (a CPU build of jaxlib, or CUDA "
            f"not loaded): use the GPU workload image (docs/gpus.md) or set the provider's gpus: none for a "
            f"CPU-only comparison")


def build_model(model_name: ModelName | str, spec: TrainingSpec) -> Any:
    """The Keras model the JAX runner trains: :mod:`.nets`' network with Keras' batch norm, on JAX."""
    keras = _keras()
    return keras_nets.build(model_name, spec, keras=keras, batch_norm=keras_nets.keras_batch_norm(keras))


def _train(
    doc: ResultDocument,
    *,
    model_name: ModelName,
    spec: TrainingSpec,
    data: DataKind,
    data_dir: str | None,
    clock: Clock,
    loop: bool,
    role: ClusterRole | None,
) -> StepSummary:
    import jax  # heavy: JAX loads XLA; only a training run needs it
    import jax.numpy as jnp  # heavy (as above)
    import numpy as np  # heavy: only a training run needs numpy
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    if role is not None:
        # Before any JAX computation: the global device list depends on it. Gloo carries the CPU
        # collectives (XLA's CPU client has none of its own across processes); GPUs use NCCL.
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=role.cluster["worker"][0], num_processes=role.workers,
                                   process_id=role.task_index)
        harness.progress(f"worker {role.task_index}: jax.distributed up ({jax.process_count()} processes, "
                         f"coordinator {role.cluster['worker'][0]})")
    keras = _keras()
    # Setup counts from here, as in the TensorFlow runner (after importing the framework; a
    # distributed job's rendezvous before, as TensorFlow's strategy is made before its runner starts).
    t0 = clock()
    configure_precision(spec.precision, jax, keras)
    backend = jax.default_backend()
    unused = gpus_unused(len(doc.environment.gpus), backend, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if unused:
        raise RuntimeError(unused)
    devices, local_devices = jax.devices(), jax.local_devices()
    mesh = Mesh(np.array(devices), ("batch",))
    split = NamedSharding(mesh, PartitionSpec("batch"))  # the batch axis over the devices
    replicated = NamedSharding(mesh, PartitionSpec())  # a copy on every device
    global_batch = spec.batch_size_per_device * len(devices)
    local_batch = spec.batch_size_per_device * len(local_devices)
    if role is not None:
        placement = "jax_distributed"
    else:
        placement = "mirrored" if len(devices) > 1 else backend

    # The same initial weights in every process (a data-parallel job starts from one model).
    keras.utils.set_random_seed(0)
    model = build_model(model_name, spec)
    decayed = {id(v) for v in keras_nets.l2_variables(model)}
    decay_mask = tuple(id(v) in decayed for v in model.trainable_variables)
    model_params = sum(math.prod(v.shape) for v in model.trainable_variables)
    trainable = [jax.device_put(np.asarray(v.value), replicated) for v in model.trainable_variables]
    non_trainable = [jax.device_put(np.asarray(v.value), replicated) for v in model.non_trainable_variables]
    learning_rate = spec.learning_rate

    def loss_of(weights: list[Any], state: list[Any], images: Any, labels: Any) -> tuple[Any, list[Any]]:
        logits, state = model.stateless_call(weights, state, images, training=True)
        log_probs = jax.nn.log_softmax(logits.astype(jnp.float32))  # the loss in float32, also under bf16
        cross_entropy = -jnp.mean(jnp.take_along_axis(log_probs, labels[:, None], axis=1))
        # tf.nn.l2_loss: sum(v^2) / 2 per variable, batch norm's left out (keras_nets.l2_variables).
        l2 = sum(jnp.sum(jnp.square(w)) for w, decay in zip(weights, decay_mask, strict=True) if decay) / 2
        return cross_entropy + nets.WEIGHT_DECAY * l2, state

    def train_step(weights: list[Any], state: list[Any], images: Any, labels: Any) -> tuple[Any, Any, Any]:
        (loss, state), grads = jax.value_and_grad(loss_of, has_aux=True)(weights, state, images, labels)
        # Plain SGD (the harness's GradientDescentOptimizer): w <- w - lr * g.
        weights = [w - learning_rate * g for w, g in zip(weights, grads, strict=True)]
        return weights, state, loss

    jitted = jax.jit(train_step, in_shardings=(replicated, replicated, split, split),
                     out_shardings=(replicated, replicated, replicated), donate_argnums=(0, 1))

    next_batch: Callable[[], tuple[Any, Any]]
    if data is DataKind.SYNTHETIC:
        size = spec.image_size

        def generate(key: Any) -> tuple[Any, Any]:
            image_key, label_key = jax.random.split(key)
            return (jax.random.uniform(image_key, (global_batch, size, size, 3), jnp.float32),
                    jax.random.randint(label_key, (global_batch,), 0, spec.num_classes, jnp.int32))

        # Generated on the devices once, each device its own slice, and reused every step: no
        # input pipeline (tf_cnn_benchmarks' synthetic data).
        batch = jax.jit(generate, out_shardings=(split, split))(jax.random.key(0))

        def next_batch() -> tuple[Any, Any]:
            return batch
    else:
        if not data_dir:
            raise ValueError("data 'real' needs --data-dir pointing at ImageNet-format TFRecords")
        from dlbench.workloads.cnn import tfrecord  # only real data needs the reader (and its JPEG decoder)

        # Every process reads the whole data set for its own devices (the study replicates it on
        # every node), as the TensorFlow workers do; the reader decodes ahead on its own threads.
        reader = tfrecord.batches(data_dir, local_batch, spec.image_size, spec.num_classes)

        def next_batch() -> tuple[Any, Any]:
            images, labels = next(reader)
            return (jax.make_array_from_process_local_data(split, np.asarray(images, np.float32)),
                    jax.make_array_from_process_local_data(split, np.asarray(labels, np.int32)))

    # XLA compiles here, ahead of the steps (module docstring): its time is part of the setup.
    compile_start = clock()
    first = next_batch()
    step_fn = jitted.lower(trainable, non_trainable, *first).compile()
    compile_seconds = clock() - compile_start
    state = [trainable, non_trainable]
    pending = [first]  # the batch read for the compilation is the first step's
    losses: list[float] = []

    def run_step() -> None:
        images, labels = pending.pop() if pending else next_batch()
        state[0], state[1], loss = step_fn(state[0], state[1], images, labels)
        # Reading the loss waits for the step: the synchronisation that makes a step's time the device's.
        losses.append(float(loss.addressable_data(0)))

    setup_seconds = clock() - t0
    def barrier() -> None:
        from jax.experimental import multihost_utils  # only a job across instances needs the barrier

        assert role is not None
        harness.progress(f"worker {role.task_index}: at the barrier before the measured steps")
        multihost_utils.sync_global_devices("dlbench: before the measured steps")

    step_times, window = warmup_and_measure(doc, run_step, spec, clock, loop=loop,
                                            before_measured=barrier if role is not None else None)
    if role is not None:
        harness.progress(f"worker {role.task_index}: {spec.measured_steps} measured steps done")
    labels = {"model": model_name.value, "data": data.value, "batch_size": local_batch}
    summary = add_training_samples(
        doc, step_times=step_times, warmup_steps=spec.warmup_steps, images_per_step=local_batch,
        setup_seconds=setup_seconds, window=window, labels=labels)
    doc.add("compile_time", compile_seconds, "s", compiler="xla", **labels)
    for device in local_devices:
        stats = device.memory_stats() if backend != "cpu" else None
        if stats and "peak_bytes_in_use" in stats:
            doc.add("peak_memory", stats["peak_bytes_in_use"], "bytes", device=str(device), scope="device")
    doc.labels.update({
        # replicas: this process's devices; global_batch_size covers every process's.
        "replicas": str(len(local_devices)), "placement": placement, "model_parameters": str(model_params),
        "global_batch_size": str(global_batch),
        # Where the weights really live: the first copy of the first weight.
        "variable_device": str(state[0][0].addressable_shards[0].device),
        "framework_version": jax.__version__, "backend": backend, "compiler": "xla",
    })
    # Divergence is a property of the run, not a failure of the timing (training.measure.LossTrajectory).
    add_loss_samples(doc, losses, spec.num_classes, **labels)
    return summary


def train(
    doc: ResultDocument,
    *,
    model_name: ModelName,
    spec: TrainingSpec,
    data: DataKind,
    data_dir: str | None = None,
    clock: Clock = time.perf_counter,
    loop: bool = False,
) -> StepSummary:
    """Train on every local device of this instance (warm-up + measured steps) and add the samples
    to ``doc``. ``loop``: repeat windows of measured steps until SIGTERM (a shared-resource background)."""
    return _train(doc, model_name=model_name, spec=spec, data=data, data_dir=data_dir, clock=clock, loop=loop,
                  role=None)


def train_distributed(
    doc: ResultDocument,
    role: ClusterRole,
    *,
    model_name: ModelName,
    spec: TrainingSpec,
    data: DataKind,
    data_dir: str | None = None,
) -> StepSummary:
    """One process of a ``jax_distributed`` job: ``jax.distributed`` with worker 0's address as the
    coordinator (it listens there on all interfaces), one global mesh over every process's devices,
    a barrier between warm-up and the measured steps. Throughput counts this process's images."""
    return _train(doc, model_name=model_name, spec=spec, data=data, data_dir=data_dir, clock=time.perf_counter,
                  loop=False, role=role)


def versions() -> dict[str, str]:
    import jax  # heavy: JAX loads XLA; only a JAX run reports its versions

    keras = _keras()
    return {"jax": jax.__version__, "jaxlib": importlib.metadata.version("jaxlib"), "keras": keras.__version__,
            "jax_backend": jax.default_backend(), "jax_device": jax.devices()[0].device_kind}


def run_role(doc: ResultDocument, role: ClusterRole, *, model_name: ModelName, spec: TrainingSpec, data: DataKind,
             data_dir: str | None = None) -> None:
    """A worker of a JAX job across instances: :func:`train_distributed` in an interruptible helper."""
    run_worker_interruptibly(doc, lambda d: train_distributed(d, role, model_name=model_name, spec=spec, data=data,
                                                              data_dir=data_dir))
