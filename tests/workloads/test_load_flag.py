"""The loaded-machine flag separates jobs (issue 22, item 2): a real job through the harness with no
competing load is not flagged, the same job beside synthetic busy-loop processes is, and the
job's own child processes are never "other processes".

The real jobs are the CLI in a fresh process, as ``LocalProcessExecutor`` starts them
(tests/workloads/load_jobs.py), judged by :func:`dlbench.reports.analysis.machine_load.load_flag`. Their bound is
in cores of the whole machine, so they are ``alone`` tests: they run after every other test
stream has ended (tests/streams.py).
As ``quiet`` tests, run while the other stream was paused between two tests, they had the
devcloud stream's daemons mid-tier beside them (a Kubernetes control plane, Magnum's clusters):
the machine was above half the threshold for most of 90 s and both tries of the unloaded job
were flagged (6 and 8 %, CI of stop 34), while blocking the devcloud stream meanwhile. Daemons
outside the test run (the idle devcloud: 3 % of this host's CPU on average, above 5 % in 3 of
50 windows of 1.2 s, up to 12 %; the sandbox's agent and the kernel's memory monitor: 0.10-0.14
cores together over 10-s windows in CI of stop 43, which flagged all three tries under the old
rule of 5 % of the machine) can still be busy: the unloaded case measures a window of about 8 s
(120 steps), over which such bursts average out, waits (at most 30 s) for a quiet second before
the job, and tries up to three times when a burst came during a try, naming the busiest
processes outside the job in each flagged try.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbench.reports.analysis import machine_load
from dlbench.workloads import harness
from dlbench.workloads.result import Benchmark, ResultDocument
from tests.workloads.load_jobs import BURN, competing_load, quiet_second, run_job, shares

# --- the rule, on labels ---------------------------------------------------------------------

QUIET = {"host_cpus": "2", "host_load1_before": "1.90", "host_load1_after": "2.10", "host_steal_share": "0.0018",
         "host_other_cpu_share": "0.0162", "host_own_cpu_share": "0.5900", "host_window_s": "2.900"}


def test_quiet_labels_are_not_flagged_whatever_the_load_average():
    assert machine_load.load_flag(None) is None and machine_load.load_flag({}) is None
    assert machine_load.load_flag(QUIET) is None  # the controller's measured share, the previous jobs' load average
    # An older document (no window, no own share) with a load average of 4.5 on 4 CPUs: the old
    # rule flagged it; the load average is the previous jobs' work and no longer flags.
    old = {"host_cpus": "4", "host_load1_before": "4.5", "host_steal_share": "0.01", "host_other_cpu_share": "0.04"}
    assert machine_load.load_flag(old) is None


def test_other_processes_and_steal_beyond_the_thresholds_are_flagged():
    # 2 CPUs, the job used 1.18 cores: the floor (0.25 cores) is the bound.
    flag = machine_load.load_flag({**QUIET, "host_other_cpu_share": "0.2000"})
    assert flag is not None and "other processes used 0.40 cores beside the job's 1.18" in flag
    assert "the bound: 0.25" in flag
    at_floor = {**QUIET, "host_other_cpu_share": f"{machine_load.OTHER_CORES_FLOOR / 2:.4f}"}
    assert machine_load.load_flag(at_floor) is None  # at it: not beyond
    # The idle daemons that flagged the unloaded job in CI of stop 43 under the old rule (7 % of
    # 2 CPUs: 0.14 cores beside a job of 1.65) are housekeeping, not a neighbour.
    assert machine_load.load_flag({**QUIET, "host_other_cpu_share": "0.0697", "host_own_cpu_share": "0.8261"}) is None
    flag = machine_load.load_flag({**QUIET, "host_steal_share": "0.2000"})
    assert flag is not None and "20% of the CPU time stolen" in flag
    both = machine_load.load_flag({**QUIET, "host_steal_share": "0.2", "host_other_cpu_share": "0.5"})
    assert both is not None and "stolen" in both and "other processes used 1.00 cores" in both
    # Older documents are judged on the shares they have (no CPU count: read as one CPU, no own
    # share: the floor alone); unreadable values are no reason.
    assert machine_load.load_flag({"host_other_cpu_share": "0.4"}) is not None
    assert machine_load.load_flag({"host_other_cpu_share": "0.2"}) is None
    assert machine_load.load_flag({**QUIET, "host_other_cpu_share": "nan", "host_steal_share": "x"}) is None


def test_on_a_large_machine_the_bound_grows_with_the_job():
    """5 % of a 64-core host is 3.2 cores: beside a job that used all 64 that is housekeeping-sized
    (5 % of the job's work), beside a job of 8 cores it is 40 % more work on the machine."""
    big = {**QUIET, "host_cpus": "64", "host_window_s": "10.000"}
    whole = {**big, "host_own_cpu_share": "1.0000"}
    assert machine_load.load_flag({**whole, "host_other_cpu_share": "0.0500"}) is None  # 3.2 of the job's 64
    assert machine_load.load_flag({**whole, "host_other_cpu_share": "0.1000"}) is None  # 6.4: at the bound
    flag = machine_load.load_flag({**whole, "host_other_cpu_share": "0.1100"})  # 7.04 cores
    assert flag is not None and "7.04 cores beside the job's 64.00" in flag and "the bound: 6.40" in flag
    eighth = {**big, "host_own_cpu_share": "0.1250", "host_other_cpu_share": "0.0500"}  # 3.2 beside 8
    flag = machine_load.load_flag(eighth)
    assert flag is not None and "3.20 cores beside the job's 8.00" in flag and "the bound: 0.80" in flag


def test_a_window_too_short_to_resolve_the_threshold_is_not_judged():
    # 0.4 s on 2 CPUs: 80 jiffies, where the controller's 4 jiffies would be 5 % (0.1 cores).
    short = {**QUIET, "host_window_s": "0.400", "host_other_cpu_share": "0.5000"}
    assert not machine_load.judged(short) and machine_load.load_flag(short) is None
    assert machine_load.judged({**short, "host_window_s": "0.500"})  # 1 CPU-second: judged
    assert machine_load.load_flag({**short, "host_window_s": "0.500"}) is not None


# --- the harness's measurement, for real -----------------------------------------------------

UNLOADED_STEPS = 120
"""Measured steps of the unloaded job: a window of about 8 s here (5 steps: about 1.1 s), so that
one burst of the machine's own daemons (the idle devcloud's busiest 1.2 s: 12 %) is diluted. The
devcloud at rest after a whole test run is busier (3.8 % median over 1.2 s, 4.4-5.4 % over 4-5-s
windows): its periodic work needs the longer window to average out below the 5 % threshold."""
TRIES = 3


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


@pytest.mark.alone
def test_a_job_without_competing_load_is_not_flagged(tmp_path, record_property):
    tries = []
    for attempt in range(TRIES):
        quiet = quiet_second()  # only daemons outside the test run can be busy now
        before = _cpu_by_process()
        labels = run_job(tmp_path, f"quiet{attempt}", UNLOADED_STEPS)
        flag = machine_load.load_flag(labels)
        busiest = f"; busiest processes outside the job meanwhile: {_busiest(before)}" if flag else ""
        tries.append(f"try {attempt + 1} (quiet second found: {quiet}): {shares(labels)} -> {flag}{busiest}")
        if flag is None:
            break
    print("\n".join(tries))
    record_property("tries", " | ".join(tries))  # into the JUnit file: how close a passing run came
    assert flag is None, "a job with no competing load was flagged:\n" + "\n".join(tries)
    assert float(labels["host_own_cpu_share"]) > 0.2  # the job's own training is counted as its own


@pytest.mark.alone
def test_a_job_beside_a_synthetic_load_is_flagged(tmp_path):
    cpus = os.cpu_count() or 1
    with competing_load(cpus):
        labels = run_job(tmp_path, "loaded")
    flag = machine_load.load_flag(labels)
    print(shares(labels), "->", flag)
    assert flag is not None and "other processes used" in flag, shares(labels)
    # One busy loop per CPU beside a job that wants them all: the loops get a core or more.
    use = machine_load.cpu_use(labels)
    assert use is not None and use.other_cores > 2 * use.bound, shares(labels)


@pytest.mark.alone
def test_the_jobs_own_live_children_are_not_other_processes(tmp_path):
    """A workload whose work runs in child processes still alive when the window closes (an MPI
    rank, a server role): getrusage cannot see them, /proc can; a grandchild through a shell too."""
    cpus = os.cpu_count() or 1
    quiet_second()
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
    print(shares(labels))
    # The job's own CPU time (own share x window x CPUs) includes what its children had used when
    # they were last looked at: counted as other processes, own would be the harness's idle few
    # hundredths of a second. Judged on CPU seconds, not on the remaining "other" share: that share
    # also holds whatever the machine's daemons did meanwhile (5.06 % once in CI beside the
    # devcloud's guests), which is the other two tests' question, not this one's.
    own_seconds = float(labels["host_own_cpu_share"]) * float(labels["host_window_s"]) * float(labels["host_cpus"])
    children_seconds = sum(live.values())
    assert children_seconds > 1.0, live  # two seconds of busy loops on the machine's CPUs
    assert own_seconds >= 0.95 * children_seconds, (own_seconds, children_seconds, shares(labels))
