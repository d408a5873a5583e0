"""One Fathom workload, one task, timed the way every suite of this project times steps.

The runner knows no model by name: it asks the workload (:mod:`dlbench.workloads.fathom.workload`)
for its data, network and step, checks the network's parameter count against the architecture's
arithmetic, runs ``warmup_steps`` untimed-for-throughput steps (tracing, first touches) and
``measured_steps`` timed ones. Each step ends by reading its result back to the host (the loss, or
the inference's outputs), which synchronises the device, so a step's time is the device's time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dlbench.workloads.fathom.workload import Batch, DataMode, FathomWorkload
from dlbench.workloads.profiles import FathomModelSpec, FathomTask
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.tf_instance import framework_labels
from dlbench.workloads.training.measure import (
    Clock,
    StepCounts,
    StepSummary,
    add_loss_samples,
    summarize_steps,
    warmup_and_measure,
)


def read_back(outputs: Any) -> float:
    """Copy every tensor of ``outputs`` to the host (the end of a timed step) and return the first
    one's sum as a float (the loss, for a training step's scalar)."""
    import numpy as np  # heavy: only running a workload needs numpy

    host = [np.asarray(t) for t in _flatten(outputs)]
    return float(host[0].sum()) if host else 0.0


def _flatten(outputs: Any) -> list[Any]:
    if isinstance(outputs, dict):
        return [t for key in sorted(outputs) for t in _flatten(outputs[key])]
    if isinstance(outputs, (list, tuple)):
        return [t for item in outputs for t in _flatten(item)]
    return [outputs]


def add_step_samples(doc: ResultDocument, *, step_times: Sequence[float], warmup_steps: int, samples_per_step: int,
                     unit: str, setup_seconds: float, window: tuple[float, float]) -> StepSummary:
    """The samples of every Fathom document (docs/fathom.md): throughput in the workload's unit,
    the measured steps' times and spread, the setup time and the measured window."""
    summary = summarize_steps(step_times, warmup_steps, samples_per_step)
    doc.add("throughput", summary.images_per_sec, unit)
    doc.add("measured_time", summary.measured_seconds, "s")
    doc.add("setup_time", setup_seconds, "s")
    doc.add("step_time_mean", summary.step_mean, "s")
    doc.add("step_time_std", summary.step_std, "s")
    doc.add("step_time_p95", summary.step_p95, "s")
    for index, seconds in enumerate(step_times[warmup_steps:]):
        doc.add("step_time", seconds, "s", step=index)
    doc.add("measured_window_start", window[0], "s", clock="CLOCK_REALTIME")
    doc.add("measured_window_end", window[1], "s", clock="CLOCK_REALTIME")
    return summary


def add_losses(doc: ResultDocument, losses: Sequence[float], classes: int | None) -> None:
    """The loss curve: tf_cnn's loss samples and divergence labels for a classification loss; for
    another loss (a reconstruction, a TD error: no chance level to scale by) the same samples and
    a divergence check for NaN/inf only."""
    if classes is not None:
        add_loss_samples(doc, losses, classes)
        return
    every = max(1, len(losses) // 10)
    for step in sorted({0, len(losses) - 1, *range(0, len(losses), every)} if losses else set()):
        if math.isfinite(losses[step]):
            doc.add("loss", losses[step], "loss", step=step)
    bad = [i for i, value in enumerate(losses) if not math.isfinite(value)]
    if bad:
        doc.add("first_nonfinite_loss_step", bad[0], "step")
    reason = "" if not bad else ("nan" if math.isnan(losses[bad[0]]) else "inf")
    doc.labels.update({"diverged": str(bool(bad)).lower(), "divergence": reason})


def run(doc: ResultDocument, work: FathomWorkload, spec: FathomModelSpec, *, task: FathomTask, counts: StepCounts,
        data_mode: DataMode, data_dir: Path | None, clock: Clock = time.perf_counter) -> StepSummary:
    """Build ``work`` at ``spec`` (its batch size already the run's), run ``task`` for ``counts``'
    warm-up and measured steps (tf_cnn's protocol, :func:`warmup_and_measure`) and add the samples
    and labels of the document contract (docs/fathom.md)."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a workload needs it

    start = clock()
    data = work.data(spec, spec.batch_size, mode=data_mode, data_dir=data_dir, seed=doc.repetition,
                     steps=counts.warmup_steps + counts.measured_steps)
    load_seconds = clock() - start  # reading or generating the data (part of setup_time)
    if not data.batches:
        raise RuntimeError(f"{work.model}: no batch of {spec.batch_size} in the data ({data.source})")
    net = work.build(spec)
    expected, counted = work.expected_parameters(spec), int(net.count_params())
    if expected != counted:
        raise AssertionError(f"{work.model}: the network has {counted} parameters, its architecture {expected}")
    training = task is FathomTask.TRAIN
    step_fn: Callable[[Batch], Any] = work.train_step(net, spec) if training else work.infer_step(net, spec)
    losses: list[float] = []
    position = [0]

    def step() -> None:
        batch = data.batches[position[0] % len(data.batches)]
        position[0] += 1
        value = read_back(step_fn(batch))
        if training:
            losses.append(value)

    setup_seconds = clock() - start  # data, network, optimizer: everything before the first step
    step_times, window = warmup_and_measure(doc, step, counts, clock, loop=False)
    summary = add_step_samples(doc, step_times=step_times, warmup_steps=counts.warmup_steps,
                               samples_per_step=spec.batch_size, unit=work.unit, setup_seconds=setup_seconds,
                               window=window)
    doc.add("data_load_time", load_seconds, "s")
    if training:
        add_losses(doc, losses, work.loss_classes)
    gpus = tf.config.list_logical_devices("GPU")
    for gpu in gpus:
        try:
            doc.add("peak_memory", tf.config.experimental.get_memory_info(gpu.name)["peak"], "bytes",
                    device=gpu.name, scope="device")
        except (ValueError, KeyError):
            pass
    doc.labels.update({
        **framework_labels(bool(gpus)),
        "model_parameters": str(counted),
        "task": task.value,
        "data": data.kind.value,
        "data_source": data.source[:500],
        "device": "gpu" if gpus else "cpu",
        "framework": "tensorflow",
        "precision": "fp32",
    })
    return summary
