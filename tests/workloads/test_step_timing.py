"""Warm-up exclusion and throughput arithmetic, checked with a controlled clock (not wall time)."""

from __future__ import annotations

import pytest

from dlbench.workloads.training.measure import summarize_steps, timed_steps


class ScriptedClock:
    """A clock whose every step lasts a scripted duration: step i takes durations[i] seconds."""

    def __init__(self, durations: list[float]) -> None:
        self.durations = list(durations)
        self.now = 100.0
        self.calls = 0

    def __call__(self) -> float:
        # timed_steps reads the clock twice per step: before (even call) and after (odd call).
        if self.calls % 2 == 1:
            self.now += self.durations[self.calls // 2]
        self.calls += 1
        return self.now


def test_warmup_steps_are_excluded_from_throughput():
    # Two slow warm-up steps (graph tracing) then four steady 0.5 s steps at 32 images each.
    durations = [10.0, 3.0, 0.5, 0.5, 0.5, 0.5]
    steps = timed_steps(lambda: None, len(durations), clock=ScriptedClock(durations))
    assert steps == durations
    summary = summarize_steps(steps, warmup=2, images_per_step=32)
    assert summary.measured_steps == 4
    assert summary.measured_seconds == pytest.approx(2.0)
    assert summary.images_per_sec == pytest.approx(64.0)  # 4 * 32 / 2.0, not 6 * 32 / 15.0
    assert summary.step_std == pytest.approx(0.0)


def test_variance_and_tail_are_reported():
    summary = summarize_steps([9.0, 1.0, 1.0, 1.0, 3.0], warmup=1, images_per_step=8)
    assert summary.step_mean == pytest.approx(1.5)
    assert summary.step_std == pytest.approx(1.0)
    assert summary.step_p95 == pytest.approx(3.0)


def test_not_enough_steps_is_an_error():
    with pytest.raises(ValueError, match="need more than 2 step times"):
        summarize_steps([1.0, 1.0], warmup=2, images_per_step=1)


def test_elapsed_time_is_the_process_age_on_one_clock():
    """A controlled launcher: the workload's process age (what elapsed_time reports) matches the
    time since the launcher started it, within 50 ms (the old btime-based start was off by up
    to a second)."""
    import subprocess
    import sys
    import time

    code = ("import time; from dlbench.workloads.harness import process_age; time.sleep(0.5); "
            "print(process_age(), time.clock_gettime(time.CLOCK_BOOTTIME))")
    launched = time.clock_gettime(time.CLOCK_BOOTTIME)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    age, now = (float(v) for v in out.split())
    assert now - launched - 0.05 <= age <= now - launched + 0.011, (age, now - launched)
    assert age >= 0.5
