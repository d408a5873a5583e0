"""PyTorch image-classification training, measured as the TensorFlow runner measures it.

The same networks (:mod:`.torch_models` traces the one definition in :mod:`.models`), the same
protocol and the same documents as :func:`runner.train`: warm-up steps, then measured steps whose
throughput alone is reported; every step reads its loss back to the host (a device sync), so a
step's time is the device's; synthetic data generated once on the device and reused; real data from
the same ``data_dir`` of TFRecords (:mod:`.tfrecord`, no TensorFlow needed); tf_cnn_benchmarks'
plain SGD (Table 1: no momentum) on cross entropy + weight decay. The samples are written by the
TensorFlow runner's own functions (:func:`runner.add_training_samples`, ...).

Where it runs:

* no CUDA GPU: the CPU, PyTorch's default threads (one per core);
* one GPU: that GPU, one process;
* N > 1 GPUs: DistributedDataParallel, one process per GPU (PyTorch's recommended data-parallel
  form; ``DataParallel`` is single-process and GIL-bound). This process is rank 0 and writes the
  document: it times its own steps, which every rank's gradient all-reduce keeps in lock-step, and
  counts the images of all N (``images_per_step`` = batch x N), as TensorFlow's mirrored runner
  counts its N towers. The other ranks are spawned processes that train and record nothing.
* across instances (:func:`train_distributed`): DDP over every process of every instance, NCCL on
  GPUs, Gloo on CPUs, rendezvous at the first worker's address.

Compiler: eager. ``torch.compile`` (inductor) was measured on the 2-core CPU of the controller with
the smoke AlexNet: its first step compiles for tens of seconds (the smoke job's whole budget is a
few seconds), and the GPU numbers of the study are cuDNN/cuBLAS-bound, where eager PyTorch already
calls the same kernels; so the default keeps every job's setup short, and the ``compiler`` label
records what ran.

This module imports torch at the top: :mod:`.frameworks` imports it only after finding torch.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import signal
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812 - PyTorch's own convention
from torch.nn.parallel import DistributedDataParallel

from dlbench.workloads import harness
from dlbench.workloads.profiles import DataKind, ModelName, Precision, TrainingSpec
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.tf_cnn import models, tfrecord, torch_models
from dlbench.workloads.tf_cnn.distributed import ClusterRole
from dlbench.workloads.tf_cnn.runner import (
    Clock,
    StepSummary,
    add_loss_samples,
    add_training_samples,
    warmup_and_measure,
)

COMPILER = "eager"
"""How the training step runs (the ``compiler`` label): eager PyTorch, see the module docstring."""

GROUP_TIMEOUT = datetime.timedelta(minutes=10)
"""How long a process waits at the rendezvous or in one collective for its peers: long enough for
instances started a little apart and a slow first step, short enough that a peer that died ends the
job (the executor's SIGTERM usually comes first)."""

LOCAL_RENDEZVOUS_TIMEOUT = datetime.timedelta(minutes=2)
"""The rendezvous of one instance's own processes (multi-GPU): they start together, so a helper
missing after this long has failed, and its error is reported then, not after :data:`GROUP_TIMEOUT`."""


@dataclass(frozen=True)
class _Job:
    """What every process of one job trains (picklable: spawned processes receive it)."""

    model_name: ModelName
    spec: TrainingSpec
    data: DataKind
    data_dir: str | None
    loop: bool


@dataclass(frozen=True)
class _Group:
    """The DDP process group this instance's processes join."""

    init_method: str  # tcp://host:port of the rank-0 process's store
    world_size: int
    rank_offset: int  # the global rank of this instance's first process
    backend: str  # nccl on GPUs, gloo on CPUs
    rendezvous_timeout: datetime.timedelta = GROUP_TIMEOUT  # how long to wait for every process to arrive


# --- the machine ------------------------------------------------------------------------------------------------


def local_devices() -> tuple[str, int]:
    """("cuda", visible GPUs) or ("cpu", 1). ``CUDA_VISIBLE_DEVICES`` limits the GPUs."""
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return "cuda", torch.cuda.device_count()
    return "cpu", 1


def gpus_unused(machine_gpus: int, torch_gpus: int, built_with_cuda: bool, visible: str | None) -> str | None:
    """Why a GPU machine would train on its CPU (None when it will not), as :func:`runner.gpus_unused`
    says it for TensorFlow: a CPU build of PyTorch or a CUDA that does not load. ``gpus: none``
    (``CUDA_VISIBLE_DEVICES=""``) asks for the CPU on purpose."""
    if machine_gpus == 0 or torch_gpus > 0 or visible == "":
        return None
    if not built_with_cuda:
        return (f"this machine has {machine_gpus} GPU(s) but PyTorch is a CPU build: use the GPU workload image "
                f"(docs/gpus.md, docs/frameworks.md) or set the provider's gpus: none for a CPU-only comparison")
    return (f"this machine has {machine_gpus} GPU(s) but PyTorch sees none (CUDA libraries or driver not loaded: "
            f"check the NVIDIA runtime and PyTorch's CUDA build)")


def _check_machine(doc: ResultDocument, device_type: str, devices: int) -> None:
    unused = gpus_unused(len(doc.environment.gpus), devices if device_type == "cuda" else 0,
                         torch.version.cuda is not None, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if unused:
        raise RuntimeError(unused)


def set_precision(precision: Precision, device_type: str) -> None:
    """The arithmetic of ``precision`` for this process, or RuntimeError saying why it cannot run here.

    fp32 turns TF32 off (PyTorch lets cuDNN convolutions use it by default: not the study's fp32);
    tf32 turns it on for matrix products and convolutions, and needs compute capability 8.0+;
    bf16 is autocast around forward and loss (:func:`_autocast`), weights and updates in float32."""
    if precision is Precision.TF32:
        if device_type != "cuda":
            raise RuntimeError("precision tf32 needs an NVIDIA GPU of compute capability 8.0 or newer (Ampere or "
                               "later): this job trains on the CPU, which has no TF32; use fp32 or bf16")
        capabilities = {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
        if min(capabilities) < (8, 0):
            found = ", ".join(f"{major}.{minor}" for major, minor in sorted(capabilities))
            raise RuntimeError(f"precision tf32 needs an NVIDIA GPU of compute capability 8.0 or newer (Ampere or "
                               f"later); this machine's GPUs have {found}: use fp32 or bf16")
    if precision is Precision.BF16 and device_type == "cuda" and not torch.cuda.is_bf16_supported(False):
        raise RuntimeError("precision bf16 needs a GPU with bfloat16 arithmetic (compute capability 8.0 or newer); "
                           "use fp32")
    tf32 = precision is Precision.TF32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def _autocast(precision: Precision, device_type: str) -> contextlib.AbstractContextManager[Any]:
    if precision is Precision.BF16:
        return torch.autocast(device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def interface_towards(host: str) -> str | None:
    """The network interface holding the address this machine reaches ``host`` from (the kernel's
    route choice), or None. Gloo and NCCL otherwise pick the address of the machine's hostname,
    which on many images resolves to 127.0.1.1 or to an interface the peers cannot reach."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))  # UDP: no packet is sent, only the route is chosen
            local = probe.getsockname()[0]
        for _, name in socket.if_nameindex():
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                try:
                    request = struct.pack("256s", name.encode()[:15])
                    answer = fcntl.ioctl(s.fileno(), 0x8915, request)  # SIOCGIFADDR
                except OSError:
                    continue
            if socket.inet_ntoa(answer[20:24]) == local:
                return name
    except OSError:
        return None
    return None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# --- one process's training ------------------------------------------------------------------------------------


class _Trainer:
    """Model, optimizer, data and step of one process (one device)."""

    def __init__(self, job: _Job, device: torch.device, *, seed: int, ddp: bool) -> None:
        spec = job.spec
        model = torch_models.build(job.model_name, spec).to(device=device, memory_format=torch.channels_last)
        model.train()
        self.model = model
        self.model_parameters = torch_models.trainable_parameters(model)
        decayed = torch_models.l2_parameters(model)
        decayed_ids = {id(p) for p in decayed}
        others = [p for p in model.parameters() if p.requires_grad and id(p) not in decayed_ids]
        # broadcast_buffers off: each replica keeps its own batch-norm moving averages, as
        # tf_cnn_benchmarks' towers do, instead of a broadcast from rank 0 every step.
        self.net: torch.nn.Module = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, broadcast_buffers=False,
            gradient_as_bucket_view=True) if ddp else model
        # The harness's loss is cross entropy + WEIGHT_DECAY * sum(v^2) / 2 over ``decayed``; the
        # gradient of that term, WEIGHT_DECAY * v, is what SGD's weight_decay adds (one fused pass
        # with the update instead of squaring every weight in the graph); its value is added to
        # the loss read each step, so the recorded loss is the harness's.
        self.optimizer = torch.optim.SGD(
            [{"params": decayed, "weight_decay": models.WEIGHT_DECAY}, {"params": others, "weight_decay": 0.0}],
            lr=spec.learning_rate, momentum=0.0)
        self.decayed = decayed
        self.autocast = _autocast(spec.precision, device.type)
        self.losses: list[float] = []
        self._real: Iterator[tuple[Any, Any]] | None = None
        if job.data is DataKind.SYNTHETIC:
            # Generated once on the device and reused every step (tf_cnn_benchmarks' synthetic data).
            generator = torch.Generator(device=device)
            generator.manual_seed(seed)
            size = spec.image_size
            images = torch.rand((spec.batch_size_per_device, size, size, 3), generator=generator, device=device)
            labels = torch.randint(0, spec.num_classes, (spec.batch_size_per_device,), generator=generator,
                                   device=device)
            synthetic = (images.permute(0, 3, 1, 2), labels)  # NHWC in memory = channels_last NCHW
            self.next_batch: Callable[[], tuple[Any, Any]] = lambda: synthetic
        else:
            if not job.data_dir:
                raise ValueError("data 'real' needs --data-dir pointing at ImageNet-format TFRecords")
            # Every process reads the whole data set (the study replicates it on every node), in
            # its own order.
            self._real = tfrecord.batches(job.data_dir, spec.batch_size_per_device, spec.image_size,
                                          spec.num_classes, seed=seed)

            def next_real() -> tuple[Any, Any]:
                assert self._real is not None
                images, labels = next(self._real)
                return (torch.from_numpy(images).to(device, non_blocking=True).permute(0, 3, 1, 2),
                        torch.from_numpy(labels).to(device, non_blocking=True))

            self.next_batch = next_real

    def step(self) -> None:
        images, labels = self.next_batch()
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast:
            loss = F.cross_entropy(self.net(images), labels)
        loss.backward()
        with torch.no_grad():  # the weight-decay term on the weights the gradients were taken at
            decay = torch.nn.utils.get_total_norm(self.decayed) ** 2 * (models.WEIGHT_DECAY / 2)
            total = loss.detach().float() + decay
        self.optimizer.step()
        self.losses.append(float(total))  # to the host: the device has finished the step

    def weights_checksum(self) -> float:
        """The sum of every trainable weight: equal on every DDP rank when training kept them in sync."""
        with torch.no_grad():
            return float(sum(p.detach().double().sum() for p in self.model.parameters() if p.requires_grad))

    def close(self) -> None:
        close = getattr(self._real, "close", None)  # the generator's: stops its decoding thread
        if close is not None:
            close()


def _device(device_type: str, local_rank: int) -> torch.device:
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _join_group(group: _Group, rank: int, device: torch.device, helpers: Any = None) -> None:
    """Join the process group: the store (served by global rank 0 on all interfaces at the
    group's port), then a rendezvous polled here, in Python, so that a SIGTERM or a spawned helper
    that failed (``helpers``) ends the wait at once instead of after the timeout; then the
    collectives (whose timeout is :data:`GROUP_TIMEOUT`)."""
    host, _, port = group.init_method.removeprefix("tcp://").rpartition(":")
    interface = interface_towards(host)
    if interface:
        # Before the first process group (spawned processes inherit the environment).
        os.environ.setdefault("GLOO_SOCKET_IFNAME", interface)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", interface)
    timeout = group.rendezvous_timeout
    store = dist.TCPStore(host, int(port), group.world_size, rank == 0, timeout=timeout, wait_for_workers=False)
    arrived = store.add("dlbench/arrived", 1)
    deadline = time.monotonic() + timeout.total_seconds()
    while arrived < group.world_size:
        if helpers is not None:
            failure = _helper_failure(helpers)
            if failure:
                raise RuntimeError(f"a helper process (one per device) failed before the process group formed: "
                                   f"{failure}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{arrived} of {group.world_size} processes at the rendezvous {group.init_method} "
                               f"after {timeout}: is every worker started and its address reachable?")
        time.sleep(0.1)
        arrived = store.add("dlbench/arrived", 0)
    dist.init_process_group(group.backend, store=store, rank=rank, world_size=group.world_size,
                            timeout=GROUP_TIMEOUT, **({"device_id": device} if device.type == "cuda" else {}))


def _helper_failure(helpers: Any) -> str | None:
    """Why a spawned helper ended, if one did (its error's last line), else None."""
    try:
        helpers.join(timeout=0)
    except Exception as exc:  # noqa: BLE001 - ProcessRaisedException / ProcessExitedException: the reason
        lines = str(exc).strip().splitlines()
        return lines[-1] if lines else type(exc).__name__
    return None


def _barrier(device: torch.device) -> None:
    dist.barrier(device_ids=[device.index] if device.type == "cuda" else None)


def _cpu_threads(local: int, device_type: str) -> None:
    if device_type == "cpu" and local > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local))


def _helper(index: int, job: _Job, group: _Group, device_type: str, local: int, parent: int) -> None:
    """Local rank ``index + 1`` of this instance (a spawned process): trains what rank 0 trains, step
    for step, and records nothing. It ignores SIGTERM: rank 0 (the process the executor signals)
    ends it, and it ends by itself when rank 0 is gone."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    local_rank = index + 1
    _cpu_threads(local, device_type)
    set_precision(job.spec.precision, device_type)
    device = _device(device_type, local_rank)
    rank = group.rank_offset + local_rank
    _join_group(group, rank, device)
    trainer = _Trainer(job, device, seed=rank, ddp=True)
    try:
        for _ in range(job.spec.warmup_steps):
            trainer.step()
        _barrier(device)
        if job.loop:
            while os.getppid() == parent:  # rank 0 kills it when stopped; orphaned, it stops
                trainer.step()
        else:
            for _ in range(job.spec.measured_steps):
                trainer.step()
    finally:
        trainer.close()
    dist.destroy_process_group()


def _train_instance(doc: ResultDocument, job: _Job, *, device_type: str, local: int, group: _Group | None,
                    placement: str, clock: Clock, t0: float, name: str) -> StepSummary:
    """Train as this instance's first process (rank ``group.rank_offset``), with ``local - 1``
    spawned helpers on the other devices, and add the samples to ``doc``."""
    spec = job.spec
    _cpu_threads(local, device_type)
    set_precision(spec.precision, device_type)
    device = _device(device_type, 0)
    helpers = None
    trainer: _Trainer | None = None
    finished = False
    try:
        if group is not None and local > 1:
            helpers = torch.multiprocessing.start_processes(
                _helper, args=(job, group, device_type, local, os.getpid()), nprocs=local - 1, join=False,
                start_method="spawn")
        if group is not None:
            harness.progress(f"{name}: joining the process group at {group.init_method} "
                             f"(rank {group.rank_offset} of {group.world_size}, {group.backend})")
            _join_group(group, group.rank_offset, device, helpers)
        trainer = _Trainer(job, device, seed=group.rank_offset if group else 0, ddp=group is not None)
        setup_seconds = clock() - t0
        harness.progress(f"{name}: warm-up ({spec.warmup_steps} steps)")

        def barrier() -> None:
            harness.progress(f"{name}: at the barrier before the measured steps")
            _barrier(device)

        step_times, window = warmup_and_measure(doc, trainer.step, spec, clock, loop=job.loop,
                                                before_measured=barrier if group is not None else None)
        finished = not job.loop
    finally:
        if trainer is not None:
            trainer.close()
        if helpers is not None and not finished:
            for process in helpers.processes:  # a stopped background or a failure: the helpers are done
                if process.is_alive():
                    process.kill()
        if group is not None and dist.is_initialized():
            dist.destroy_process_group()
        if helpers is not None:
            with contextlib.suppress(Exception) if not finished else contextlib.nullcontext():
                while not helpers.join():  # raises with a helper's traceback when it failed
                    pass
    images_per_step = spec.batch_size_per_device * local
    labels = {"model": job.model_name.value, "data": job.data.value, "batch_size": images_per_step}
    summary = add_training_samples(
        doc, step_times=step_times, warmup_steps=spec.warmup_steps, images_per_step=images_per_step,
        setup_seconds=setup_seconds, window=window, labels=labels)
    if device.type == "cuda":
        doc.add("peak_memory", torch.cuda.max_memory_allocated(device), "bytes", device=str(device), scope="device")
    world = group.world_size if group is not None else 1
    doc.labels.update({
        # replicas: this instance's processes; global_batch_size covers every process of the job.
        "replicas": str(local), "placement": placement, "model_parameters": str(trainer.model_parameters),
        "global_batch_size": str(spec.batch_size_per_device * world),
        "variable_device": str(next(trainer.model.parameters()).device),
    })
    if group is not None:
        doc.labels["weights_checksum"] = repr(trainer.weights_checksum())
    # Divergence is a property of the run, not a failure of the timing (runner.LossTrajectory).
    add_loss_samples(doc, trainer.losses, spec.num_classes, **labels)
    return summary


def _framework_labels(doc: ResultDocument, device_type: str) -> None:
    doc.labels.update({"framework_version": torch.__version__, "backend": device_type, "compiler": COMPILER})


# --- the trainer interface (frameworks.py) ---------------------------------------------------------------------


def train(
    doc: ResultDocument,
    *,
    model_name: ModelName,
    spec: TrainingSpec,
    data: DataKind,
    data_dir: str | None = None,
    clock: Clock = time.perf_counter,
    loop: bool = False,
    processes: int | None = None,
) -> StepSummary:
    """One instance: every visible GPU (DDP, one process each, when there are several), else the CPU.

    ``processes`` overrides the number of processes (one per GPU): more than one on the CPU runs the
    multi-process DDP path over Gloo, which is how that path is tested on a machine without GPUs.
    ``loop``: repeat windows of measured steps until SIGTERM (a shared-resource background)."""
    t0 = clock()
    device_type, devices = local_devices()
    _framework_labels(doc, device_type)
    _check_machine(doc, device_type, devices)
    local = devices if processes is None else processes
    if local < 1 or (device_type == "cuda" and local > devices):
        raise ValueError(f"processes must be between 1 and the {devices} visible device(s), got {local}")
    group = None
    if local > 1:
        group = _Group(f"tcp://127.0.0.1:{free_port()}", world_size=local, rank_offset=0,
                       backend="nccl" if device_type == "cuda" else "gloo",
                       rendezvous_timeout=LOCAL_RENDEZVOUS_TIMEOUT)
    placement = device_type.replace("cuda", "gpu") if local == 1 else f"ddp_{device_type.replace('cuda', 'gpu')}"
    return _train_instance(doc, _Job(model_name, spec, data, data_dir, loop), device_type=device_type, local=local,
                           group=group, placement=placement, clock=clock, t0=t0, name="pytorch")


def train_distributed(
    doc: ResultDocument,
    role: ClusterRole,
    *,
    model_name: ModelName,
    spec: TrainingSpec,
    data: DataKind,
    data_dir: str | None = None,
    clock: Clock = time.perf_counter,
) -> StepSummary:
    """One worker of a DDP job across instances (mode ``ddp``): every process of every worker in one
    group (world = workers x this instance's devices), rendezvous at worker 0's address (its port:
    worker 0's rank-0 process serves the store there, on all interfaces), a barrier between warm-up
    and the measured steps, the document shaped like :func:`distributed.train_mirrored_worker`'s
    (this worker's images per step; ``global_batch_size`` over the job)."""
    t0 = clock()
    device_type, local = local_devices()
    _framework_labels(doc, device_type)
    _check_machine(doc, device_type, local)
    host, _, port = role.cluster["worker"][0].rpartition(":")
    group = _Group(f"tcp://{host}:{port}", world_size=role.workers * local, rank_offset=role.task_index * local,
                   backend="nccl" if device_type == "cuda" else "gloo")
    doc.labels["local_parameter_device"] = "gpu" if device_type == "cuda" else "cpu"
    name = f"worker {role.task_index}"
    summary = _train_instance(doc, _Job(model_name, spec, data, data_dir, False), device_type=device_type,
                              local=local, group=group, placement="ddp", clock=clock, t0=t0, name=name)
    harness.progress(f"{name}: {spec.measured_steps} measured steps done")
    return summary


def versions() -> dict[str, str]:
    out = {"torch": torch.__version__}
    if torch.version.cuda:
        out["cuda"] = str(torch.version.cuda)
    if torch.backends.cudnn.is_available():
        out["cudnn"] = str(torch.backends.cudnn.version())
    out["torch_threads"] = str(torch.get_num_threads())
    return out
