"""The study's measurement protocol, the same for every framework and every training suite.

Throughput is items/sec over the measured steps only (warm-up excluded); per-step times are kept
as samples so variance and outliers stay visible; a background load of the shared scenario repeats
windows of measured steps until SIGTERM; the loss trajectory says whether a run diverged, beside
its timings. Each framework's trainer supplies one ``step`` (which ends by reading the loss back to
the host, so a step's time is the device's time) and calls :func:`warmup_and_measure` and
:func:`add_training_samples`: the CNN trainers (:mod:`dlbench.workloads.cnn`), the transformer,
dltools and Fathom. Imports no framework.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dlbench.workloads import harness
from dlbench.workloads.result import ResultDocument

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
