"""One instance's PyTorch data-parallel training, shared by every PyTorch trainer (tf-cnn's
:mod:`~dlbench.workloads.cnn.torch_trainer`, the transformer's :mod:`~dlbench.workloads.transformer.train`).

What is the same whatever the model: the machine (which devices, a GPU machine whose PyTorch cannot
use them, the precision's arithmetic), the DDP process group and its rendezvous, and the lifecycle
of one instance (:func:`run_instance`): the process the command started is rank
``group.rank_offset`` and writes the document; it spawns one helper process per further local
device (:func:`_helper`), which trains what it trains step for step and records nothing; a barrier
before the measured steps when there is a group; then the helpers are ended and their failures
reported. A suite brings its trainer (:class:`Replica`, built in every process by a picklable
factory) and what it records of the steps (:func:`record_instance` records what both record).

Compiler: eager (label ``compiler``), for every PyTorch trainer; why (``torch.compile`` measured):
:mod:`~dlbench.workloads.cnn.torch_trainer`'s docstring and docs/frameworks.md.

This module imports torch at the top: only PyTorch trainers import it.
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
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import torch
import torch.distributed as dist

from dlbench.workloads import harness
from dlbench.workloads.profiles import Precision
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.training.cluster import ClusterRole
from dlbench.workloads.training.measure import Clock, StepCounts, add_loss_samples, warmup_and_measure

COMPILER = "eager"
"""How the training step runs (the ``compiler`` label): eager PyTorch (see the module docstring)."""

GROUP_TIMEOUT = datetime.timedelta(minutes=10)
"""How long a process waits at the rendezvous or in one collective for its peers: long enough for
instances started a little apart and a slow first step, short enough that a peer that died ends the
job (the executor's SIGTERM usually comes first)."""

LOCAL_RENDEZVOUS_TIMEOUT = datetime.timedelta(minutes=2)
"""The rendezvous of one instance's own processes (multi-GPU): they start together, so a helper
missing after this long has failed, and its error is reported then, not after :data:`GROUP_TIMEOUT`."""


@dataclass(frozen=True)
class Group:
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


def check_machine(doc: ResultDocument, device_type: str, devices: int) -> None:
    """RuntimeError saying why, when this GPU machine would train on its CPU (:func:`gpus_unused`)."""
    unused = gpus_unused(len(doc.environment.gpus), devices if device_type == "cuda" else 0,
                         torch.version.cuda is not None, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if unused:
        raise RuntimeError(unused)


def set_precision(precision: Precision, device_type: str) -> None:
    """The arithmetic of ``precision`` for this process, or RuntimeError saying why it cannot run here.

    fp32 turns TF32 off (PyTorch lets cuDNN convolutions use it by default: not the study's fp32);
    tf32 turns it on for matrix products and convolutions, and needs compute capability 8.0+;
    bf16 is autocast around forward and loss (:func:`autocast`), weights and updates in float32."""
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


def autocast(precision: Precision, device_type: str) -> contextlib.AbstractContextManager[Any]:
    """The context a step's forward and loss run in for ``precision`` (see :func:`set_precision`)."""
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

def framework_labels(doc: ResultDocument, device_type: str) -> None:
    """The labels every PyTorch document carries: the version, the backend it ran on, the compiler."""
    doc.labels.update({"framework_version": torch.__version__, "backend": device_type, "compiler": COMPILER})


def versions() -> dict[str, str]:
    """PyTorch's and its backend's versions for the document (a trainer module's ``versions``)."""
    out = {"torch": torch.__version__}
    if torch.version.cuda:
        out["cuda"] = str(torch.version.cuda)
    if torch.backends.cudnn.is_available():
        out["cudnn"] = str(torch.backends.cudnn.version())
    out["torch_threads"] = str(torch.get_num_threads())
    return out


# --- the process group --------------------------------------------------------------------------------------------


def local_group(device_type: str, devices: int, processes: int | None) -> tuple[int, Group | None, str]:
    """One instance's processes (``processes``, default one per visible device), the group they form
    when there are several (rendezvous on 127.0.0.1 at a free port), and the ``placement`` label
    (``cpu``, ``gpu``, ``ddp_cpu``, ``ddp_gpu``). More than one process on the CPU runs the
    multi-GPU path over Gloo: how that path is tested on a machine without GPUs."""
    local = devices if processes is None else processes
    if local < 1 or (device_type == "cuda" and local > devices):
        raise ValueError(f"processes must be between 1 and the {devices} visible device(s), got {local}")
    group = None
    if local > 1:
        group = Group(f"tcp://127.0.0.1:{free_port()}", world_size=local, rank_offset=0,
                      backend="nccl" if device_type == "cuda" else "gloo",
                      rendezvous_timeout=LOCAL_RENDEZVOUS_TIMEOUT)
    kind = device_type.replace("cuda", "gpu")
    return local, group, kind if local == 1 else f"ddp_{kind}"


def worker_group(role: ClusterRole, device_type: str, local: int) -> Group:
    """The group of a DDP job across instances: every process of every worker (world = workers x
    this instance's devices; rank = task index x devices + local rank), its store served by worker
    0's first process at worker 0's address and port from the cluster (on all interfaces)."""
    host, _, port = role.cluster["worker"][0].rpartition(":")
    return Group(f"tcp://{host}:{port}", world_size=role.workers * local, rank_offset=role.task_index * local,
                 backend="nccl" if device_type == "cuda" else "gloo")


def process_device(device_type: str, local_rank: int) -> torch.device:
    """The device of local rank ``local_rank`` (made this process's current CUDA device), or the CPU."""
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def join_group(group: Group, rank: int, device: torch.device, helpers: Any = None) -> None:
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
            failure = helper_failure(helpers)
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


def helper_failure(helpers: Any) -> str | None:
    """Why a spawned helper ended, if one did (its error's last line), else None."""
    try:
        helpers.join(timeout=0)
    except Exception as exc:  # noqa: BLE001 - ProcessRaisedException / ProcessExitedException: the reason
        lines = str(exc).strip().splitlines()
        return lines[-1] if lines else type(exc).__name__
    return None


def barrier(device: torch.device) -> None:
    """Every process of the group waits here for the others (before the measured steps)."""
    dist.barrier(device_ids=[device.index] if device.type == "cuda" else None)


def cpu_threads(local: int, device_type: str) -> None:
    """Several processes on one CPU share its cores instead of each starting one thread per core."""
    if device_type == "cpu" and local > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local))


def prepare_process(precision: Precision, device_type: str, local: int, local_rank: int) -> torch.device:
    """This process's threads, arithmetic and device: the first thing every process of an instance
    does (RuntimeError when ``precision`` cannot run here)."""
    cpu_threads(local, device_type)
    set_precision(precision, device_type)
    return process_device(device_type, local_rank)


# --- one instance's lifecycle -------------------------------------------------------------------------------------


class Replica(Protocol):
    """One process's trainer (one device): what the lifecycle and :func:`record_instance` use of it."""

    losses: list[float]  # every step's loss, read back to the host
    model_parameters: int

    def step(self) -> None: ...

    def weights_checksum(self) -> float:
        """The sum of every trainable weight: equal on every DDP rank when training kept them in sync."""
        ...

    def close(self) -> None:
        """Release what the trainer holds beyond memory (a reader thread)."""
        ...


class InstanceSpec(StepCounts, Protocol):
    """What the lifecycle reads of a suite's spec: the step counts and the precision."""

    @property
    def precision(self) -> Precision: ...


R = TypeVar("R", bound=Replica)
R_co = TypeVar("R_co", bound=Replica, covariant=True)


class ReplicaFactory(Protocol[R_co]):
    """Builds a process's trainer on ``device``: ``seed`` is the process's global rank (its own
    data), ``ddp`` wraps the model for the group. Picklable (a module-level class with its job bound
    by :func:`functools.partial`): spawned helpers receive it."""

    def __call__(self, device: torch.device, *, seed: int, ddp: bool) -> R_co: ...


@dataclass(frozen=True)
class InstanceJob(Generic[R]):
    """What every process of one instance trains (picklable: spawned processes receive it)."""

    build: ReplicaFactory[R]
    spec: InstanceSpec
    loop: bool  # windows of measured steps until SIGTERM (a shared-resource background)


@dataclass(frozen=True)
class Measured(Generic[R]):
    """What :func:`run_instance` leaves for the suite to record: rank 0's trainer (closed), every
    step's time (warm-up first), the measured window and the setup time."""

    trainer: R
    step_times: list[float]
    window: tuple[float, float]
    setup_seconds: float


def _helper(index: int, job: InstanceJob[Any], group: Group, device_type: str, local: int, parent: int) -> None:
    """Local rank ``index + 1`` of this instance (a spawned process): trains what rank 0 trains, step
    for step, and records nothing. It ignores SIGTERM: rank 0 (the process the executor signals)
    ends it, and it ends by itself when rank 0 is gone."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    local_rank = index + 1
    device = prepare_process(job.spec.precision, device_type, local, local_rank)
    rank = group.rank_offset + local_rank
    join_group(group, rank, device)
    trainer = job.build(device, seed=rank, ddp=True)
    try:
        for _ in range(job.spec.warmup_steps):
            trainer.step()
        barrier(device)
        if job.loop:
            while os.getppid() == parent:  # rank 0 kills it when stopped; orphaned, it stops
                trainer.step()
        else:
            for _ in range(job.spec.measured_steps):
                trainer.step()
    finally:
        trainer.close()
    dist.destroy_process_group()


def run_instance(doc: ResultDocument, job: InstanceJob[R], *, device: torch.device, local: int,
                 group: Group | None, clock: Clock, t0: float, name: str) -> Measured[R]:
    """Train as this instance's first process (rank ``group.rank_offset``, on ``device`` from
    :func:`prepare_process`), with ``local - 1`` spawned helpers on the other devices: join the
    group, build the trainer, the study's protocol (:func:`warmup_and_measure`, a barrier before the
    measured steps in a group), then end the helpers and raise a helper's failure."""
    spec = job.spec
    device_type = device.type
    helpers = None
    trainer: R | None = None
    finished = False
    try:
        if group is not None and local > 1:
            helpers = torch.multiprocessing.start_processes(
                _helper, args=(job, group, device_type, local, os.getpid()), nprocs=local - 1, join=False,
                start_method="spawn")
        if group is not None:
            harness.progress(f"{name}: joining the process group at {group.init_method} "
                             f"(rank {group.rank_offset} of {group.world_size}, {group.backend})")
            join_group(group, group.rank_offset, device, helpers)
        trainer = job.build(device, seed=group.rank_offset if group else 0, ddp=group is not None)
        setup_seconds = clock() - t0
        harness.progress(f"{name}: warm-up ({spec.warmup_steps} steps)")

        def at_barrier() -> None:
            harness.progress(f"{name}: at the barrier before the measured steps")
            barrier(device)

        step_times, window = warmup_and_measure(doc, trainer.step, spec, clock, loop=job.loop,
                                                before_measured=at_barrier if group is not None else None)
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
    return Measured(trainer, step_times, window, setup_seconds)


def record_instance(doc: ResultDocument, measured: Measured[Any], *, device: torch.device, local: int,
                    group: Group | None, placement: str, batch_per_process: int, loss_classes: int,
                    labels: dict[str, Any], extra_labels: dict[str, str]) -> None:
    """What every PyTorch trainer records after its suite's own samples: the device's peak memory,
    the labels of where it ran (``replicas``: this instance's processes; ``global_batch_size``:
    every process of the job), the replicas' weights checksum in a group, the loss trajectory."""
    trainer = measured.trainer
    if device.type == "cuda":
        doc.add("peak_memory", torch.cuda.max_memory_allocated(device), "bytes", device=str(device), scope="device")
    world = group.world_size if group is not None else 1
    doc.labels.update({
        "replicas": str(local), "placement": placement, "model_parameters": str(trainer.model_parameters),
        "global_batch_size": str(batch_per_process * world), **extra_labels,
    })
    if group is not None:
        doc.labels["weights_checksum"] = repr(trainer.weights_checksum())
    # Divergence is a property of the run, not a failure of the timing (runner.LossTrajectory).
    add_loss_samples(doc, trainer.losses, loss_classes, **labels)
