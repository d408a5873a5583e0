"""The frame every workload runs in: one result document out, whatever happens inside.

The harness owns what all workloads share: collecting the environment, the container-effect
counters taken around the workload (study 002: page faults, context switches, CPU time,
block I/O), the elapsed time since process start, and writing the document even when the
workload fails, so that a failure is a row in the warehouse and not a hole.

It also owns how a workload ends when the executor stops it. A controller that runs several
processes as one job (a parameter server and its workers, a background load beside a measured
job) ends the long-running ones with SIGTERM, and ends every process of a job when one role
fails or the job times out. Inside :func:`workload`, SIGTERM becomes :class:`Stopped` in the main
thread, so the document is still written: a role whose normal end is being stopped catches it
(status ok, label ``ended_by=sigterm``); anywhere else it is a failure that names the signal.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from dlbench.workloads import environment
from dlbench.workloads.result import Benchmark, Platform, ResultDocument, Status

_RUSAGE_FIELDS: dict[str, tuple[str, str, float]] = {
    # sample metric: (rusage field, unit, scale)
    "minor_page_faults": ("ru_minflt", "count", 1),
    "major_page_faults": ("ru_majflt", "count", 1),
    "voluntary_context_switches": ("ru_nvcsw", "count", 1),
    "involuntary_context_switches": ("ru_nivcsw", "count", 1),
    "cpu_time_user": ("ru_utime", "s", 1),
    "cpu_time_system": ("ru_stime", "s", 1),
    "block_input_ops": ("ru_inblock", "count", 1),
    "block_output_ops": ("ru_oublock", "count", 1),
}


def process_age() -> float:
    """Seconds since this process started (the 'job launch' of the core study), on one clock.

    /proc/self/stat's start time counts clock ticks since boot on the boot-time clock; comparing it
    with CLOCK_BOOTTIME now gives the age with tick resolution (10 ms) on any kernel, a VM's or a
    container's host. (Adding it to /proc/stat's whole-second ``btime`` and comparing with the wall
    clock, as before, was biased by up to a second, and differently on every machine.)"""
    try:
        stat = Path("/proc/self/stat").read_text()
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED_AT  # no /proc: from this module's import (a lower bound)


_IMPORTED_AT = time.monotonic()


def _rusage_snapshot() -> dict[str, dict[str, float]]:
    return {
        scope: {name: float(getattr(resource.getrusage(who), field)) for name, (field, _, _) in _RUSAGE_FIELDS.items()}
        for scope, who in (("process", resource.RUSAGE_SELF), ("children", resource.RUSAGE_CHILDREN))
    }


def host_snapshot() -> dict[str, float]:
    """The machine's load now: the 1-minute load average (/proc/loadavg), the number of CPUs, the
    busy, steal and total jiffies of all CPUs (/proc/stat) and the monotonic clock. Empty where
    /proc is missing (the clock is always there). Inside a container both files are the host's
    (unless LXCFS virtualizes them), which is what tells whether the machine was busy.

    "busy" is user + nice + system time: what processes ran. Interrupt and softirq time is left
    out because the kernel charges it to no process: it is mostly the job's own disk and network
    traffic (the disk and network benchmarks make plenty), so counting it as "other processes"
    would flag those benchmarks for their own I/O."""
    found: dict[str, float] = {"monotonic": time.monotonic()}
    try:
        found["load1"] = float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    try:
        lines = Path("/proc/stat").read_text().splitlines()
        fields = [float(v) for v in lines[0].split()[1:]]
        fields += [0.0] * (8 - len(fields))
        user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
        found["busy"] = user + nice + system
        found["steal"] = steal
        found["total"] = user + nice + system + idle + iowait + irq + softirq + steal
        found["cpus"] = float(sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit()))
    except (OSError, ValueError, IndexError):
        pass
    return found


def _proc_cpu_seconds(pid: int, ticks: float) -> tuple[int, float]:
    """(parent pid, CPU seconds: utime + stime + cutime + cstime) of a process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # after the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    return int(fields[1]), sum(float(v) for v in fields[11:15]) / ticks


def _children(pid: int) -> list[int]:
    """Direct children of ``pid``, from /proc/<pid>/task/*/children (every thread's own)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # ended meanwhile
    found: list[int] = []
    for task in tasks:
        try:
            found += [int(v) for v in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return found


def descendants_cpu_seconds(root: int | None = None) -> dict[int, float]:
    """CPU seconds (user + system, with their own reaped children's) of every live process below
    ``root`` (default: this process), by pid, from /proc; empty where /proc is missing.

    getrusage sees this process and the children it has waited for; a child still running (an
    MPI rank, a server role the workload started, a helper tool) is only visible here. Without
    it, the job's own children would count as "other processes" on the machine. The tree is
    walked through /proc/<pid>/task/*/children (a few reads: this runs inside the job's
    ``elapsed_time``); a kernel without those files gets a scan of all of /proc."""
    root = os.getpid() if root is None else root
    ticks = float(os.sysconf("SC_CLK_TCK"))
    if not Path(f"/proc/{root}/task/{root}/children").exists():  # CONFIG_PROC_CHILDREN unset, or no /proc
        return _descendants_by_scan(root, ticks)
    found: dict[int, float] = {}
    todo = _children(root)
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        try:
            found[pid] = _proc_cpu_seconds(pid, ticks)[1]
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
        todo += _children(pid)
    return found


def _descendants_by_scan(root: int, ticks: float) -> dict[int, float]:
    """:func:`descendants_cpu_seconds` from every process's parent pid: the same answer where the
    kernel has no children files, at the price of reading all of /proc (about 20 us a process)."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return {}
    for pid in entries:
        try:
            parent[pid], cpu[pid] = _proc_cpu_seconds(pid, ticks)
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, float] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found[pid] = cpu[pid]
            todo.extend(children.get(pid, []))
    return found


def own_tree_cpu_seconds(rusage_before: dict[str, dict[str, float]], rusage_after: dict[str, dict[str, float]],
                         live_before: dict[int, float], live_after: dict[int, float]) -> float:
    """CPU seconds the job's whole process tree used between two readings: this process and its
    waited-for children (getrusage) plus its live descendants (:func:`descendants_cpu_seconds`).

    A descendant alive at the first reading and reaped by the second is in getrusage's children
    with its whole life, so its CPU time before the first reading is taken off again."""
    return (_own_cpu_seconds(rusage_before, rusage_after)
            + sum(live_after.values()) - sum(live_before.values()))


def host_load_labels(before: dict[str, float], after: dict[str, float], own_cpu_seconds: float) -> dict[str, str]:
    """A job's load labels from two :func:`host_snapshot` readings and the CPU time its own process
    tree used meanwhile (:func:`own_tree_cpu_seconds`): ``host_load1_before``/``_after`` and
    ``host_cpus`` (context), and, where /proc/stat moved, ``host_steal_share`` (share of the
    machine's CPU time stolen by the hypervisor), ``host_other_cpu_share`` (share used by
    processes outside the job's tree), ``host_own_cpu_share`` (share the job's tree used) and
    ``host_window_s`` (seconds between the readings: the shares' resolution is one jiffy in
    ``host_cpus`` x USER_HZ x window). The report judges them (:mod:`dlbench.reports.analysis.machine_load`)."""
    labels: dict[str, str] = {}
    if "load1" in before:
        labels["host_load1_before"] = f"{before['load1']:.2f}"
    if "load1" in after:
        labels["host_load1_after"] = f"{after['load1']:.2f}"
    if before.get("cpus"):
        labels["host_cpus"] = str(int(before["cpus"]))
    total = after.get("total", 0.0) - before.get("total", 0.0)
    if total > 0:
        ticks = float(os.sysconf("SC_CLK_TCK"))
        steal = after.get("steal", 0.0) - before.get("steal", 0.0)
        own = max(0.0, own_cpu_seconds) * ticks
        other = after.get("busy", 0.0) - before.get("busy", 0.0) - own
        labels["host_steal_share"] = f"{max(0.0, steal) / total:.4f}"
        labels["host_other_cpu_share"] = f"{min(1.0, max(0.0, other / total)):.4f}"
        labels["host_own_cpu_share"] = f"{min(1.0, own / total):.4f}"
        if "monotonic" in before and "monotonic" in after:
            labels["host_window_s"] = f"{max(0.0, after['monotonic'] - before['monotonic']):.3f}"
    return labels


def _own_cpu_seconds(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> float:
    return sum(after[scope][name] - before[scope][name] for scope in ("process", "children")
               for name in ("cpu_time_user", "cpu_time_system"))


STOPPED_MESSAGE = "stopped by SIGTERM (the executor ended the job: another role failed or it timed out)"


class Stopped(BaseException):  # noqa: N818 - the name says what happened, not that it is an error
    """SIGTERM arrived: the executor ended this job.

    A BaseException (like KeyboardInterrupt) so that ``except Exception`` in workload code
    cannot swallow it and keep a stopped job running."""

    def __init__(self, message: str = STOPPED_MESSAGE) -> None:
        super().__init__(message)


class _StopState:
    """What the SIGTERM handler knows. Only the main thread runs signal handlers, and it is the
    only writer here, so plain attributes are enough."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requested = False  # a SIGTERM arrived
        self.raised = False  # Stopped was raised (once per workload: a second SIGTERM is ignored)
        self.deferred = 0  # depth of deferred_stop() blocks
        self.closing = False  # the document is being written: never interrupt that


_stop = _StopState()


def _on_sigterm(signum: int, frame: object) -> None:
    _stop.requested = True
    if _stop.raised or _stop.closing or _stop.deferred:
        return
    _stop.raised = True
    raise Stopped()


def ended_by_stop(doc: ResultDocument) -> None:
    """Record that this workload ended normally by being stopped (a parameter server, a background load)."""
    doc.labels["ended_by"] = "sigterm"


def progress(message: str) -> None:
    """One line on stderr: where a long-running role is (listening, initialised, measuring, ...).

    The executor keeps stderr in its logs; a group of roles that hangs is diagnosed from these."""
    print(f"dlbench: {message}", file=sys.stderr, flush=True)


def stop_requested() -> bool:
    """Whether SIGTERM arrived during the current workload (raised or still deferred)."""
    return _stop.requested


@contextmanager
def deferred_stop() -> Iterator[None]:
    """Hold a SIGTERM until the block ends, then raise :class:`Stopped`.

    For short units of work whose result must not be half-recorded: a timed step whose time is
    taken after the step returns would otherwise lose a step that did complete. Only for blocks
    that cannot block for long: a SIGTERM waits for the block."""
    _stop.deferred += 1
    try:
        yield
    finally:
        _stop.deferred -= 1
    if _stop.requested and not _stop.raised and not _stop.deferred and not _stop.closing:
        _stop.raised = True
        raise Stopped()


_T = TypeVar("_T")


def interruptible(fn: Callable[[], _T], *, poll: float = 0.2) -> _T:
    """Run ``fn`` in a helper thread while the main thread waits in Python code, and return its result.

    Python runs signal handlers only in the main thread, between bytecodes: a main thread blocked
    in a C++ call (a TensorFlow session step waiting at a barrier for a worker that died, a
    collective waiting for a peer) would never see SIGTERM, and the executor would have to kill
    the process without a document. Here the blocking call runs in a daemon thread; SIGTERM
    raises :class:`Stopped` in the waiting main thread, and the helper thread is abandoned: it may
    be inside a native call that never returns, so the CLI ends a stopped process with
    ``os._exit`` after writing the document. ``fn``'s exceptions are re-raised in the caller."""
    values: list[_T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            values.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            errors.append(exc)

    thread = threading.Thread(target=target, name="dlbench-workload", daemon=True)
    thread.start()
    while thread.is_alive():  # Stopped (SIGTERM) propagates from here; the thread is left running
        thread.join(poll)
    if errors:
        raise errors[0]
    return values[0]


CounterHook = Callable[[ResultDocument], Callable[[], None]]
"""A hook is called before the workload and returns a function called after it, which adds samples."""

_counter_hooks: list[CounterHook] = []


def register_counter_hook(hook: CounterHook) -> CounterHook:
    """Let other modules add counters around every workload (cgroup, syscalls, ...)."""
    _counter_hooks.append(hook)
    return hook


@contextmanager
def workload(
    benchmark: Benchmark,
    *,
    out: str | Path | None,
    run_id: str = "adhoc",
    job_id: str | None = None,
    repetition: int = 0,
    platform: Platform | None = None,
    labels: dict[str, str] | None = None,
    versions: Callable[[], dict[str, str]] | None = None,
) -> Iterator[ResultDocument]:
    """Run the body as one workload and write its result document to ``out``.

    Exceptions are recorded in the document (status failed, error text) and re-raised so that
    the CLI exits non-zero; the document is written either way. SIGTERM is :class:`Stopped`
    while the body runs (see the module docstring); the previous handler is restored after.
    """
    doc = ResultDocument(
        benchmark=benchmark,
        environment=environment.collect(platform),
        run_id=run_id,
        repetition=repetition,
        labels=labels or {},
        **({"job_id": job_id} if job_id else {}),
    )
    live_before = descendants_cpu_seconds()
    load_before = host_snapshot()
    before = _rusage_snapshot()
    finishers = [hook(doc) for hook in _counter_hooks]
    _stop.reset()
    previous_handler = None
    if threading.current_thread() is threading.main_thread():
        previous_handler = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield doc
    except Stopped as exc:
        doc.status = Status.FAILED
        doc.error = str(exc)
        doc.labels["ended_by"] = "sigterm"
        raise
    except BaseException as exc:  # noqa: BLE001 - recorded, then re-raised
        doc.status = Status.FAILED
        doc.error = f"{type(exc).__name__}: {exc}"[:4000]
        doc.labels.setdefault("traceback_tail", traceback.format_exc()[-1500:])
        raise
    finally:
        _stop.closing = True
        after = _rusage_snapshot()
        try:
            load_after = host_snapshot()
            own = own_tree_cpu_seconds(before, after, live_before, descendants_cpu_seconds())
            doc.labels.update(host_load_labels(load_before, load_after, own))
        except Exception:  # noqa: BLE001 - the load is context, never a reason to lose the result
            pass
        for scope in ("process", "children"):
            for name, (_, unit, scale) in _RUSAGE_FIELDS.items():
                delta = (after[scope][name] - before[scope][name]) * scale
                if scope == "children" and delta == 0:
                    continue
                doc.add(name, delta, unit, scope=scope, source="getrusage")
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        doc.add("peak_memory", peak_kib * 1024, "bytes", scope="process", device="host")
        for finish in finishers:
            try:
                finish()
            except Exception as exc:  # noqa: BLE001 - a counter must never hide the workload's result
                doc.labels[f"counter_error_{len(doc.labels)}"] = str(exc)[:300]
        doc.add("elapsed_time", process_age(), "s", scope="process_start_to_end", clock="CLOCK_BOOTTIME")
        if versions is not None:
            try:
                doc.environment.versions.update(versions())
            except Exception:  # noqa: BLE001 - versions are informative, never fatal
                pass
        doc.finished_at = datetime.now(UTC)
        if out is not None:
            doc.write(out)
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
