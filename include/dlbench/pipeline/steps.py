"""The steps of a benchmark run, as plain functions over JSON-able values.

The main DAG calls exactly these, one per task, so everything a DAG does can be tested
without Airflow, and XCom only ever carries small JSON (no secrets, no documents).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dlbench import paths
from dlbench.config import BenchmarkRequest, ConfigError, Job, parse_request, plan_jobs
from dlbench.execution.base import SKIP_REASON, Target
from dlbench.pipeline.providers import backend
from dlbench.provisioning.base import DEFAULT_EXPIRY, Tags
from dlbench.workloads.profiles import DataKind, get_profile
from dlbench.workloads.result import ResultDocument, Status

log = logging.getLogger(__name__)



class JobFailed(RuntimeError):
    """The workload ran and failed; its document (status failed) is archived and will be loaded."""


class JobSkipped(RuntimeError):
    """The job's platform is unavailable here; a skipped document records why."""


def safe_run_id(run_id: str) -> str:
    """Airflow run ids contain ':' and '+'; ours go into file and resource names."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", run_id).strip("-")[:80] or "run"


def validate(params: dict[str, Any]) -> dict[str, Any]:
    """Validate the trigger form before anything is provisioned (ConfigError names the field)."""
    request = parse_request(params)
    if request.provider.value == "ironic":
        # Cloud name, credentials, enough nodes: checked before the setup task provisions anything.
        from dlbench.pipeline import ironic_backend
        from dlbench.provisioning.ironic import ProvisioningError

        try:
            ironic_backend.preflight(request)
        except (ValueError, LookupError, ProvisioningError) as exc:
            raise ConfigError(f"invalid benchmark request: ironic: {exc}") from None
    return request.model_dump(mode="json")


def request_from(data: dict[str, Any]) -> BenchmarkRequest:
    return BenchmarkRequest.model_validate(data)


def plan(request: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    jobs = plan_jobs(request_from(request), safe_run_id(run_id))
    shown = ", ".join(j.label for j in jobs[:12]) + (" ..." if len(jobs) > 12 else "")
    log.info("planned %d jobs: %s", len(jobs), shown)
    return [job.model_dump(mode="json") for job in jobs]


def tags_for(run_id: str, dag_id: str = "", dag_run_id: str = "", expiry: timedelta = DEFAULT_EXPIRY) -> dict[str, str]:
    """The tags (as XCom-able JSON) written on every resource of the run."""
    return Tags(run_id=safe_run_id(run_id), dag_id=dag_id, dag_run_id=dag_run_id or run_id,
                expires_at=datetime.now(UTC) + expiry).as_dict()


def expiry_for(request: dict[str, Any], default_hours: float) -> timedelta:
    """How long the run's resources may live: the ironic section's ``expiry_hours`` when the
    request has one, else the deployment default (Airflow Variable ``dlbench_expiry_hours``)."""
    ironic = request_from(request).ironic
    return timedelta(hours=ironic.expiry_hours if ironic is not None else default_hours)


def tags_from(data: dict[str, Any]) -> Tags:
    tags = Tags.from_dict(data)
    if tags is None:
        raise ValueError("not a dlbench tag set")
    return tags


def ensure_dataset(request: BenchmarkRequest) -> str | None:
    """The real-data directory: the user's (``data_dir``) or a generated ImageNet-format demo set."""
    if DataKind.REAL not in request.data:
        return None
    if request.data_dir:
        return request.data_dir
    profile = get_profile(request.profile)
    size = max(spec.image_size for spec in profile.tf_cnn.values())
    classes = min(spec.num_classes for spec in profile.tf_cnn.values())
    target = paths.datasets_dir() / f"demo-imagenet-{size}px-{classes}c"
    if not (target / ".complete").exists():
        from dlbench.workloads.tf_cnn.data import write_imagenet_tfrecords

        log.info("generating demo ImageNet-format TFRecords in %s", target)
        write_imagenet_tfrecords(target, images=128, shards=4, image_size=size, num_classes=classes)
        (target / ".complete").write_text("ok\n")
    return str(target)


def provision(request: dict[str, Any], tags: dict[str, Any]) -> list[dict[str, Any]]:
    """Setup: targets for every platform. The backend undoes its own partial work on failure."""
    req = request_from(request)
    tag_set = tags_from(tags)
    data_dir = ensure_dataset(req)
    workdir = paths.runs_dir() / tag_set.run_id
    workdir.mkdir(parents=True, exist_ok=True)
    targets = backend(req.provider.value).acquire(req, tag_set, workdir)
    for target in targets:
        if SKIP_REASON in target.extra:
            log.warning("%s: %s", target.platform, target.extra[SKIP_REASON])
    return [dataclasses.asdict(dataclasses.replace(t, data_dir=t.data_dir or data_dir)) for t in targets]


def release(request: dict[str, Any], tags: dict[str, Any], targets: list[dict[str, Any]] | None) -> None:
    """Teardown: release whatever the run holds (finds resources by tag when targets is empty)."""
    req = request_from(request)
    tag_set = tags_from(tags)
    workdir = paths.runs_dir() / tag_set.run_id
    backend(req.provider.value).release([Target(**t) for t in targets or []], tag_set, workdir)
    # Everything the run created locally goes too (keys, scratch): results live in the archive.
    shutil.rmtree(workdir, ignore_errors=True)


def pick_target(job: Job, targets: list[Target]) -> Target:
    candidates = [t for t in targets if t.platform == job.platform.value]
    if not candidates:
        raise ValueError(f"no target provisioned for platform {job.platform.value!r}")
    return candidates[int(job.job_id, 16) % len(candidates)]


def run_job(job: dict[str, Any], targets: list[dict[str, Any]], provider: str, timeout: float = 3600) -> dict[str, Any]:
    """Run one job and archive its document. Raises JobFailed / JobSkipped after archiving, so
    Airflow shows the state while the document still reaches the warehouse."""
    the_job = Job.model_validate(job)
    target = pick_target(the_job, [Target(**t) for t in targets])
    archive = archive_path(the_job.run_id, the_job.job_id)
    try:
        if SKIP_REASON in target.extra:
            raise JobSkipped(target.extra[SKIP_REASON])
        with network_peer(the_job, target) as peer:
            if peer is not None:
                the_job = the_job.model_copy(update={"args": {**the_job.args, "server": peer}})
            doc = backend(provider).executor_for(target).execute(the_job, target, archive, timeout)
    except JobSkipped as skip:
        from dlbench.execution.base import failed_document

        skipped = failed_document(the_job, str(skip))
        skipped.status = Status.SKIPPED
        skipped.write(archive)  # the skip is a row in the warehouse, with its reason
        raise
    summary = summarize(doc, the_job, archive)
    log.info("%s on %s: %s", the_job.label, target.name, summary["headline"])
    if doc.status is Status.SKIPPED:
        raise JobSkipped(f"{the_job.label}: {doc.error}")
    if doc.status is not Status.OK:
        raise JobFailed(f"{the_job.label} failed: {doc.error}")
    return summary


@contextmanager
def network_peer(job: Job, target: Target) -> Iterator[str | None]:
    """For the network suite in a local container: serve the endpoints on the host side of the
    Docker bridge, so the measurement crosses the container's network stack (host <-> container).
    Only addresses in the benchmarking range 198.18.0.0/15 are used (never a real network)."""
    if job.suite != "network" or target.runtime != "docker" or target.address:
        yield target.address if job.suite == "network" and target.address else None
        return
    from dlbench.execution.docker import bridge_gateway
    from dlbench.workloads.micro.network import servers

    gateway = bridge_gateway()
    if ipaddress.ip_address(gateway) not in ipaddress.ip_network("198.18.0.0/15"):
        raise JobSkipped(f"network suite in a container skipped: the Docker bridge is {gateway}, outside the "
                         "benchmarking range 198.18.0.0/15 (start dockerd with --bip=198.18.200.1/24, "
                         "as `make docker-up` does)")
    with servers(gateway) as (host, _port):
        yield host


def summarize(doc: ResultDocument, job: Job, archive: Path) -> dict[str, Any]:
    headline = ""
    for metric in ("throughput", "elapsed_time"):
        try:
            sample = doc.sample(metric)
            headline += f"{metric}={sample.value:.4g} {sample.unit} "
        except KeyError:
            continue
    return {"job_id": job.job_id, "label": job.label, "status": doc.status.value, "archive": str(archive),
            "headline": headline.strip() or doc.status.value}


def archive_path(run_id: str, job_id: str) -> Path:
    """Where a job's raw document is archived (the layout is the warehouse archive's)."""
    from dlbench.warehouse import archive

    return archive.archive_path(run_id, job_id)


def outcome(run_id: str, expected_jobs: int) -> dict[str, Any]:
    """Count the archived documents of a run by status; used to fail the run visibly."""
    counts = {s.value: 0 for s in Status}
    problems = []
    from dlbench.warehouse import archive

    directory = archive.archive_dir(safe_run_id(run_id))
    for path in sorted(directory.glob("*.json")) if directory.exists() else []:
        doc = ResultDocument.read(path)
        if doc.benchmark.suite == "provisioning":
            continue  # per-node provisioning timings, not jobs of the matrix
        counts[doc.status.value] += 1
        if doc.status is Status.FAILED:
            problems.append(f"{doc.labels.get('job_label', doc.job_id)}: {doc.error}")
    counts["missing"] = max(0, expected_jobs - sum(counts.values()))
    return {"counts": counts, "failures": problems}


__all__ = [
    "ConfigError", "JobFailed", "JobSkipped", "archive_path", "ensure_dataset", "outcome", "plan",
    "provision", "release", "run_job", "safe_run_id", "tags_for", "validate",
]


def load_run(run_id: str, request: dict[str, Any], dag_id: str, url: str | None) -> dict[str, Any]:
    """Load every archived document of the run into the warehouse (idempotent)."""
    from dlbench.warehouse import archive, db, load

    safe = safe_run_id(run_id)
    engine = db.engine_for(url)
    db.upgrade(engine)
    directory = archive.archive_dir(safe)
    documents = sorted(directory.glob("*.json")) if directory.exists() else []
    req = request_from(request)
    info = load.RunInfo(run_id=safe, dag_id=dag_id, profile=req.profile, provider=req.provider.value,
                        scheduled=load.is_scheduled_run_id(run_id), config=request)
    summary = load.load_documents(engine, documents, run=info)
    log.info("loaded %d documents of run %s: %s", len(documents), safe, summary)
    return {"run_id": safe, "documents": len(documents)}


def report_run(run_id: str, url: str | None) -> dict[str, str]:
    """Regenerate the run's report from the warehouse: HTML path and the text table."""
    from dlbench.reports import build_report, text_table
    from dlbench.warehouse import db

    safe = safe_run_id(run_id)
    engine = db.engine_for(url)
    html = build_report(engine, safe, paths.reports_dir() / safe)
    return {"html": str(html), "table": text_table(engine, safe)}
