"""Real jobs and known competing loads for the loaded-machine flag: one piece for its tests
(tests/workloads/test_load_flag.py) and its calibration (bench/load_flag.py).

A job is the workload CLI in a fresh process, as ``LocalProcessExecutor`` starts it (a tf_cnn
AlexNet smoke job on synthetic data); a competing load is a process of the test's, never the
job's, that keeps a known fraction of one CPU busy.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dlbench.polling import Deadline, until
from dlbench.reports.analysis import machine_load
from dlbench.workloads.result import ResultDocument

BURN = "while True: pass"
DUTY_PERIOD_S = 0.02
"""One busy-then-idle cycle of a partial load: short against a job's window (seconds), long
against the scheduler's tick, so the offered fraction is what the machine sees."""
QUIET_WAIT_S = 30
"""How long :func:`quiet_second` waits before a job runs anyway: the devcloud at rest after a run
never gave a quiet second of the old, stricter kind in 90 s (docs/testing.md, run Q)."""


def run_job(out_dir: Path, name: str, measured_steps: int | None = None) -> dict[str, str]:
    """One real tf_cnn job (alexnet, smoke profile, synthetic data: about 1 s of training on 2 CPUs,
    or ``measured_steps``) through the CLI in a fresh process; its labels."""
    out = out_dir / f"{name}.json"
    steps = ["--measured-steps", str(measured_steps)] if measured_steps else []
    proc = subprocess.run([sys.executable, "-m", "dlbench.workloads", "tf-cnn", "--model", "alexnet",
                           "--profile", "smoke", *steps, "--out", str(out)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    labels = ResultDocument.read(out).labels
    assert set(machine_load.LOAD_LABELS) <= set(labels), labels
    assert machine_load.judged(labels), labels  # long enough for the rule to speak
    return labels


def shares(labels: dict[str, str]) -> str:
    """The load labels, and the cores the rule judges, on one line."""
    use = machine_load.cpu_use(labels)
    cores = f" (other {use.other_cores:.2f} cores, job {use.job_cores or 0:.2f})" if use else ""
    return ", ".join(f"{k.removeprefix('host_')}={labels[k]}" for k in machine_load.LOAD_LABELS) + cores


def machine_busy_cores(seconds: float = 1.0) -> float:
    """CPUs busy (user + nice + system) on average over ``seconds``, from /proc/stat."""
    def read() -> tuple[float, float, int]:
        lines = Path("/proc/stat").read_text().splitlines()
        fields = [float(v) for v in lines[0].split()[1:9]]
        cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
        return fields[0] + fields[1] + fields[2], sum(fields), cpus

    busy0, total0, cpus = read()
    time.sleep(seconds)  # not a wait: the window the share is measured over
    busy1, total1, _ = read()
    return cpus * (busy1 - busy0) / max(1.0, total1 - total0)


def quiet_second() -> bool:
    """Wait (at most :data:`QUIET_WAIT_S`) for one second with less than half the rule's floor of
    cores busy, so that a job starts on the machine it is meant to be measured on; whether one came."""
    return until(lambda: machine_busy_cores() < machine_load.OTHER_CORES_FLOOR / 2,
                 Deadline(QUIET_WAIT_S, "a quiet second"), 0.5)


def _load_program(duty: float) -> str:
    if duty >= 1.0:
        return BURN
    busy, idle = DUTY_PERIOD_S * duty, DUTY_PERIOD_S * (1.0 - duty)
    return (f"import time\nwhile True:\n    end = time.perf_counter() + {busy!r}\n"
            f"    while time.perf_counter() < end: pass\n    time.sleep({idle!r})\n")


@contextmanager
def competing_load(count: int, duty: float = 1.0) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` processes that are not the job's (children of the caller), each offering ``duty``
    of one CPU (1.0: a busy loop), ended after."""
    procs = [subprocess.Popen([sys.executable, "-c", _load_program(duty)]) for _ in range(count)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
