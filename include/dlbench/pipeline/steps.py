"""The steps of a benchmark run, as plain functions over JSON-able values.

The main DAG calls exactly these, one per task, so everything a DAG does can be tested
without Airflow, and XCom only ever carries small JSON (no secrets, no documents).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dlbench import paths, reports, storage
from dlbench.errors import ConfigError, JobFailed, JobSkipped, MachineBusy, ScenarioSkipped
from dlbench.execution import executors
from dlbench.execution.base import failed_document
from dlbench.execution.machine_lock import claim_machines, holder_text
from dlbench.execution.placement import cell_targets, network_endpoint, pick_target, serving_client
from dlbench.execution.targets import HOST_LABEL, Target
from dlbench.jobs import Job
from dlbench.pipeline.aggregate import is_role_document
from dlbench.pipeline.progress import job_progress
from dlbench.pipeline.scenarios import run_scenario
from dlbench.profiles import get_profile, parse_user_profiles
from dlbench.providers.base import Tags
from dlbench.providers.datasets import ensure_dataset
from dlbench.providers.registry import backend_for, backend_for_request
from dlbench.providers.run_secrets import materialized
from dlbench.request import BenchmarkRequest, parse_request, plan_jobs
from dlbench.settings import DEFAULT_EXPIRY, SCHEDULED_REQUEST
from dlbench.warehouse import archive as warehouse_archive
from dlbench.workloads.profiles import ProfileError, Scenario, job_timeout, register_profile
from dlbench.workloads.result import Environment, ResultDocument, Status

log = logging.getLogger(__name__)





SCHEDULED_REQUEST_VARIABLE = SCHEDULED_REQUEST.name
"""Airflow Variable holding the JSON request that scheduled runs benchmark (validated like the form)."""


def safe_run_id(run_id: str) -> str:
    """Airflow run ids contain ':' and '+'; ours go into file and resource names."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", run_id).strip("-")[:80] or "run"


def request_params(form: dict[str, Any], *, scheduled: bool, scheduled_request: str | None) -> dict[str, Any]:
    """What a run benchmarks: the trigger form, or for a scheduled run the request stored in the
    Variable :data:`SCHEDULED_REQUEST_VARIABLE`. A scheduled run without it fails: benchmarking the
    Airflow worker with the form's defaults every week would be silent and wrong."""
    if not scheduled:
        return dict(form)
    if not scheduled_request or not scheduled_request.strip():
        raise ConfigError(f"invalid benchmark request: scheduled runs take their request from the Airflow Variable "
                          f"{SCHEDULED_REQUEST_VARIABLE} (JSON, the trigger form's fields), which is not set; "
                          "set it (docs/scheduling.md) or pause the schedule")
    try:
        data = json.loads(scheduled_request)
    except ValueError as exc:
        raise ConfigError(f"invalid benchmark request: Variable {SCHEDULED_REQUEST_VARIABLE} is not JSON: "
                          f"{exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"invalid benchmark request: Variable {SCHEDULED_REQUEST_VARIABLE} must hold a JSON object")
    return data


def validate(params: dict[str, Any], max_jobs: int | None = None, user_profiles: str | None = None) -> dict[str, Any]:
    """Validate the request before anything is provisioned (ConfigError names the field); the
    provider's preflight checks its cloud (names, credentials, capacity) too. ``max_jobs`` is
    Airflow's ``[core] max_map_length``: a matrix larger than that would fail only at mapping time.
    ``user_profiles``: the Airflow Variable ``dlbench_profiles`` (YAML/JSON), validated here, so a
    bad profile fails the run naming ``profiles.<name>.<field>``; the request then carries the
    chosen profile's fields (``profile_spec``) to every later task. Nothing is registered here."""
    try:
        request = parse_request(params, user_profiles=parse_user_profiles(user_profiles))
    except ProfileError as exc:
        raise ConfigError(f"invalid benchmark request: {exc}") from None
    if max_jobs is not None:
        count = len(plan_jobs(request, "validate"))
        if count > max_jobs:
            raise ConfigError(f"invalid benchmark request: the request expands to {count} jobs, more than Airflow's "
                              f"[core] max_map_length ({max_jobs}); lower repetitions or choose fewer platforms, "
                              "suites, models or data kinds (or raise max_map_length)")
    for settings in request.providers:  # each provider checks its own cloud, named in the error
        try:
            backend_for(settings).preflight(request.for_provider(settings))
        except ConfigError:
            raise
        except (ValueError, LookupError, RuntimeError) as exc:
            raise ConfigError(f"invalid benchmark request: {settings.name}: {exc}") from None
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
    """How long the run's resources may live: the provider settings' ``expiry_hours`` when set,
    else the deployment default (Airflow Variable ``dlbench_expiry_hours``)."""
    set_hours = [p.expiry_hours for p in request_from(request).providers if p.expiry_hours is not None]
    return timedelta(hours=max(set_hours) if set_hours else default_hours)


def tags_from(data: dict[str, Any]) -> Tags:
    tags = Tags.from_dict(data)
    if tags is None:
        raise ValueError("not a dlbench tag set")
    return tags


def archive_run(run_id: str, request: dict[str, Any], dag_id: str, tags: dict[str, Any],
                scheduled: bool = False) -> None:
    """Archive what describes the run (request, DAG, provider, tags: no secrets) beside its
    documents before any job runs, so a warehouse rebuilt from the archive alone is complete."""
    req = request_from(request)
    warehouse_archive.write_run_info(safe_run_id(run_id), {
        "dag_id": dag_id, "dag_run_id": run_id, "provider": req.provider_names, "profile": req.profile,
        "scheduled": scheduled, "request": request, "tags": tags})


def provision(request: dict[str, Any], tags: dict[str, Any], budget_s: float | None = None) -> list[dict[str, Any]]:
    """Setup: targets for every platform within ``budget_s`` (the task's execution_timeout). The
    backend undoes its own partial work on failure, timeouts and kills included."""
    req = request_from(request)
    targets = backend_for_request(req).acquire(req, tags_from(tags), budget_s)
    for target in targets:
        if target.skip_reason:
            log.warning("%s: %s", target.platform.value, target.skip_reason)
    return [t.to_xcom() for t in targets]


def release(request: dict[str, Any], tags: dict[str, Any], targets: list[dict[str, Any]] | None) -> None:
    """Teardown: release whatever the run holds, found by tag (works when targets is empty and
    on any worker: everything comes from the request and the tags)."""
    req = request_from(request)
    backend_for_request(req).release(req, tags_from(tags), [Target.from_xcom(t) for t in targets or []])


def job_timeout_for(job: Job, timeout: float | None = None, max_timeout: float | None = None) -> float:
    """The job's timeout: ``timeout`` when given, else the one planned from its profile (sum of its
    planned work at conservative rates, with a margin; ``Job.timeout_s``), capped at ``max_timeout``
    (what the Airflow task's own execution_timeout leaves). Logged with its basis."""
    if timeout is not None:
        seconds, basis = float(timeout), "given by the caller"
    else:
        try:
            planned, basis = job_timeout(get_profile(job.profile), job.suite, job.args, job.scenario.value)
        except ValueError:  # planned elsewhere with a profile this process does not know: keep the plan's
            if job.timeout_s is None:
                raise
            planned, basis = job.timeout_s, f"planned from profile {job.profile}"
        seconds = float(job.timeout_s or planned)
    if max_timeout is not None and seconds > max_timeout:
        log.warning("%s: timeout %.0f s capped at %.0f s (the task's execution_timeout)", job.label, seconds,
                    max_timeout)
        seconds, basis = float(max_timeout), f"capped by the task's execution_timeout; planned: {basis}"
    log.info("%s: timeout %.0f s (%s)", job.label, seconds, basis)
    return seconds


def run_job(job: dict[str, Any], targets: list[dict[str, Any]], timeout: float | None = None,
            request: dict[str, Any] | None = None, tags: dict[str, Any] | None = None,
            max_timeout: float | None = None) -> dict[str, Any]:
    """Run one job and archive its document. Raises JobFailed / JobSkipped after archiving, so
    Airflow shows the state while the document still reaches the warehouse. With the run's
    request (it pins the profile: a user profile resolves here) and tags, the job holds the
    run's lease while it runs (the run is alive). The timeout is :func:`job_timeout_for`'s."""
    req = request_from(request) if request is not None else None
    if req is not None:
        # The one place a run's pinned profile is registered: while this worker runs the job, the
        # profile's name resolves to what was validated (the workload's argv, a scenario's specs,
        # the timeout), even a user profile whose file or Variable this worker does not have.
        register_profile(req.resolved_profile)
    the_job = Job.model_validate(job)
    seconds = job_timeout_for(the_job, timeout, max_timeout)
    with job_progress(the_job.label, seconds, _position(req, the_job)):
        # The run's key (a run secret) and pinned host keys as private files for this task only.
        with materialized(targets) as local_targets:
            if req is not None and tags is not None:
                with backend_for_request(req).keep_alive(tags_from(tags)):
                    return _run_job(job, local_targets, seconds)
            return _run_job(job, local_targets, seconds)


def _position(request: BenchmarkRequest | None, job: Job) -> str:
    """``k/N``: the job's place in the run's plan (its index in the planned jobs + 1),
    or "" outside Airflow or without the request."""
    try:
        from airflow.sdk import get_current_context  # optional: absent outside Airflow (the CLI, tests)

        get_current_context()
        planned = [j.job_id for j in plan_jobs(request, job.run_id)] if request is not None else []
    except Exception:  # noqa: BLE001 - progress is informative: never a reason to fail a job
        return ""
    # The job's place in the whole plan, not its map index: with routes (several job tasks) each
    # task's indexes start at 0.
    return f"{planned.index(job.job_id) + 1}/{len(planned)}" if job.job_id in planned else ""


def _run_job(job: dict[str, Any], targets: list[dict[str, Any]], timeout: float) -> dict[str, Any]:
    the_job = Job.model_validate(job)
    all_targets = [Target.from_xcom(t) for t in targets]
    target = pick_target(the_job, all_targets)
    archive = archive_path(the_job.run_id, the_job.job_id)
    staged: list[Path] = [archive]
    try:
        return _run_staged(the_job, target, all_targets, archive, timeout, staged)
    finally:
        _publish(the_job.run_id, staged)


def _publish(run_id: str, staged: list[Path]) -> None:
    """The job's documents (its own, a scenario's roles) from this worker's staging to the store."""
    for path in dict.fromkeys(staged):
        if path.exists():
            warehouse_archive.publish(run_id, path)


def _run_staged(the_job: Job, target: Target, all_targets: list[Target], archive: Path, timeout: float,
                staged: list[Path]) -> dict[str, Any]:
    try:
        if the_job.scenario is Scenario.SINGLE and target.skip_reason_for(the_job.args):
            raise JobSkipped(str(target.skip_reason_for(the_job.args)))
        # The cell's machines are claimed before anything starts (docs/scaling.md): another job
        # on them, from this run or any other, would be measured with this one. Waiting for
        # them is not part of any measurement; it is bounded by the job's own timeout.
        try:
            with claim_machines(cell_targets(the_job, target, all_targets),
                                holder_text(the_job.run_id, the_job.label), wait_s=timeout) as waited:
                if the_job.scenario is not Scenario.SINGLE:
                    return _run_scenario(the_job, all_targets, archive, timeout, staged)
                with network_endpoint(the_job, target, all_targets) as (peer, path), \
                        serving_client(the_job, target, all_targets) as client:
                    if peer is not None:
                        the_job = the_job.model_copy(update={"args": {**the_job.args, "server": peer}})
                    if client is None:
                        doc = executors.executor_for(target).execute(the_job, target, archive, timeout)
                    else:  # the server on the target, the load generator on another instance
                        driven = the_job.model_copy(update={"args": {**the_job.args, **client.args}})
                        doc = executors.executor_for(client.target).execute(driven, client.target, archive, timeout)
                        # The document describes the machine measured (the server's), and names the client's.
                        doc.labels["load_client"] = client.label
                        doc.labels["load_client_host"] = doc.environment.hostname
                        doc.environment = Environment.model_validate_json(client.environment).model_copy(
                            update={"platform": doc.environment.platform})
                        if doc.status is Status.FAILED:  # the server's own account, from its machine
                            doc.error = f"{doc.error}; the server on {target.name} printed:\n{client.server_output()}"
        except MachineBusy as busy:  # raised only while claiming: nothing of the job ran
            doc = failed_document(the_job, str(busy))
            doc.write(archive)
            return _conclude(doc, the_job, archive, target.name)
        doc.labels["machine_wait_s"] = f"{waited:.0f}"
        if path:
            doc.labels["network_path"] = path
        doc.labels.setdefault("target", target.name)
        for key in ("provider", "prepared", "emulated", "accel", "flavor", "image", "placement", HOST_LABEL):
            if key in target.labels:
                doc.labels.setdefault(key, target.labels[key])
        doc.write(archive)
    except JobSkipped as skip:
        skipped = failed_document(the_job, str(skip))
        skipped.status = Status.SKIPPED
        skipped.write(archive)  # the skip is a row in the warehouse, with its reason
        raise
    return _conclude(doc, the_job, archive, target.name)


def _conclude(doc: ResultDocument, the_job: Job, archive: Path, where: str) -> dict[str, Any]:
    summary = summarize(doc, the_job, archive)
    log.info("%s on %s: %s", the_job.label, where, summary["headline"])
    if doc.status is Status.SKIPPED:
        raise JobSkipped(f"{the_job.label}: {doc.error}")
    if doc.status is not Status.OK:
        raise JobFailed(f"{the_job.label} failed: {doc.error}")
    return summary


def _run_scenario(job: Job, targets: list[Target], archive: Path, timeout: float,
                  staged: list[Path] | None = None) -> dict[str, Any]:
    """A distributed or shared cell: its roles run together; the cell's document aggregates them."""
    def role_path(j: Job) -> Path:
        path = archive_path(j.run_id, j.job_id)
        if staged is not None:
            staged.append(path)
        return path

    try:
        doc = run_scenario(job, targets, timeout, role_path)
    except ScenarioSkipped as exc:
        raise JobSkipped(str(exc)) from None
    return _conclude(doc, job, archive, targets[0].name if len(targets) == 1 else doc.labels.get("placement", ""))


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
    return warehouse_archive.archive_path(run_id, job_id)


def outcome(run_id: str, expected_jobs: int) -> dict[str, Any]:
    """Count the archived documents of a run by status; used to fail the run visibly."""
    counts = {s.value: 0 for s in Status}
    problems = []
    for item in warehouse_archive.run_documents(safe_run_id(run_id)):
        doc = item if isinstance(item, ResultDocument) else ResultDocument.read(item)
        if doc.benchmark.suite == "provisioning" or is_role_document(doc.labels):
            continue  # per-node provisioning timings and a scenario's roles: not cells of the matrix
        counts[doc.status.value] += 1
        if doc.status is Status.FAILED:
            problems.append(f"{doc.labels.get('job_label', doc.job_id)}: {doc.error}")
    counts["missing"] = max(0, expected_jobs - sum(counts.values()))
    return {"counts": counts, "failures": problems}


__all__ = [
    "ConfigError", "JobFailed", "JobSkipped", "archive_path", "ensure_dataset", "outcome", "plan",
    "provision", "release", "request_params", "run_job", "safe_run_id", "tags_for", "validate",
]


def describe_outcome(outcome: dict[str, Any], *, report_missing: bool = False) -> str:
    """One readable line for a run whose jobs did not all succeed: counts, then the first failures."""
    counts = outcome["counts"]
    planned = sum(counts.values())
    parts = [f"benchmark run incomplete: {counts['failed']} of {planned} jobs failed, {counts['missing']} missing, "
             f"{counts['skipped']} skipped, {counts['ok']} ok"]
    if outcome["failures"]:
        parts.append("first failure: " + outcome["failures"][0])
    if report_missing:
        parts.append("the report was not produced (see the load and report tasks)")
    return "; ".join(parts)


def load_run(run_id: str, request: dict[str, Any], dag_id: str, url: str | None) -> dict[str, Any]:
    """Load every archived document of the run into the warehouse (idempotent)."""
    from dlbench.warehouse import db, load  # heavy: SQLAlchemy (and Alembic), only for the load task

    safe = safe_run_id(run_id)
    engine = db.engine_for(url)
    db.upgrade(engine)
    documents = warehouse_archive.run_documents(safe)  # from the shared store: any worker's documents
    archived = warehouse_archive.run_info(safe)
    if archived:
        info = load.RunInfo.from_archive(archived)
    else:
        req = request_from(request)
        info = load.RunInfo(run_id=safe, dag_id=dag_id, profile=req.profile, provider=req.provider_names,
                            scheduled=load.is_scheduled_run_id(run_id), config=request)
    summary = load.load_documents(engine, documents, run=info)
    log.info("loaded %d samples (%s) of run %s into %s", summary.samples, summary, safe, db.describe_url(url))
    return {"run_id": safe, "documents": len(documents)}


def run_in_warehouse(run_id: str, url: str | None) -> bool:
    """Whether the warehouse holds the run. A run whose provisioning failed ran no job, so its load
    found no document and wrote no row: its report has nothing to show, and the report step skips
    naming the failure that left it empty (as it does after a failed validation or load) instead
    of failing with the symptom (``run_id ... is not in the warehouse``)."""
    from dlbench.reports.analysis.run_data import resolve_run  # heavy: pandas and SQLAlchemy, only for the report task
    from dlbench.warehouse import db  # heavy: SQLAlchemy (as above)

    try:
        resolve_run(db.engine_for(url), safe_run_id(run_id))
    except LookupError:
        return False
    return True


def report_run(run_id: str, url: str | None) -> dict[str, str]:
    """Regenerate the run's report from the warehouse: HTML path and the text table."""
    from dlbench.warehouse import db  # heavy: SQLAlchemy, only for the report task

    safe = safe_run_id(run_id)
    engine = db.engine_for(url)
    staged = paths.reports_dir() / safe
    html = reports.build_report(engine, safe, staged)  # staged here, then into the store
    store = storage.store()
    store.upload_dir(html.parent, f"reports/{safe}")
    if not store.holds_in_place(f"reports/{safe}", staged):  # the store is elsewhere: no copy stays here
        shutil.rmtree(staged, ignore_errors=True)
    return {"html": store.url_of(f"reports/{safe}/{html.name}"), "table": reports.text_table(engine, safe)}


def compare_run(run_id: str, url: str | None, *, baseline_run: str | None = None,
                window: int | None = None) -> dict[str, Any]:
    """This run's cases against their history (dlbench.reports.analysis.regression, docs/regressions.md):
    the regressions as JSON-able dicts and as text, also written to the run's report directory
    (``regressions.json``)."""
    from dlbench.reports.analysis import regression  # heavy: pandas and SQLAlchemy, only for the regressions task
    from dlbench.warehouse import db  # heavy: SQLAlchemy (as above)

    safe = safe_run_id(run_id)
    engine = db.engine_for(url)
    found = regression.detect(engine, safe, baseline_run=baseline_run or None,
                              **({"window": window} if window else {}))
    items = [r.as_dict() for r in found]
    text = "\n".join(str(r) for r in found) or "no regression"
    storage.store().write_text(f"reports/{safe}/regressions.json", json.dumps(
        {"run_id": safe, "baseline_run": baseline_run, "regressions": items}, indent=2))
    log.info("regressions of run %s: %s", safe, text)
    return {"run_id": safe, "count": len(found), "regressions": items, "text": text}
