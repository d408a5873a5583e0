"""Progress people can follow: the run_job task's log lines and make run's [k/N] lines."""

from __future__ import annotations

import logging
import time

import pytest

from dlbench.pipeline import progress as progress_log
from dlbench.pipeline import steps
from dlbench.pipeline.progress import Progress, clock


def test_clock():
    assert (clock(0), clock(12.4), clock(80), clock(3725)) == ("0s", "12s", "1m20s", "1h02m")


def test_make_run_prints_k_of_n_in_order_with_elapsed_and_time_left():
    progress = Progress(started=100.0)
    assert progress.line("planned 3 jobs: a, b, c", 101.0) == "  planned 3 jobs"
    assert progress.line("job started: bare_metal/tf_cnn/alexnet/synthetic/r0", 110.0) is None
    assert progress.line("bare_metal/tf_cnn/alexnet/synthetic/r0 on local: throughput=812 images/s "
                         "elapsed_time=9.1 s", 120.0) is None
    first = progress.line("job finished: ok in 10.0 s: bare_metal/tf_cnn/alexnet/synthetic/r0", 120.0)
    # 20 s since the start, 10 s per job since the first started, 2 jobs left.
    assert first == ("[1/3] bare_metal/tf_cnn/alexnet/synthetic/r0 ... ok 10.0 s (throughput=812 images/s "
                     "elapsed_time=9.1 s) (elapsed 20s, ~20s left)")
    assert progress.line("job running: container_on_bare_metal/cpu/r0: 1m00s of at most 1h00m", 180.0) == \
        "        ... running container_on_bare_metal/cpu/r0: 1m00s of at most 1h00m"
    second = progress.line("job finished: skipped in 0.1 s: container_on_bare_metal/cpu/r0", 130.0)
    assert second == "[2/3] container_on_bare_metal/cpu/r0 ... skipped 0.1 s (elapsed 30s, ~10s left)"
    retried = progress.line("job finished: failed in 5.0 s: container_on_bare_metal/cpu/r0", 135.0)
    assert retried.startswith("[2/3] container_on_bare_metal/cpu/r0 ... retry: failed 5.0 s")
    last = progress.line("job finished: failed in 3.0 s: bare_metal/disk/r0", 200.0)
    assert last == "[3/3] bare_metal/disk/r0 ... failed 3.0 s (elapsed 1m40s, done)"
    assert progress.line("Filling up the DagBag", 201.0) is None


@pytest.mark.quiet  # timing bound of the product: a heartbeat within 0.18 s
def test_run_job_logs_start_heartbeat_and_end(caplog):
    caplog.set_level(logging.INFO, logger=progress_log.log.name)
    with progress_log.job_progress("bare_metal/cpu/r0", 3600, "4/12", interval=0.05):
        time.sleep(0.18)
    with pytest.raises(steps.JobSkipped), progress_log.job_progress("container_on_bare_metal/cpu/r0", 60):
        raise steps.JobSkipped("no Docker engine")
    with pytest.raises(RuntimeError), progress_log.job_progress("bare_metal/disk/r0", 60):
        raise RuntimeError("boom")
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "job 4/12 started: bare_metal/cpu/r0"
    assert any(m.startswith("job running: bare_metal/cpu/r0: 0s of at most 1h00m") for m in messages)
    assert any(m.startswith("job 4/12 finished: ok in 0.") and m.endswith(": bare_metal/cpu/r0") for m in messages)
    assert any(m.startswith("job finished: skipped in ") for m in messages)
    assert any(m.startswith("job finished: failed in ") and m.endswith("bare_metal/disk/r0") for m in messages)
    # Every finished line is one make run's Progress understands.
    progress = Progress(started=0.0)
    shown = [progress.line(m, 1.0) for m in messages if " finished: " in m]
    assert [s.split(" ... ")[0] for s in shown] == ["[1/?] bare_metal/cpu/r0", "[2/?] container_on_bare_metal/cpu/r0",
                                                     "[3/?] bare_metal/disk/r0"]
