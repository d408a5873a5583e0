"""PyTorch image-classification training, measured as the TensorFlow runner measures it.

The same networks (:mod:`.torch_nets` traces the one definition in :mod:`.nets`), the same
protocol and the same documents as TensorFlow's (:func:`.tf_train.train`): warm-up steps, then measured steps whose
throughput alone is reported; every step reads its loss back to the host (a device sync), so a
step's time is the device's; synthetic data generated once on the device and reused; real data from
the same ``data_dir`` of TFRecords (:mod:`.tfrecord`, no TensorFlow needed); tf_cnn_benchmarks'
plain SGD (Table 1: no momentum) on cross entropy + weight decay. The samples are written by the
same protocol's functions (:func:`dlbench.workloads.training.measure.add_training_samples`, ...).

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

The machine, the process group and one instance's processes are :mod:`dlbench.workloads.torch_instance`'s
(the transformer's training shares them); this module brings the trainer and what it records.

Compiler: eager. ``torch.compile`` (inductor) was measured on the 2-core CPU of the controller with
the smoke AlexNet: its first step compiles for tens of seconds (the smoke job's whole budget is a
few seconds), and the GPU numbers of the study are cuDNN/cuBLAS-bound, where eager PyTorch already
calls the same kernels; so the default keeps every job's setup short, and the ``compiler`` label
records what ran.

This module imports torch at the top: :mod:`.frameworks` imports it only after finding torch.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own convention
from torch.nn.parallel import DistributedDataParallel

from dlbench.workloads import harness
from dlbench.workloads.cnn import nets, tfrecord, torch_nets
from dlbench.workloads.profiles import DataKind, ModelName, TrainingSpec
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.torch_instance import (
    Group,
    InstanceJob,
    autocast,
    check_machine,
    framework_labels,
    gpus_unused,  # noqa: F401 - re-exported: the PyTorch trainer's machine check (tests import it here)
    local_devices,
    local_group,
    prepare_process,
    record_instance,
    run_instance,
    set_precision,  # noqa: F401 - re-exported: this trainer's precision (the GPU proof imports it here)
    versions,  # noqa: F401 - the Trainer's versions() (training/trainer.py)
    worker_group,
)
from dlbench.workloads.training.cluster import ClusterRole, run_worker_interruptibly
from dlbench.workloads.training.measure import Clock, StepSummary, add_training_samples


@dataclass(frozen=True)
class _Job:
    """What every process of one job trains (picklable: spawned processes receive it)."""

    model_name: ModelName
    spec: TrainingSpec
    data: DataKind
    data_dir: str | None


# --- one process's training ------------------------------------------------------------------------------------


class _Trainer:
    """Model, optimizer, data and step of one process (one device)."""

    def __init__(self, job: _Job, device: torch.device, *, seed: int, ddp: bool) -> None:
        spec = job.spec
        model = torch_nets.build(job.model_name, spec).to(device=device, memory_format=torch.channels_last)
        model.train()
        self.model = model
        self.model_parameters = torch_nets.trainable_parameters(model)
        decayed = torch_nets.l2_parameters(model)
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
            [{"params": decayed, "weight_decay": nets.WEIGHT_DECAY}, {"params": others, "weight_decay": 0.0}],
            lr=spec.learning_rate, momentum=0.0)
        self.decayed = decayed
        self.autocast = autocast(spec.precision, device.type)
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
            decay = torch.nn.utils.get_total_norm(self.decayed) ** 2 * (nets.WEIGHT_DECAY / 2)
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


def _train_instance(doc: ResultDocument, job: _Job, *, device_type: str, local: int, group: Group | None,
                    placement: str, clock: Clock, t0: float, name: str, loop: bool) -> StepSummary:
    """Train as this instance's first process (:func:`torch_instance.run_instance`) and add the
    samples to ``doc``."""
    spec = job.spec
    device = prepare_process(spec.precision, device_type, local, 0)
    measured = run_instance(doc, InstanceJob(functools.partial(_Trainer, job), spec, loop), device=device,
                            local=local, group=group, clock=clock, t0=t0, name=name)
    images_per_step = spec.batch_size_per_device * local
    labels = {"model": job.model_name.value, "data": job.data.value, "batch_size": images_per_step}
    summary = add_training_samples(
        doc, step_times=measured.step_times, warmup_steps=spec.warmup_steps, images_per_step=images_per_step,
        setup_seconds=measured.setup_seconds, window=measured.window, labels=labels)
    record_instance(doc, measured, device=device, local=local, group=group, placement=placement,
                    batch_per_process=spec.batch_size_per_device, loss_classes=spec.num_classes, labels=labels,
                    extra_labels={"variable_device": str(next(measured.trainer.model.parameters()).device)})
    return summary


# --- the Trainer (training/trainer.py) --------------------------------------------------------------------------


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
    framework_labels(doc, device_type)
    check_machine(doc, device_type, devices)
    local, group, placement = local_group(device_type, devices, processes)
    return _train_instance(doc, _Job(model_name, spec, data, data_dir), device_type=device_type, local=local,
                           group=group, placement=placement, clock=clock, t0=t0, name="pytorch", loop=loop)


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
    group (:func:`torch_instance.worker_group`), a barrier between warm-up and the measured steps,
    the document shaped like :func:`.tf_cluster.train_mirrored_worker`'s (this worker's images per
    step; ``global_batch_size`` over the job)."""
    t0 = clock()
    device_type, local = local_devices()
    framework_labels(doc, device_type)
    check_machine(doc, device_type, local)
    group = worker_group(role, device_type, local)
    doc.labels["local_parameter_device"] = "gpu" if device_type == "cuda" else "cpu"
    name = f"worker {role.task_index}"
    summary = _train_instance(doc, _Job(model_name, spec, data, data_dir), device_type=device_type,
                              local=local, group=group, placement="ddp", clock=clock, t0=t0, name=name, loop=False)
    harness.progress(f"{name}: {spec.measured_steps} measured steps done")
    return summary


def run_role(doc: ResultDocument, role: ClusterRole, *, model_name: ModelName, spec: TrainingSpec, data: DataKind,
             data_dir: str | None = None) -> None:
    """A worker of a PyTorch job across instances: :func:`train_distributed` in an interruptible helper."""
    run_worker_interruptibly(doc, lambda d: train_distributed(d, role, model_name=model_name, spec=spec, data=data,
                                                              data_dir=data_dir))
