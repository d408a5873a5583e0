"""How a workload is started on a target and how its result document comes back.

An executor takes a :class:`~dlbench.jobs.Job` and a :class:`Target` and returns the job's
result document, already archived on the controller's disk (``archive_path``) before anyone
loads it. A workload that crashes without writing its document still yields one: status
``failed`` with the tail of its output, so a failure is a row, not a hole.

A job may also be *stopped* from outside (``stop``, a :class:`threading.Event`): a group of jobs
that run together (a parameter server that never ends by itself, the other roles of a group
whose one role failed) is ended by its runner, not by a timeout. :func:`on_stop` is the one
mechanism: a watcher thread that runs the executor's stop action (SIGTERM, ``grace`` seconds,
SIGKILL) once when the event is set, and ends with the body. The workload writes its document
on SIGTERM when it can; the executor then fetches it as usual, and the document says
``labels["stopped_by_executor"] == "true"`` either way.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dlbench.execution.targets import Target
from dlbench.jobs import Job
from dlbench.workloads import environment
from dlbench.workloads.result import Benchmark, ResultDocument, Status

log = logging.getLogger(__name__)

DEFAULT_GRACE_S = 10.0
"""Seconds between the SIGTERM of a stop (or a timeout) and the SIGKILL: time for the workload
to write its result document."""
STOPPED = "stopped by the executor"
"""The error of a stopped job whose workload wrote no document."""
STOPPED_LABEL = "stopped_by_executor"

TIMED_OUT = "workload timed out after"
"""Head of every executor's timeout error (:func:`timed_out`); :func:`finish` recognises it."""


def timed_out(timeout: float, detail: str = "") -> str:
    """The error of a job its executor ended at ``timeout``: one wording for every executor."""
    return f"{TIMED_OUT} {timeout:.0f} s" + (f" ({detail})" if detail else "")



class Executor(abc.ABC):
    """Start one job on one target and bring its result document back."""

    @abc.abstractmethod
    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float, *,
                stop: threading.Event | None = None) -> ResultDocument:
        """Run ``job``, store its document at ``archive_path`` and return it.

        ``stop``: when set while the workload runs, the workload gets SIGTERM, ``grace`` seconds
        to write its document, then SIGKILL; ``execute`` then returns normally with the
        document (or a failed one saying :data:`STOPPED`), labelled ``stopped_by_executor``.
        """


@dataclass
class StopWatch:
    """What one :func:`on_stop` block saw: whether its stop action ran (``fired``), what it
    raised (``error``), and ``ended``, set when the body has left the block, so an action can
    wait for the workload's end (``ended.wait(grace)``) before it escalates to SIGKILL."""

    fired: bool = False
    error: str = ""
    ended: threading.Event = field(default_factory=threading.Event)


@contextlib.contextmanager
def on_stop(stop: threading.Event | None, action: Callable[[StopWatch], None], *, poll: float = 0.05,
            name: str = "dlbench-stop") -> Iterator[StopWatch]:
    """Run ``action`` once, from a watcher thread, if ``stop`` is set while the body runs.

    Why a thread: the body blocks on the workload (a process wait, ``docker wait``, an SSH
    channel), so nothing in it could notice the event. The watcher ends with the body; leaving
    the block waits for an action in progress (it is what made the body end), so no signal is
    sent after ``execute`` returned. An action that raises is logged and recorded in
    ``error``: the body still ends by its own timeout.
    """
    watch = StopWatch()
    if stop is None:
        try:
            yield watch
        finally:
            watch.ended.set()
        return

    def watcher() -> None:
        while not watch.ended.is_set():
            if stop.wait(poll):
                if watch.ended.is_set():
                    return
                watch.fired = True
                try:
                    action(watch)
                except Exception as exc:  # noqa: BLE001 - reported in the document; the timeout still holds
                    watch.error = f"{type(exc).__name__}: {exc}"
                    log.warning("stop action of %s failed: %s", name, watch.error)
                return

    thread = threading.Thread(target=watcher, name=name, daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        watch.ended.set()
        thread.join()


def terminate_then_kill(terminate: Callable[[], object], kill: Callable[[], object], ended: threading.Event,
                        grace: float) -> bool:
    """SIGTERM (``terminate``), up to ``grace`` seconds for the body to end, then SIGKILL
    (``kill``). True when the workload ended within the grace."""
    terminate()
    if ended.wait(grace):
        return True
    kill()
    return False


def failed_document(job: Job, error: str, output_tail: str = "") -> ResultDocument:
    """The document of a job whose workload never wrote one."""
    doc = ResultDocument(
        job_id=job.job_id,
        run_id=job.run_id,
        repetition=job.repetition,
        benchmark=Benchmark(suite=job.suite, name=str(job.args.get("model", job.command)), parameters=dict(job.args)),
        environment=environment.collect(job.platform),
        status=Status.FAILED,
        error=error[:4000],
    )
    if output_tail:
        doc.labels["output_tail"] = output_tail[-1500:]
    label_machine(doc, job)
    return doc


MACHINE_LABEL = "machine"
"""A fleet survey's machine index (``every_machine``): which of its platform's machines ran the job."""


def label_machine(doc: ResultDocument, job: Job) -> None:
    """Record the job's machine index (fleet survey) so the warehouse and the report tell nodes
    apart; the case stays the same (the machines' results are samples of one case)."""
    if job.machine is not None:
        doc.labels.setdefault(MACHINE_LABEL, str(job.machine))


def finish(job: Job, doc: ResultDocument | None, archive_path: Path, launched: float, *, error: str = "",
           output: str = "", stopped: StopWatch | None = None, ended: float | None = None,
           labels: dict[str, str] | None = None) -> ResultDocument:
    """Common end of every executor: fill in a missing document, add the launch-to-end time
    measured from outside the workload (includes interpreter or container start), archive.

    ``launched`` and ``ended`` are ``time.monotonic()`` readings of the executor, on its own side:
    ``launched`` just before the workload was started, ``ended`` when the executor saw it exit
    (the process wait returned, ``docker wait`` returned). Why ``ended``: what comes after the
    exit (removing the container, fetching the document over SSH, cleaning up) is the executor's
    teardown, not the workload's; counted in ``launch_to_end_time`` it biased the comparison
    against containers and SSH. It is recorded apart as ``teardown_time`` (exit to archived), so
    ``launch_to_end_time + teardown_time`` is the old measure. Without ``ended`` (the workload
    never started, an executor that cannot tell) the launch-to-end time runs to now, and its
    ``end`` label says so. ``labels``: facts of the executor's own (the environment the workload
    ran in: :data:`dlbench.execution.workload_env.LABEL`).

    A stopped job (``stopped.fired``): the workload's own document, when it wrote one on
    SIGTERM, says how it ended, so the executor's error (the non-zero exit a signal causes)
    does not overwrite its status; without a document the failed one says :data:`STOPPED`.
    """
    was_stopped = stopped is not None and stopped.fired
    if was_stopped:
        assert stopped is not None
        detail = "; ".join(x for x in (error, f"stop action failed: {stopped.error}" if stopped.error else "") if x)
        error = f"{STOPPED} ({detail})" if detail else STOPPED
    if doc is None:
        doc = failed_document(job, error or "workload wrote no result document", output)
    elif error and doc.status is Status.OK and not was_stopped:
        doc.status, doc.error = Status.FAILED, error
    elif error.startswith(TIMED_OUT) and not was_stopped and not (doc.error or "").startswith(TIMED_OUT):
        # The executor's timeout SIGTERMs the workload, which then writes a failed document
        # saying it was stopped: the timeout is the cause a user must read first.
        doc.status, doc.error = Status.FAILED, f"{error}; the workload reported: {doc.error}"[:4000]
    if was_stopped:
        doc.labels[STOPPED_LABEL] = "true"
    doc.labels.setdefault("job_label", job.label)
    doc.labels.update(labels or {})
    label_machine(doc, job)
    now = time.monotonic()
    if ended is None:
        # Sample labels stay the same either way (they name a report's case); the document says it.
        doc.labels["launch_to_end"] = "to the archiving of the result (the workload's exit was not seen)"
        doc.add("launch_to_end_time", now - launched, "s", scope="executor", clock="executor_monotonic")
    else:
        ended = min(max(ended, launched), now)
        doc.add("launch_to_end_time", ended - launched, "s", scope="executor", clock="executor_monotonic")
        doc.add("teardown_time", now - ended, "s", scope="executor", clock="executor_monotonic")
    doc.write(archive_path)
    return doc


def read_document(path: Path) -> tuple[ResultDocument | None, str]:
    """The document at ``path``, or ``(None, why)`` when it is missing or unreadable."""
    if not path.exists():
        return None, f"no result document at {path}"
    try:
        return ResultDocument.read(path), ""
    except (ValueError, OSError) as exc:
        return None, f"unreadable result document {path}: {exc}"
