"""Training of the decoder, measured as the CNN runners measure training (docs/transformer.md).

Next-token prediction on synthetic token ids (generated once on the device, ``batch x (context +
1)`` ids, reused every step), full-context sequences; AdamW as GPT-2-style training uses it
(betas 0.9/0.95, weight decay 0.1 on the matrices only, the gradient clipped to norm 1.0: nanoGPT's
recipe). Every step reads its loss back to the host (a device sync), so a step's time is the
device's. The protocol and the timing samples are the tf_cnn runners' (:func:`warmup_and_measure`,
:func:`add_training_samples`), in tokens/s.

Model FLOPs (PaLM, appendix B): :attr:`TransformerSpec.training_flops_per_token` per trained token;
the achieved rate over the measured steps is ``model_tflops``, and ``mfu`` divides it by the peak
GEMM rate this process measured on this device in the same precision (:func:`peak_gemm`).

Where it runs, as :mod:`dlbench.workloads.cnn.torch_trainer`: the CPU; one GPU; N GPUs with DDP,
one process per GPU (this one records, rank 0); across instances DDP over every process of every
worker (Gloo on CPUs, NCCL on GPUs), rendezvous at the first worker's address. The machine, the
precision, the process group and one instance's processes are both trainers' own:
:mod:`dlbench.workloads.torch_instance`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own convention
from torch.nn.parallel import DistributedDataParallel

from dlbench.workloads import harness
from dlbench.workloads.micro.deepbench import GEMM as DEEPBENCH_GEMM
from dlbench.workloads.profiles import Precision, TransformerSpec
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.torch_instance import (
    Group,
    InstanceJob,
    autocast,
    check_machine,
    local_devices,
    local_group,
    prepare_process,
    record_instance,
    run_instance,
    worker_group,
)
from dlbench.workloads.torch_instance import framework_labels as torch_labels
from dlbench.workloads.training.cluster import ClusterRole
from dlbench.workloads.training.measure import Clock, StepSummary, add_training_samples
from dlbench.workloads.transformer import model as models

UNIT = "tokens/s"
BETAS = (0.9, 0.95)
WEIGHT_DECAY = 0.1
CLIP_NORM = 1.0
GEMM_SECONDS = 0.1
"""How long each GEMM shape is repeated for its rate (after one untimed call): long enough to
cover launch overheads and clock ramps, short enough that five shapes cost about a second of setup."""

# --- the peak GEMM rate -------------------------------------------------------------------------------------------


def gemm_shapes(device_type: str, gpu_gemm: tuple[int, int, int] | None) -> list[tuple[int, int, int]]:
    """(m, k, n) shapes whose best rate is the peak: DeepBench's training GEMMs (the deepbench
    micro-benchmark's ``paper`` set) everywhere, and on a GPU also the profile's ``micro.gpu.gemm``
    (the GPU suite's big square-ish GEMM, which reaches a GPU's peak where DeepBench's small ones do not)."""
    shapes = [(m, k, n) for m, n, k in DEEPBENCH_GEMM["paper"]]  # DeepBench writes (m, n, k)
    if device_type == "cuda" and gpu_gemm is not None:
        shapes.insert(0, gpu_gemm)
    return shapes


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_gemm(device: torch.device, precision: Precision, shapes: Sequence[tuple[int, int, int]],
              seconds: float = GEMM_SECONDS) -> tuple[float, str]:
    """The best ``torch.matmul`` rate (TFLOPS, 2mkn per product) over ``shapes`` on ``device`` in the
    training's arithmetic (float32 with TF32 as :func:`set_precision` left it; bfloat16 operands
    for bf16, as autocast runs the GEMMs), and which shape gave it. A shape that does not fit the
    device's memory is skipped."""
    dtype = torch.bfloat16 if precision is Precision.BF16 else torch.float32
    best, source = 0.0, ""
    for m, k, n in shapes:
        try:
            a = torch.randn(m, k, device=device, dtype=dtype)
            b = torch.randn(k, n, device=device, dtype=dtype)
            torch.matmul(a, b)
            _sync(device)
            calls, start = 0, time.perf_counter()
            while True:
                torch.matmul(a, b)
                calls += 1
                if calls % 4 == 0 or device.type != "cuda":
                    _sync(device)
                    if time.perf_counter() - start >= seconds:
                        break
            rate = 2.0 * m * k * n * calls / (time.perf_counter() - start) / 1e12
        except torch.OutOfMemoryError:
            continue
        finally:
            a = b = None  # noqa: F841 - free the operands before the next shape
            if device.type == "cuda":
                torch.cuda.empty_cache()
        if rate > best:
            best = rate
            source = f"torch.matmul {precision.value} {dtype_name(dtype)} m={m} k={k} n={n}"
    if not source:
        raise RuntimeError(f"no GEMM shape fits {device}: cannot measure the peak for the MFU")
    return best, source


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def framework_labels(doc: ResultDocument, device_type: str) -> None:
    """Every PyTorch document's labels, and ``device`` (the reports group the transformer's cases by it)."""
    torch_labels(doc, device_type)
    doc.labels["device"] = "gpu" if device_type == "cuda" else "cpu"


# --- one process's training --------------------------------------------------------------------------------------


class Trainer:
    """Model, optimizer, data and step of one process (one device). Public: the GPU proof's plain
    loop builds the same model with :func:`models.build` and compares its step with this one."""

    def __init__(self, spec: TransformerSpec, device: torch.device, *, seed: int, ddp: bool) -> None:
        torch.manual_seed(0)  # the same initial weights in every process (DDP also broadcasts rank 0's)
        model = models.build(spec).to(device)
        model.train()
        self.spec = spec
        self.model = model
        self.model_parameters = models.trainable_parameters(model)
        self.net: torch.nn.Module = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None,
            gradient_as_bucket_view=True) if ddp else model
        matrices = [p for p in model.parameters() if p.dim() >= 2]
        others = [p for p in model.parameters() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": matrices, "weight_decay": WEIGHT_DECAY}, {"params": others, "weight_decay": 0.0}],
            lr=spec.learning_rate, betas=BETAS, **({"fused": True} if device.type == "cuda" else {}))
        self.autocast = autocast(spec.precision, device.type)
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
        ids = torch.randint(0, spec.vocabulary, (spec.batch_size, spec.context + 1), generator=generator,
                            device=device)
        self.inputs, self.targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
        self.losses: list[float] = []

    def step(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast:
            logits = self.net(self.inputs)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), self.targets.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), CLIP_NORM)
        self.optimizer.step()
        self.losses.append(float(loss.detach()))  # to the host: the device has finished the step

    def weights_checksum(self) -> float:
        """The sum of every weight: equal on every DDP rank when training kept them in sync."""
        with torch.no_grad():
            return float(sum(p.detach().double().sum() for p in self.model.parameters()))

    def close(self) -> None:
        """Nothing to release (the data is one tensor on the device): the lifecycle closes every trainer."""


def _train_instance(doc: ResultDocument, spec: TransformerSpec, *, device_type: str, local: int,
                    group: Group | None, placement: str, clock: Clock, t0: float, name: str, loop: bool,
                    gpu_gemm: tuple[int, int, int] | None) -> StepSummary:
    """Measure the peak, then train as this instance's first process (:func:`torch_instance.run_instance`)
    and add the samples to ``doc``."""
    device = prepare_process(spec.precision, device_type, local, 0)
    # The peak first, alone on the device (before the helpers and the model): its operands are
    # freed before training, and the peak memory counted after it is the training's.
    harness.progress(f"{name}: measuring the peak GEMM rate ({spec.precision.value})")
    gemm_started = clock()
    peak, source = peak_gemm(device, spec.precision, gemm_shapes(device_type, gpu_gemm))
    gemm_seconds = clock() - gemm_started
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    measured = run_instance(doc, InstanceJob(functools.partial(Trainer, spec), spec, loop), device=device,
                            local=local, group=group, clock=clock, t0=t0, name=name)
    tokens_per_step = spec.batch_size * spec.context * local
    labels: dict[str, Any] = {"task": "train", "batch_size": spec.batch_size * local}
    summary = add_training_samples(
        doc, step_times=measured.step_times, warmup_steps=spec.warmup_steps, images_per_step=tokens_per_step,
        setup_seconds=measured.setup_seconds - gemm_seconds, window=measured.window, labels=labels, unit=UNIT)
    achieved = summary.images_per_sec * spec.training_flops_per_token / 1e12
    doc.add("model_tflops", achieved, "TFLOPS", flops_per_token=spec.training_flops_per_token, **labels)
    doc.add("peak_gemm", peak, "TFLOPS", source=source, devices=local)
    doc.add("mfu", achieved / (peak * local), "fraction", **labels)
    doc.add("peak_gemm_time", gemm_seconds, "s")
    record_instance(doc, measured, device=device, local=local, group=group, placement=placement,
                    batch_per_process=spec.batch_size, loss_classes=spec.vocabulary, labels=labels,
                    extra_labels={"tokens_per_step": str(tokens_per_step)})
    return summary


# --- the two entry points (main.py) ------------------------------------------------------------------------------


def train(doc: ResultDocument, *, spec: TransformerSpec, clock: Clock = time.perf_counter, loop: bool = False,
          processes: int | None = None, gpu_gemm: tuple[int, int, int] | None = None) -> StepSummary:
    """One instance: every visible GPU (DDP, one process each, when there are several), else the CPU.
    ``processes`` overrides the number of processes (more than one on the CPU runs the multi-GPU
    path over Gloo: how it is tested without GPUs). ``loop``: windows of measured steps until SIGTERM."""
    t0 = clock()
    device_type, devices = local_devices()
    framework_labels(doc, device_type)
    check_machine(doc, device_type, devices)
    local, group, placement = local_group(device_type, devices, processes)
    return _train_instance(doc, spec, device_type=device_type, local=local, group=group, placement=placement,
                           clock=clock, t0=t0, name="transformer", loop=loop, gpu_gemm=gpu_gemm)


def train_distributed(doc: ResultDocument, role: ClusterRole, *, spec: TransformerSpec,
                      clock: Clock = time.perf_counter, gpu_gemm: tuple[int, int, int] | None = None) -> StepSummary:
    """One worker of a DDP job across instances: every process of every worker in one group, the
    rendezvous at worker 0's address, a barrier before the measured steps; this worker's document
    counts this worker's tokens (``global_batch_size`` covers the job)."""
    t0 = clock()
    device_type, local = local_devices()
    framework_labels(doc, device_type)
    check_machine(doc, device_type, local)
    group = worker_group(role, device_type, local)
    name = f"worker {role.task_index}"
    summary = _train_instance(doc, spec, device_type=device_type, local=local, group=group, placement="ddp",
                              clock=clock, t0=t0, name=name, loop=False, gpu_gemm=gpu_gemm)
    harness.progress(f"{name}: {spec.measured_steps} measured steps done")
    return summary
