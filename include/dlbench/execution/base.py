"""How a workload is started on a target and how its result document comes back.

An executor takes a :class:`~dlbench.config.Job` and a :class:`Target` and returns the job's
result document, already archived on the controller's disk (``archive_path``) before anyone
loads it. A workload that crashes without writing its document still yields one: status
``failed`` with the tail of its output, so a failure is a row, not a hole.
"""

from __future__ import annotations

import abc
import time
from pathlib import Path

from dlbench.config import Job
from dlbench.execution.targets import Target
from dlbench.workloads import environment
from dlbench.workloads.result import Benchmark, ResultDocument, Status


class ExecutionError(RuntimeError):
    """The workload could not be started or its result could not be fetched."""


class Executor(abc.ABC):
    """Start one job on one target and bring its result document back."""

    @abc.abstractmethod
    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float) -> ResultDocument:
        """Run ``job``, store its document at ``archive_path`` and return it."""


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
    return doc


def finish(job: Job, doc: ResultDocument | None, archive_path: Path, launched: float, *, error: str = "",
           output: str = "") -> ResultDocument:
    """Common end of every executor: fill in a missing document, add the launch-to-end time
    measured from outside the workload (includes interpreter or container start), archive."""
    if doc is None:
        doc = failed_document(job, error or "workload wrote no result document", output)
    elif error and doc.status is Status.OK:
        doc.status, doc.error = Status.FAILED, error
    doc.add("launch_to_end_time", time.monotonic() - launched, "s", scope="executor")
    doc.labels.setdefault("job_label", job.label)
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
