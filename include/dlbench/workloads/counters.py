"""Container-effect counters around every workload (study 002): cgroup and kernel counters.

The harness already records the process's own getrusage deltas. These hooks add what the
process cannot see about itself: its own cgroup's CPU time and throttling, page faults and
write-back, block I/O bytes (cgroup v2 or v1), the system-wide write-back from /proc/vmstat,
and, when asked (``DLBENCH_TRACE_SYSCALLS=1``), system-call counts from ``strace -c``. Tracing
slows the traced process, so it is off by default and the document says so; where the machine
forbids it (no ptrace in the container) the document says "not available".

The cgroup counters are those of the cgroup the workload process is in (v2: one directory; v1:
one per controller, found through /proc/self/cgroup and /proc/self/mountinfo), never blindly
the mount point: on a host that is the root, i.e. the whole machine. Labels ``cgroup`` (whose
counters) and ``cgroup_source`` (the directories read) say exactly what was read, including
when it is the root or when the own cgroup is not visible.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dlbench.workloads import environment
from dlbench.workloads.environment import UNIFIED, CgroupDir
from dlbench.workloads.harness import register_counter_hook
from dlbench.workloads.result import ResultDocument

TRACE_SYSCALLS_ENV = "DLBENCH_TRACE_SYSCALLS"
"""This workload's switch for system-call tracing, in its own environment (``1``, ``true`` or
``yes``). Its executor sets it from the controller's setting of the same name
(``dlbench.settings.workload_env``, docs/settings.md), or a person running the workload by hand:
workloads import nothing of dlbench's settings."""


def _read_kv(path: Path) -> dict[str, float]:
    try:
        text = path.read_text()
    except OSError:
        return {}
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and re.fullmatch(r"-?\d+", parts[1]):
            values[parts[0]] = float(parts[1])
    return values


def _io_v2(directory: Path) -> dict[str, float]:
    totals = {"rbytes": 0.0, "wbytes": 0.0, "rios": 0.0, "wios": 0.0}
    try:
        for line in (directory / "io.stat").read_text().splitlines():
            for field in line.split()[1:]:
                key, _, value = field.partition("=")
                if key in totals and value.isdigit():
                    totals[key] += float(value)
    except OSError:
        return {}
    return totals


def _io_v1(directory: Path) -> dict[str, float]:
    totals = {"rbytes": 0.0, "wbytes": 0.0}
    try:
        for line in (directory / "blkio.throttle.io_service_bytes").read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in ("Read", "Write"):
                totals["rbytes" if parts[1] == "Read" else "wbytes"] += float(parts[2])
    except OSError:
        return {}
    return totals


def cgroup_snapshot(dirs: dict[str, CgroupDir] | None = None) -> dict[str, tuple[float, str]]:
    """Counters of this process's own cgroup(s) (:func:`environment.cgroup_dirs`): metric -> (value, unit).

    Never the hierarchy's mount point blindly: on a host that is the root, the whole machine."""
    dirs = environment.cgroup_dirs() if dirs is None else dirs
    out: dict[str, tuple[float, str]] = {}
    memory: dict[str, float] = {}
    io: dict[str, float] = {}
    if UNIFIED in dirs:  # v2: one directory
        cg = dirs[UNIFIED].directory
        cpu = _read_kv(cg / "cpu.stat")
        for key, metric in (("usage_usec", "cgroup_cpu_time"), ("user_usec", "cgroup_cpu_time_user"),
                            ("system_usec", "cgroup_cpu_time_system"), ("throttled_usec", "cgroup_cpu_throttled")):
            if key in cpu:
                out[metric] = (cpu[key] / 1e6, "s")
        if "nr_throttled" in cpu:
            out["cgroup_cpu_throttled_periods"] = (cpu["nr_throttled"], "count")
        memory = _read_kv(cg / "memory.stat")
        io = _io_v2(cg)
    else:  # v1: a directory per controller, possibly of different cgroups
        if "cpuacct" in dirs:
            acct_dir = dirs["cpuacct"].directory
            usage = _read_kv_single(acct_dir / "cpuacct.usage")
            if usage is not None:
                out["cgroup_cpu_time"] = (usage / 1e9, "s")
            ticks = os.sysconf("SC_CLK_TCK")
            acct = _read_kv(acct_dir / "cpuacct.stat")
            if "user" in acct:
                out["cgroup_cpu_time_user"] = (acct["user"] / ticks, "s")
                out["cgroup_cpu_time_system"] = (acct.get("system", 0.0) / ticks, "s")
        if "cpu" in dirs:
            throttle = _read_kv(dirs["cpu"].directory / "cpu.stat")
            if "nr_throttled" in throttle:
                out["cgroup_cpu_throttled_periods"] = (throttle["nr_throttled"], "count")
                out["cgroup_cpu_throttled"] = (throttle.get("throttled_time", 0.0) / 1e9, "s")
        if "memory" in dirs:
            memory = _read_kv(dirs["memory"].directory / "memory.stat")
            # total_*: the cgroup and its descendants (a job's own child cgroups included).
            memory = {**memory, **{k[len("total_"):]: v for k, v in memory.items() if k.startswith("total_")}}
        if "blkio" in dirs:
            io = _io_v1(dirs["blkio"].directory)
    for key, metric in (("pgfault", "cgroup_page_faults"), ("pgmajfault", "cgroup_major_page_faults")):
        if key in memory:
            out[metric] = (memory[key], "count")
    for key, metric in (("rbytes", "cgroup_block_read"), ("wbytes", "cgroup_block_written")):
        if key in io:
            out[metric] = (io[key], "bytes")
    return out


def _read_kv_single(path: Path) -> float | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return float(text) if text.isdigit() else None


def vmstat_snapshot() -> dict[str, float]:
    stats = _read_kv(Path("/proc/vmstat"))
    return {k: stats[k] for k in ("nr_dirtied", "nr_written", "pgfault", "pgmajfault") if k in stats}


def cgroup_path() -> str:
    """This process's cgroup as /proc/self/cgroup names it (v2, else v1's memory hierarchy)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "unknown"
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        if hierarchy == "0" or "memory" in controllers.split(","):
            return path
    return "unknown"


@register_counter_hook
def cgroup_counters(doc: ResultDocument) -> Callable[[], None]:
    dirs = environment.cgroup_dirs()
    # Readers must know whose counters these are (a container's own cgroup, a job's, or the
    # machine's root): the labels describe exactly the directories the counters are read from.
    doc.labels.update(environment.cgroup_labels(dirs))
    before, vm_before = cgroup_snapshot(dirs), vmstat_snapshot()

    def finish() -> None:
        after, vm_after = cgroup_snapshot(dirs), vmstat_snapshot()
        for metric, (value, unit) in after.items():
            if metric in before:
                doc.add(metric, value - before[metric][0], unit, scope="cgroup", source="cgroup")
        page = os.sysconf("SC_PAGE_SIZE")
        if "nr_dirtied" in vm_after and "nr_dirtied" in vm_before:
            doc.add("writeback_dirtied", (vm_after["nr_dirtied"] - vm_before["nr_dirtied"]) * page, "bytes",
                    scope="system", source="vmstat")
            doc.add("writeback_written", (vm_after["nr_written"] - vm_before["nr_written"]) * page, "bytes",
                    scope="system", source="vmstat")

    return finish


def parse_strace_summary(text: str) -> dict[str, float]:
    """Calls per syscall and the total from ``strace -c`` output."""
    calls: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split()
        # % time  seconds  usecs/call  calls  [errors]  syscall
        if len(parts) >= 5 and re.fullmatch(r"\d+\.\d+", parts[0]) and parts[3].isdigit():
            calls[parts[-1]] = float(parts[3])
    return calls


@register_counter_hook
def syscall_counts(doc: ResultDocument) -> Callable[[], None]:
    if os.environ.get(TRACE_SYSCALLS_ENV, "") not in ("1", "true", "yes"):
        doc.labels["syscalls"] = f"not recorded (tracing perturbs timing; set {TRACE_SYSCALLS_ENV}=1)"
        return lambda: None
    if shutil.which("strace") is None:
        doc.labels["syscalls"] = "not available: strace is not installed"
        return lambda: None
    out = Path(tempfile.mkstemp(prefix="dlbench-strace-")[1])
    tracer = subprocess.Popen(["strace", "-c", "-f", "-o", str(out), "-p", str(os.getpid())],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    if tracer.poll() is not None:
        reason = (tracer.stderr.read() if tracer.stderr else "").strip().splitlines()[-1:] or ["strace exited"]
        doc.labels["syscalls"] = f"not available: {reason[0][:200]}"
        return lambda: None

    def finish() -> None:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=30)
        calls = parse_strace_summary(out.read_text())
        out.unlink(missing_ok=True)
        if not calls:
            doc.labels["syscalls"] = "not available: strace produced no summary"
            return
        doc.add("syscalls", calls.pop("total", sum(calls.values())), "count", scope="process", source="strace")
        for name, count in sorted(calls.items(), key=lambda kv: -kv[1])[:10]:
            doc.add("syscalls", count, "count", scope="process", source="strace", syscall=name)

    return finish
