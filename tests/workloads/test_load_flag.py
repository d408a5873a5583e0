"""The loaded-machine flag separates jobs (issue 22, item 2): a real job through the harness with no
competing load is not flagged, the same job beside synthetic busy-loop processes is, and the
job's own child processes are never "other processes".

The real jobs are the CLI in a fresh process, as ``LocalProcessExecutor`` starts them, judged by
:func:`dlbench.reports.load.load_flag`. Their bound is a share of the whole machine's CPU, so
they are ``alone`` tests: they run after every other test stream has ended (tests/streams.py).
As ``quiet`` tests, run while the other stream was paused between two tests, they had the
devcloud stream's daemons mid-tier beside them (a Kubernetes control plane, Magnum's clusters):
the machine was above half the threshold for most of 90 s and both tries of the unloaded job
were flagged (6 and 8 %, CI of stop 34), while blocking the devcloud stream meanwhile. Daemons
outside the test run (the idle devcloud: 3 % of this host's CPU on average, above 5 % in 3 of
50 windows of 1.2 s, up to 12 %; another session on a shared host) can still be busy: the
unloaded case measures a window of about 8 s (120 steps), over which such bursts average out,
waits (at most 30 s) for a quiet second before the job, and tries up to three times when a burst
came during a try, naming the busiest processes outside the job in each flagged try.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dlbench.polling import Deadline, until
from dlbench.reports import load
from dlbench.workloads import harness
from dlbench.workloads.result import Benchmark, ResultDocument

BURN = "while True: pass"


# --- the rule, on labels ---------------------------------------------------------------------

QUIET = {"host_cpus": "2", "host_load1_before": "1.90", "host_load1_after": "2.10", "host_steal_share": "0.0018",
         "host_other_cpu_share": "0.0162", "host_own_cpu_share": "0.5900", "host_window_s": "2.900"}


def test_quiet_labels_are_not_flagged_whatever_the_load_average():
    assert load.load_flag(None) is None and load.load_flag({}) is None
    assert load.load_flag(QUIET) is None  # the controller's measured share, the previous jobs' load average
    # An older document (no window, no own share) with a load average of 4.5 on 4 CPUs: the old
    # rule flagged it; the load average is the previous jobs' work and no longer flags.
    old = {"host_cpus": "4", "host_load1_before": "4.5", "host_steal_share": "0.01", "host_other_cpu_share": "0.04"}
    assert load.load_flag(old) is None


def test_other_processes_and_steal_beyond_the_thresholds_are_flagged():
    flag = load.load_flag({**QUIET, "host_other_cpu_share": "0.0600"})
    assert flag is not None and "other processes used 6% of the machine's CPU" in flag
    at_threshold = {**QUIET, "host_other_cpu_share": f"{load.OTHER_CPU_THRESHOLD:.4f}"}
    assert load.load_flag(at_threshold) is None  # at it: not beyond
    flag = load.load_flag({**QUIET, "host_steal_share": "0.2000"})
    assert flag is not None and "20% of the CPU time stolen" in flag
    both = load.load_flag({**QUIET, "host_steal_share": "0.2", "host_other_cpu_share": "0.5"})
    assert both is not None and "stolen" in both and "other processes used 50%" in both
    # Older documents are judged on the shares they have; unreadable values are no reason.
    assert load.load_flag({"host_other_cpu_share": "0.4"}) is not None
    assert load.load_flag({**QUIET, "host_other_cpu_share": "nan", "host_steal_share": "x"}) is None


def test_a_window_too_short_to_resolve_the_threshold_is_not_judged():
    # 0.4 s on 2 CPUs: 80 jiffies, where the controller's 4 jiffies would be 5 %.
    short = {**QUIET, "host_window_s": "0.400", "host_other_cpu_share": "0.5000"}
    assert not load.judged(short) and load.load_flag(short) is None
    assert load.judged({**short, "host_window_s": "0.500"})  # 1 CPU-second: judged
    assert load.load_flag({**short, "host_window_s": "0.500"}) is not None


# --- the harness's measurement, for real -----------------------------------------------------

def _machine_busy_share(seconds: float = 1.0) -> float:
    """Share of all CPUs busy (user + nice + system) over ``seconds``, from /proc/stat."""
    def read() -> tuple[float, float]:
        fields = [float(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
        return fields[0] + fields[1] + fields[2], sum(fields)

    busy0, total0 = read()
    time.sleep(seconds)  # not a wait: the window the share is measured over
    busy1, total1 = read()
    return (busy1 - busy0) / max(1.0, total1 - total0)


UNLOADED_STEPS = 120
"""Measured steps of the unloaded job: a window of about 8 s here (5 steps: about 1.1 s), so that
one burst of the machine's own daemons (the idle devcloud's busiest 1.2 s: 12 %) is diluted. The
devcloud at rest after a whole test run is busier (3.8 % median over 1.2 s, 4.4-5.4 % over 4-5-s
windows): its periodic work needs the longer window to average out below the 5 % threshold."""
TRIES = 3
QUIET_WAIT_S = 30
"""How long a try waits for a quiet second before it runs anyway: the devcloud at rest after a run
never gave one in 90 s (docs/testing.md, run Q), so a longer wait only costs the run time."""


def _run_job(tmp_path: Path, name: str, measured_steps: int | None = None) -> dict[str, str]:
    """One real tf_cnn job (alexnet, smoke profile, synthetic data: about 1 s of training on 2 CPUs,
    or ``measured_steps``) through the CLI in a fresh process, as the local executor runs it; its labels."""
    out = tmp_path / f"{name}.json"
    steps = ["--measured-steps", str(measured_steps)] if measured_steps else []
    proc = subprocess.run([sys.executable, "-m", "dlbench.workloads", "tf-cnn", "--model", "alexnet",
                           "--profile", "smoke", *steps, "--out", str(out)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    labels = ResultDocument.read(out).labels
    assert set(load.LOAD_LABELS) <= set(labels), labels
    assert load.judged(labels), labels  # long enough for the rule to speak
    return labels


def _shares(labels: dict[str, str]) -> str:
    return ", ".join(f"{k.removeprefix('host_')}={labels[k]}" for k in load.LOAD_LABELS)


def _cpu_by_process() -> dict[tuple[str, str], tuple[float, str]]:
    """CPU seconds so far (user + system; not its reaped children's: this test's process would
    count the job's) and command of every process, by (pid, start time): the machine's other
    processes, named, for a failure message."""
    ticks = float(os.sysconf("SC_CLK_TCK"))
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # ended meanwhile
        fields = stat.rsplit(")", 1)[1].split()
        name = stat[stat.find("(") + 1:stat.rfind(")")]
        command = " ".join(a.decode(errors="replace") for a in argv[:3] if a)[:100] or f"[{name}]"
        found[(pid, fields[19])] = ((float(fields[11]) + float(fields[12])) / ticks, command)
    return found


def _busiest(before: dict[tuple[str, str], tuple[float, str]], count: int = 4) -> str:
    """The ``count`` processes that used the most CPU since ``before`` (the job itself has ended)."""
    used = sorted(((seconds - before.get(key, (0.0, ""))[0], command)
                   for key, (seconds, command) in _cpu_by_process().items()), reverse=True)
    return "; ".join(f"{seconds:.2f} CPU-s {command}" for seconds, command in used[:count] if seconds > 0)


def _quiet_second() -> bool:
    """Wait (at most :data:`QUIET_WAIT_S`) for one second below half the threshold, so that a job
    starts on the machine it is meant to be measured on; whether one came."""
    return until(lambda: _machine_busy_share() < load.OTHER_CPU_THRESHOLD / 2,
                 Deadline(QUIET_WAIT_S, "a quiet second"), 0.5)


@contextmanager
def _burners(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` busy-loop processes that are not the job's (children of the test), ended after."""
    procs = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(count)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


@pytest.mark.alone
def test_a_job_without_competing_load_is_not_flagged(tmp_path, record_property):
    tries = []
    for attempt in range(TRIES):
        quiet = _quiet_second()  # only daemons outside the test run can be busy now
        before = _cpu_by_process()
        labels = _run_job(tmp_path, f"quiet{attempt}", UNLOADED_STEPS)
        flag = load.load_flag(labels)
        busiest = f"; busiest processes outside the job meanwhile: {_busiest(before)}" if flag else ""
        tries.append(f"try {attempt + 1} (quiet second found: {quiet}): {_shares(labels)} -> {flag}{busiest}")
        if flag is None:
            break
    print("\n".join(tries))
    record_property("tries", " | ".join(tries))  # into the JUnit file: how close a passing run came
    assert flag is None, "a job with no competing load was flagged:\n" + "\n".join(tries)
    assert float(labels["host_own_cpu_share"]) > 0.2  # the job's own training is counted as its own


@pytest.mark.alone
def test_a_job_beside_a_synthetic_load_is_flagged(tmp_path):
    cpus = os.cpu_count() or 1
    with _burners(cpus):
        labels = _run_job(tmp_path, "loaded")
    flag = load.load_flag(labels)
    print(_shares(labels), "->", flag)
    assert flag is not None and "other processes used" in flag, _shares(labels)
    # One busy loop per CPU beside a job that wants them all: the burners get a large share.
    assert float(labels["host_other_cpu_share"]) > 4 * load.OTHER_CPU_THRESHOLD, _shares(labels)


@pytest.mark.alone
def test_the_jobs_own_live_children_are_not_other_processes(tmp_path):
    """A workload whose work runs in child processes still alive when the window closes (an MPI
    rank, a server role): getrusage cannot see them, /proc can; a grandchild through a shell too."""
    cpus = os.cpu_count() or 1
    _quiet_second()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with harness.workload(Benchmark(suite="t", name="children"), out=tmp_path / "d.json"):
            procs += [subprocess.Popen(["sh", "-c", f"{sys.executable} -c '{BURN}' & wait"], start_new_session=True)
                      for _ in range(cpus)]
            time.sleep(2.0)  # not a wait: the children's work is the workload
            live = harness.descendants_cpu_seconds()
            assert len(live) >= 2 * cpus, live  # each shell and its python
            # The walk through the children files and the scan of all of /proc (kernels without
            # those files) find the same tree.
            assert set(harness._descendants_by_scan(os.getpid(), float(os.sysconf("SC_CLK_TCK")))) == set(live)
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGKILL)  # the shell and its python (their own session)
            proc.wait()
    labels = ResultDocument.read(tmp_path / "d.json").labels
    print(_shares(labels))
    # The job's own CPU time (own share x window x CPUs) includes what its children had used when
    # they were last looked at: counted as other processes, own would be the harness's idle few
    # hundredths of a second. Judged on CPU seconds, not on the remaining "other" share: that share
    # also holds whatever the machine's daemons did meanwhile (5.06 % once in CI beside the
    # devcloud's guests), which is the other two tests' question, not this one's.
    own_seconds = float(labels["host_own_cpu_share"]) * float(labels["host_window_s"]) * float(labels["host_cpus"])
    children_seconds = sum(live.values())
    assert children_seconds > 1.0, live  # two seconds of busy loops on the machine's CPUs
    assert own_seconds >= 0.95 * children_seconds, (own_seconds, children_seconds, _shares(labels))
