"""Timeouts derived from a profile.

A job's timeout is a hang detector, so its bound is conservative: the planned work at rates a
slow machine still reaches, times a margin, plus a fixed allowance for what precedes the work.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dlbench.workloads.profiles.enums import DLToolModel, FathomModel, FathomTask, ModelName, TransformerTask
from dlbench.workloads.profiles.schema import Profile

TRAIN_FLOPS_PER_IMAGE: dict[ModelName, tuple[float, int]] = {
    ModelName.ALEXNET: (2.2e9, 224),      # forward ~0.72 GFLOPs, training ~3x
    ModelName.RESNET50: (12.3e9, 224),    # forward ~4.1 GFLOPs
    ModelName.INCEPTION3: (17.1e9, 299),  # forward ~5.7 GFLOPs
}
"""Training FLOPs per image at the model's native size (scaled by the image area)."""
SLOW_TRAINING_FLOPS = 20e9
"""Sustained training rate of the slowest device a profile may land on (a few CPU cores)."""
DLTOOLS_TRAIN_FLOPS: dict[DLToolModel, float] = {
    # 6 x the forward multiply-adds of one example (forward 2, backward 4 FLOPs per MAC)
    DLToolModel.FCN5: 6 * 14_198_784,  # 784x2048 + 2048x4096 + 4096x1024 + 1024x10
    DLToolModel.ALEXNET: 6 * 10_732_160,  # three 5x5 convs at 32, 15, 7 px + 576x10
    DLToolModel.RESNET50: 6 * 111_329_920,  # 49 3x3 convs at 32/16/8 px + 64x10
    DLToolModel.LSTM: 6 * 115_474_432,  # 32 words x (2 layers x 4x256x512 + 256x10000 softmax)
}
"""Training FLOPs per example of study 001's DL-tool networks (an LSTM example is one 32-word sequence)."""
FATHOM_TRAIN_FLOPS: dict[FathomModel, float] = {
    # Training FLOPs per example at Fathom's default sizes, rounded up (3x the forward pass): a bound
    # for timeouts only. Smaller profile sizes only shorten the work.
    FathomModel.SEQ2SEQ: 3 * 2 * 60e6 * 60,  # ~60 M weights touched per token pair, ~60 tokens
    FathomModel.MEMNET: 3 * 2 * 5e6,
    FathomModel.SPEECH: 3 * 2 * 40e6 * 700,  # ~40 M weights per frame, ~700 frames
    FathomModel.AUTOENC: 3 * 2 * 2e6,
    FathomModel.RESIDUAL: 3 * 11.3e9,  # ResNet-152 forward
    FathomModel.VGG: 3 * 19.6e9,  # VGG-19 forward
    FathomModel.ALEXNET: 3 * 0.72e9,
    FathomModel.DEEPQ: 3 * 2 * 20e6,
}
"""Training FLOPs per example of Fathom's workloads at their default sizes (inference: a third)."""
DLTOOLS_DATA_SECONDS = 120.0
"""Reading the real data set or generating one of its shapes, at a slow disk's speed (CIFAR-10: 180 MB)."""
SLOW_HPL_FLOPS = 20e9
"""Sustained HPL rate of a slow machine (any server CPU since 2012 does several times this)."""
SLOW_DISK_BYTES_S = 50e6
TIMEOUT_MARGIN = 1.5
STARTUP_ALLOWANCE_S = 600.0
"""Interpreter start, imports, model build, data staging, container start."""
MIN_JOB_TIMEOUT_S = 3600.0
"""The floor: what every job got before timeouts were derived. An emulated guest (TCG) still
starts TensorFlow within it; a smaller profile never gets less."""


def _training_seconds(profile: Profile, model: str, batch: int | None) -> tuple[float, str]:
    spec = profile.training(model)
    flops, native = TRAIN_FLOPS_PER_IMAGE[ModelName(model)]
    images = batch or spec.batch_size_per_device
    per_step = images * flops * (spec.image_size / native) ** 2 / SLOW_TRAINING_FLOPS
    steps = spec.warmup_steps + spec.measured_steps
    return per_step * steps, (f"{model} {steps} steps x {per_step:.3g} s (batch {images}, "
                              f"{spec.image_size} px at {SLOW_TRAINING_FLOPS / 1e9:.0f} GFLOPS)")


def planned_work(profile: Profile, suite: str, args: Mapping[str, Any] | None = None,
                 scenario: str = "single") -> tuple[float, str]:
    """Seconds of work a job of ``suite`` with ``args`` plans at conservative rates, and how."""
    args = args or {}
    micro = profile.micro
    if suite == "tf_cnn":
        seconds, basis = _training_seconds(profile, str(args.get("model", ModelName.INCEPTION3.value)),
                                           int(args["batch_size"]) if args.get("batch_size") else None)
        if scenario == "distributed":
            seconds, basis = seconds * 2, basis + "; x2 synchronising across instances"
        elif scenario == "shared":
            sharing = int(args.get("tenants") or 2)
            lead = profile.scenarios.shared.lead_seconds
            seconds = seconds * (1 + sharing) + lead  # alone, then slowed by the others
            basis += f"; alone + x{sharing} sharing the machine, {lead:.0f} s lead"
        return seconds, basis
    if suite == "dltools":
        return _dltools_seconds(profile, args)
    if suite == "fathom":
        return _fathom_seconds(profile, args)
    if suite == "transformer":
        seconds, basis = _transformer_seconds(profile, args)
        if scenario == "distributed":
            seconds, basis = seconds * 2, basis + "; x2 synchronising across instances"
        elif scenario == "shared":
            lead = profile.scenarios.shared.lead_seconds
            seconds, basis = seconds * 3 + lead, basis + f"; alone + x2 beside generation, {lead:.0f} s lead"
        return seconds, basis
    if suite == "serving":
        seconds, basis = _serving_seconds(profile)
        if scenario == "shared":  # beside a training job, or servers starting together on shared CPUs
            seconds, basis = seconds * 2, basis + "; x2 on a shared machine"
        return seconds, basis
    if suite == "cpu":
        hpl = sum(2 / 3 * n**3 + 2 * n**2 for n in micro.cpu.hpl_sizes) / SLOW_HPL_FLOPS
        hpcg = micro.cpu.hpcg_seconds * 1.2 + 120
        return hpl + hpcg, (f"HPL {len(micro.cpu.hpl_sizes)} sizes up to N={max(micro.cpu.hpl_sizes)} "
                            f"{hpl:.0f} s at {SLOW_HPL_FLOPS / 1e9:.0f} GFLOPS + HPCG {micro.cpu.hpcg_seconds:.0f} s "
                            f"(+20% + 120 s set-up)")
    if suite == "disk":
        d = micro.disk
        block = _bytes(d.dd_block)
        dd = sum(c * block for c in d.dd_counts) / SLOW_DISK_BYTES_S
        ioping = d.ioping_count * 1.0 + 2 * d.ioping_seconds
        fio = 4 * (d.fio_runtime_s + d.fio_size_mb * 1e6 / SLOW_DISK_BYTES_S)
        return dd + ioping + fio, f"dd {dd:.0f} s + ioping {ioping:.0f} s + fio 4 x {d.fio_runtime_s} s (+ layout)"
    if suite == "network":
        n = micro.network
        return 4 * n.seconds + n.latency_samples * 0.05, f"iperf3 4 x {n.seconds} s + {n.latency_samples} pings"
    if suite == "gpu":
        g = micro.gpu
        m, k, n3 = g.gemm
        work = g.iterations * (2 * m * k * n3 + 2 * g.conv_size**2 * 9) / 1e12 + 300
        return work, f"{g.iterations} iterations of GEMM {m}x{k}x{n3} at 1 TFLOPS + 300 s for the other programs"
    if suite == "deepbench":
        per = 120.0 if micro.deepbench.shapes == "paper" else 5.0
        return (micro.deepbench.iterations * per,
                f"{micro.deepbench.iterations} iterations x {per:.0f} s ({micro.deepbench.shapes} shapes)")
    return 0.0, f"no estimate for suite {suite!r}"


def _dltools_seconds(profile: Profile, args: Mapping[str, Any]) -> tuple[float, str]:
    spec = profile.dltools
    model = DLToolModel(str(args.get("model", DLToolModel.RESNET50.value)))
    batch = int(args.get("batch_size") or spec.model(model).batch_sizes[0])
    batches = spec.batches(model, batch)
    per_batch = batch * DLTOOLS_TRAIN_FLOPS[model] / SLOW_TRAINING_FLOPS
    seconds = spec.epochs * batches * per_batch + DLTOOLS_DATA_SECONDS
    return seconds, (f"{model.value} {spec.epochs} epochs x {batches} batches x {per_batch:.3g} s (batch {batch} at "
                     f"{SLOW_TRAINING_FLOPS / 1e9:.0f} GFLOPS) + {DLTOOLS_DATA_SECONDS:.0f} s data")


def _fathom_seconds(profile: Profile, args: Mapping[str, Any]) -> tuple[float, str]:
    spec = profile.fathom
    model = FathomModel(str(args.get("model", FathomModel.VGG.value)))
    task = FathomTask(str(args.get("task", FathomTask.TRAIN.value)))
    batch = int(args.get("batch_size") or spec.model(model).batch_size)
    flops = FATHOM_TRAIN_FLOPS[model] / (3 if task is FathomTask.INFER else 1)
    steps = spec.warmup_steps + spec.measured_steps
    per_step = batch * flops / SLOW_TRAINING_FLOPS
    return steps * per_step + DLTOOLS_DATA_SECONDS, (
        f"fathom {model.value} {task.value} {steps} steps x {per_step:.3g} s (batch {batch} at "
        f"{SLOW_TRAINING_FLOPS / 1e9:.0f} GFLOPS) + {DLTOOLS_DATA_SECONDS:.0f} s data")


def _serving_seconds(profile: Profile) -> tuple[float, str]:
    """The server's start-up limit, then every load point as if its requests came one at a time,
    each at the target's latencies (a point that meets the target ends sooner; one that misses it
    by far is bounded by the rate sweep stopping there)."""
    spec = profile.serving
    per_request = (spec.target.ttft_p99_ms + spec.output_tokens * spec.target.tpot_p99_ms) / 1000
    rate_requests = max(spec.requests, math.ceil(4 * max(spec.rates)))
    points = len(spec.concurrency) * spec.requests + (len(spec.rates) + spec.bisection_steps) * rate_requests
    return (spec.startup_timeout_s + points * per_request,
            f"start-up {spec.startup_timeout_s:.0f} s + {points} requests x {per_request:.2f} s at the target")


def _transformer_seconds(profile: Profile, args: Mapping[str, Any]) -> tuple[float, str]:
    spec = profile.transformer
    task = TransformerTask(str(args.get("task", TransformerTask.TRAIN.value)))
    if task is TransformerTask.TRAIN:
        batch = int(args.get("batch_size") or spec.batch_size)
        steps = spec.warmup_steps + spec.measured_steps
        flops = steps * batch * spec.context * spec.training_flops_per_token
        what = f"{steps} steps x {batch} x {spec.context} tokens x {spec.training_flops_per_token:.3g} FLOP"
    else:
        tokens = spec.generation_tokens
        flops = tokens * 2 * spec.parameters * 4  # 2N per token; x4: one token at a time is not a GEMM's rate
        what = f"{tokens} prompt and generated tokens x 2N x4 (memory-bound)"
    return flops / SLOW_TRAINING_FLOPS, f"transformer {task.value}: {what} at {SLOW_TRAINING_FLOPS / 1e9:.0f} GFLOPS"


def _bytes(size: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    size = size.strip().lower()
    return int(size[:-1]) * units[size[-1]] if size and size[-1] in units else int(size)


def job_timeout(profile: Profile, suite: str, args: Mapping[str, Any] | None = None,
                scenario: str = "single") -> tuple[int, str]:
    """(timeout in seconds, its basis): max(floor, startup + margin x planned work)."""
    work, basis = planned_work(profile, suite, args, scenario)
    derived = STARTUP_ALLOWANCE_S + TIMEOUT_MARGIN * work
    seconds = int(math.ceil(max(MIN_JOB_TIMEOUT_S, derived)))
    floor = " (the floor)" if derived < MIN_JOB_TIMEOUT_S else ""
    return seconds, (f"{seconds} s{floor} = max({MIN_JOB_TIMEOUT_S:.0f}, {STARTUP_ALLOWANCE_S:.0f} + "
                     f"{TIMEOUT_MARGIN} x {work:.0f} s) from profile {profile.name}: {basis}")
