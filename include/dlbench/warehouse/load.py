"""Idempotent, transactional loads of result documents.

The natural key of a document is its ``job_id``: loading it again updates the execution in
place and replaces its samples, so a retried task, a re-run ``load`` or a full archive reload
leaves exactly the same rows. A batch is one transaction: all documents or none.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Engine, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from dlbench import storage
from dlbench.suites import SUITES
from dlbench.warehouse.archive import archive_files, read_run_info, run_documents, run_info
from dlbench.warehouse.models import Benchmark, Environment, Execution, Run, Sample
from dlbench.workloads.profiles.enums import Framework
from dlbench.workloads.result import ResultDocument

T = TypeVar("T")


@dataclass
class RunInfo:
    """What the controller knows about a run that the documents do not carry."""

    run_id: str
    dag_id: str | None = None
    profile: str | None = None
    provider: str | None = None
    scheduled: bool = False
    started_at: datetime | None = None
    config: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, Any] | None = None

    @classmethod
    def from_archive(cls, info: dict[str, Any]) -> RunInfo:
        """From an archived ``run.info.json`` (see :mod:`dlbench.warehouse.archive`)."""
        return cls(run_id=str(info["run_id"]), dag_id=info.get("dag_id"), profile=info.get("profile"),
                   provider=info.get("provider"), scheduled=bool(info.get("scheduled", False)),
                   config=dict(info.get("request") or {}), tags=info.get("tags"))


@dataclass
class LoadSummary:
    documents: int = 0
    executions_created: int = 0
    executions_updated: int = 0
    samples: int = 0
    runs: set[str] = field(default_factory=set)

    def add(self, part: LoadSummary) -> None:
        """Count another load (one run of a reload) into this one."""
        self.documents += part.documents
        self.executions_created += part.executions_created
        self.executions_updated += part.executions_updated
        self.samples += part.samples
        self.runs |= part.runs

    def __str__(self) -> str:
        return (f"{self.documents} documents ({self.executions_created} new, {self.executions_updated} reloaded), "
                f"{self.samples} samples, runs {sorted(self.runs)}")


def canonical_hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


SCHEDULED_PREFIX = "scheduled__"
"""Airflow names the runs its scheduler creates ``scheduled__<logical date>``."""


def is_scheduled_run_id(run_id: str) -> bool:
    """Whether a run id is a scheduler-created run (the weekly trend), from its name alone.

    Used when a run is first seen without :class:`RunInfo` (e.g. an archive reloaded into an
    empty warehouse), so the trend survives a rebuild.
    """
    return run_id.startswith(SCHEDULED_PREFIX)


def _get_or_insert(session: Session, model: type[T], where: ColumnElement[bool], make: Callable[[], T]) -> T:
    """The row matching ``where``, inserted by ``make`` if absent.

    Another transaction may insert the same natural key at the same time (two loads of one run
    on PostgreSQL); the unique constraint then fails our insert inside a savepoint, and we read
    the winner's row instead of failing the whole batch.
    """
    found = session.scalar(select(model).where(where))
    if found is not None:
        return found
    try:
        with session.begin_nested():
            found = make()
            session.add(found)
        return found
    except IntegrityError:
        found = session.scalar(select(model).where(where))
        if found is None:
            raise
        return found


def _get_or_create_run(session: Session, run_id: str, info: RunInfo | None, doc: ResultDocument) -> Run:
    run = _get_or_insert(session, Run, Run.run_id == run_id, lambda: Run(
        run_id=run_id, loaded_at=datetime.now(UTC), config={}, scheduled=is_scheduled_run_id(run_id)))
    if info is not None and info.run_id == run_id:
        run.dag_id, run.profile, run.provider = info.dag_id, info.profile, info.provider
        run.scheduled, run.config = info.scheduled, info.config
        run.tags = info.tags if info.tags is not None else run.tags
        run.started_at = info.started_at or run.started_at
    if run.profile is None:
        run.profile = str(doc.benchmark.parameters.get("profile")) if "profile" in doc.benchmark.parameters else None
    first = doc.started_at
    if run.started_at is None or (first is not None and _aware(first) < _aware(run.started_at)):
        run.started_at = first
    run.loaded_at = datetime.now(UTC)
    return run


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _environment(session: Session, doc: ResultDocument, platform: str) -> Environment:
    env = doc.environment
    details = env.model_dump(mode="json")
    fingerprint = canonical_hash({"platform": platform, **details})
    gpus = env.gpus
    return _get_or_insert(session, Environment, Environment.fingerprint == fingerprint, lambda: Environment(
        fingerprint=fingerprint, platform=platform, hostname=env.hostname, cpu_model=env.cpu_model,
        cpu_count=env.cpu_count, memory_bytes=env.memory_bytes,
        gpu_model=gpus[0].name if gpus else None, gpu_count=len(gpus),
        gpu_driver=env.versions.get("nvidia_driver") or (gpus[0].driver if gpus else None),
        tensorflow_version=env.versions.get("tensorflow"),
        cuda_version=env.versions.get("cuda"), in_container=env.container.inside,
        container_runtime=env.container.runtime, cpu_limit_cores=env.container.cpu_limit_cores,
        memory_limit_bytes=env.container.memory_limit_bytes, details=details,
    ))


FRAMEWORK_SUITES: dict[str, Framework] = {
    suite.value: spec.document_framework for suite, spec in SUITES.items() if spec.document_framework is not None}
"""The suites whose documents name the framework they trained with (a ``framework`` parameter),
with the framework a document without one trained with (each suite's
:attr:`~dlbench.suites.spec.SuiteSpec.document_framework`): every tf_cnn document written before
frameworks existed, and every TensorFlow one since (``workloads/cnn/main.py`` records the parameter only
for the others, so a TensorFlow case keeps its identity); Fathom is TensorFlow's; the transformer's
jobs name theirs (PyTorch). Migration 0005 backfilled tf_cnn with this rule (the other two suites
came after it, with the column)."""


def benchmark_framework(suite: str, parameters: dict[str, Any] | None) -> str | None:
    """``benchmarks.framework``: the case's ``framework`` parameter, else its suite's default;
    None for a suite with no selectable framework (a micro-benchmark has no framework dimension,
    and "tensorflow" there would be a claim nobody made). Lower case, the :class:`Framework`
    values, so one spelling answers ``WHERE framework = 'pytorch'``."""
    default = FRAMEWORK_SUITES.get(suite)
    if default is None:
        return None
    return str((parameters or {}).get("framework") or default.value).lower()


def _benchmark(session: Session, doc: ResultDocument) -> Benchmark:
    bench = doc.benchmark
    digest = canonical_hash(bench.parameters)
    framework = benchmark_framework(bench.suite, bench.parameters)
    where = (Benchmark.suite == bench.suite) & (Benchmark.name == bench.name) & (Benchmark.parameters_hash == digest)
    row = _get_or_insert(session, Benchmark, where, lambda: Benchmark(
        suite=bench.suite, name=bench.name, parameters_hash=digest, parameters=bench.parameters, framework=framework))
    row.framework = framework  # a row written by another writer without it is completed by any load
    return row


def platform_of(doc: ResultDocument) -> str:
    return doc.environment.platform.value if doc.environment.platform else "unknown"


def load_document(session: Session, doc: ResultDocument, *, archive_path: str | None = None,
                  run: RunInfo | None = None, summary: LoadSummary | None = None) -> Execution:
    """Upsert one document (by job_id) inside the caller's transaction."""
    summary = summary if summary is not None else LoadSummary()
    platform = platform_of(doc)
    run_row = _get_or_create_run(session, doc.run_id, run, doc)
    environment = _environment(session, doc, platform)
    benchmark = _benchmark(session, doc)
    session.flush()
    execution = session.scalar(select(Execution).where(Execution.job_id == doc.job_id))
    if execution is None:
        execution = Execution(job_id=doc.job_id)
        summary.executions_created += 1
    else:
        session.execute(delete(Sample).where(Sample.execution_id == execution.id))
        summary.executions_updated += 1
    execution.run = run_row
    execution.environment = environment
    execution.benchmark = benchmark
    execution.platform = platform
    execution.repetition = doc.repetition
    execution.status = doc.status.value
    execution.error = doc.error
    execution.started_at = doc.started_at
    execution.finished_at = doc.finished_at
    execution.archive_path = archive_path
    execution.labels = doc.labels
    session.add(execution)
    session.flush()
    session.add_all(
        Sample(execution_id=execution.id, ordinal=i, metric=s.metric, value=s.value, unit=s.unit, labels=s.labels)
        for i, s in enumerate(doc.samples)
    )
    summary.documents += 1
    summary.samples += len(doc.samples)
    summary.runs.add(doc.run_id)
    return execution


def load_documents(engine: Engine, documents: Iterable[ResultDocument | str | os.PathLike[str]],
                   run: RunInfo | None = None) -> LoadSummary:
    """Load documents (objects or archived JSON paths) in one transaction."""
    summary = LoadSummary()
    with Session(engine) as session, session.begin():
        for item in documents:
            if isinstance(item, ResultDocument):
                doc, path = item, None
            else:
                path = str(Path(item).resolve())
                doc = ResultDocument.read(path)
            load_document(session, doc, archive_path=path, run=run, summary=summary)
    return summary


def reload_archive(engine: Engine, path: str | os.PathLike[str] | None = None) -> LoadSummary:
    """Rebuild the warehouse rows from the raw archive (default: all of it), one transaction per run.

    Each run's ``run.info.json`` restores its row (DAG, provider, profile, request, tags); a run
    archived without one keeps what an earlier load recorded. Used after a migration or to fill a
    new (PostgreSQL) warehouse. Without ``path`` the archive is the shared store's
    (``DLBENCH_STORAGE_URL``: an object store in a multi-worker deployment, docs/storage.md); a
    ``path`` is a local copy (one file, one run's directory or a whole tree).
    """
    if path is None:
        return _reload_store(engine)
    files = archive_files(path)
    summary = LoadSummary()
    for run_dir in sorted({f.parent for f in files}):
        info = read_run_info(run_dir)
        part = load_documents(engine, [f for f in files if f.parent == run_dir],
                              run=RunInfo.from_archive(info) if info else None)
        summary.add(part)
    return summary


def _reload_store(engine: Engine) -> LoadSummary:
    """Every run of the shared store's archive (``results/<run>/``), one transaction per run."""
    runs = storage.store().children("results")
    if not runs:
        raise FileNotFoundError(f"no result archive at {storage.store().url_of('results')}")
    summary = LoadSummary()
    for run_id in runs:
        info = run_info(run_id)
        part = load_documents(engine, run_documents(run_id), run=RunInfo.from_archive(info) if info else None)
        summary.add(part)
    return summary
