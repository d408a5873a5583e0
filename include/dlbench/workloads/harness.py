"""The frame every workload runs in: one result document out, whatever happens inside.

The harness owns what all workloads share: collecting the environment, the container-effect
counters taken around the workload (study 002: page faults, context switches, CPU time,
block I/O), the elapsed time since process start, and writing the document even when the
workload fails, so that a failure is a row in the warehouse and not a hole.
"""

from __future__ import annotations

import resource
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

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
    import os

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
    the CLI exits non-zero; the document is written either way.
    """
    doc = ResultDocument(
        benchmark=benchmark,
        environment=environment.collect(platform),
        run_id=run_id,
        repetition=repetition,
        labels=labels or {},
        **({"job_id": job_id} if job_id else {}),
    )
    before = _rusage_snapshot()
    finishers = [hook(doc) for hook in _counter_hooks]
    try:
        yield doc
    except BaseException as exc:  # noqa: BLE001 - recorded, then re-raised
        doc.status = Status.FAILED
        doc.error = f"{type(exc).__name__}: {exc}"[:4000]
        doc.labels.setdefault("traceback_tail", traceback.format_exc()[-1500:])
        raise
    finally:
        after = _rusage_snapshot()
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
