"""Progress of a run: the job tasks' log lines and the ``[k/N]`` lines ``make run`` makes of them.

:func:`job_progress` writes ``job 3/12 started: LABEL`` / ``job running: ...`` / ``job 3/12
finished: ok in 12.3 s: LABEL`` into a job task's log; :class:`Progress` (used by
:mod:`dlbench.pipeline.embedded`) reads them back. Both ends of that one format live here.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from dlbench.errors import JobSkipped

log = logging.getLogger(__name__)

_INTERESTING = re.compile(r"planned \d+ jobs|container platform skipped|failed:|report: ")
_PLANNED = re.compile(r"planned (\d+) jobs")
_STARTED = re.compile(r"^job (?:\d+/\d+ )?started: (.+)$")
_RUNNING = re.compile(r"^job running: (.+)$")
_FINISHED = re.compile(r"^job (?:\d+/\d+ )?finished: (\w+) in ([\d.]+) s: (.+)$")
_HEADLINE = re.compile(r"^(\S+) on .*?: ((?:throughput|elapsed_time)=.*)$")

PROGRESS_INTERVAL_S = 60.0


@contextmanager
def job_progress(label: str, timeout: float, position: str = "", interval: float = PROGRESS_INTERVAL_S
                 ) -> Iterator[None]:
    """Progress in the task log: ``job 3/12 started: LABEL``, ``job running: LABEL: 2m00s of at
    most 60m00s`` every ``interval`` seconds, ``job 3/12 finished: ok in 12.3 s: LABEL`` (or
    skipped/failed; ``3/12`` = ``position``, the job's place in the plan, when known). ``make run``
    turns these into its ``[k/N]`` lines in the order jobs end (:mod:`dlbench.pipeline.embedded`)."""
    started = time.monotonic()
    done = threading.Event()

    def beat() -> None:
        while not done.wait(interval):
            log.info("job running: %s: %s of at most %s", label, clock(time.monotonic() - started), clock(timeout))

    job = f"job {position}" if position else "job"
    log.info("%s started: %s", job, label)
    threading.Thread(target=beat, name="dlbench-progress", daemon=True).start()
    status = "failed"
    try:
        yield
        status = "ok"
    except JobSkipped:
        status = "skipped"
        raise
    finally:
        done.set()
        log.info("%s finished: %s in %.1f s: %s", job, status, time.monotonic() - started, label)




def clock(seconds: float) -> str:
    """``1h02m``, ``4m05s``, ``12s``."""
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """Turns the run_job tasks' log lines (:func:`dlbench.pipeline.progress.job_progress`) into
    ``[k/N] platform/suite/case ... ok 12.3 s (elapsed 1m20s, ~4m left)``, in the order jobs end.

    N comes from the plan task's ``planned N jobs``; the time left is the average time per finished
    job since the first job started (Airflow's own overhead between tasks included) times the jobs
    left. A retried job keeps its number."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.total: int | None = None
        self.first_job: float | None = None
        self.finished: list[str] = []
        self.headlines: dict[str, str] = {}

    def line(self, text: str, now: float) -> str | None:
        """What to print for one (cleaned) log line; None: nothing."""
        if (match := _PLANNED.search(text)) is not None:
            self.total = int(match.group(1))
            return f"  planned {self.total} jobs"
        if _STARTED.match(text):
            self.first_job = self.first_job if self.first_job is not None else now
            return None
        if (match := _RUNNING.match(text)) is not None:
            return f"        ... running {match.group(1)}"
        if (match := _HEADLINE.match(text)) is not None:
            self.headlines[match.group(1)] = match.group(2)
            return None
        if (match := _FINISHED.match(text)) is not None:
            status, seconds, label = match.group(1), float(match.group(2)), match.group(3)
            retry = label in self.finished
            if not retry:
                self.finished.append(label)
            k, total = self.finished.index(label) + 1, self.total
            elapsed = now - self.started
            if total is None:
                left = ""
            elif len(self.finished) >= total:
                left = ", done"
            else:
                since = now - (self.first_job if self.first_job is not None else self.started)
                left = f", ~{clock(since / len(self.finished) * (total - len(self.finished)))} left"
            headline = self.headlines.pop(label, "")
            return (f"[{k}/{total if total is not None else '?'}] {label} ... {'retry: ' if retry else ''}{status} "
                    f"{seconds:.1f} s{f' ({headline})' if headline and status == 'ok' else ''} "
                    f"(elapsed {clock(elapsed)}{left})")
        if _INTERESTING.search(text):
            return f"  {text[:200]}"
        return None
