"""The DAG's steps without Airflow, on the local provider's bare-metal target (a real process)."""

from __future__ import annotations

import pytest

from dlbench.pipeline import steps
from dlbench.workloads.result import ResultDocument, Status


def test_run_job_archives_a_document_before_returning():
    request = steps.validate({"platforms": ["bare_metal"], "models": ["alexnet"], "data": ["synthetic"],
                              "repetitions": 1})
    tags = steps.tags_for("manual__2026-11-22T10:00:00+00:00", "dlbench_benchmark")
    jobs = steps.plan(request, "manual__2026-11-22T10:00:00+00:00")
    targets = steps.provision(request, tags)
    assert [t["platform"] for t in targets] == ["bare_metal"]
    summary = steps.run_job(jobs[0], targets)
    doc = ResultDocument.read(summary["archive"])
    assert doc.status is Status.OK and doc.run_id == "manual__2026-11-22T10-00-00-00-00"
    assert doc.sample("launch_to_end_time").value >= doc.sample("elapsed_time").value * 0.5
    assert steps.outcome("manual__2026-11-22T10:00:00+00:00", 1)["counts"] == {
        "ok": 1, "failed": 0, "skipped": 0, "missing": 0}
    steps.release(request, tags, targets)


def test_a_crashing_workload_still_leaves_a_failed_document():
    request = steps.validate({"platforms": ["bare_metal"], "models": ["alexnet"], "data": ["real"],
                              "repetitions": 1, "data_dir": "/nonexistent/imagenet"})
    jobs = steps.plan(request, "crash")
    targets = steps.provision(request, steps.tags_for("crash"))
    with pytest.raises(steps.JobFailed, match="no TFRecord files"):
        steps.run_job(jobs[0], targets)
    outcome = steps.outcome("crash", 1)
    assert outcome["counts"]["failed"] == 1 and "no TFRecord files" in outcome["failures"][0]


def test_unavailable_platform_is_recorded_as_skipped():
    request = steps.validate({"platforms": ["bare_metal"], "models": ["alexnet"], "data": ["synthetic"],
                              "repetitions": 1})
    jobs = steps.plan(request, "skip")
    target = {"name": "x", "platform": "bare_metal", "access": {"kind": "docker", "image": "dlbench-workload:latest"},
              "skip_reason": "container platform skipped: no Docker engine reachable"}
    with pytest.raises(steps.JobSkipped, match="no Docker engine"):
        steps.run_job(jobs[0], [target])
    doc = ResultDocument.read(steps.archive_path("skip", jobs[0]["job_id"]))
    assert doc.status is Status.SKIPPED and "no Docker engine" in doc.error


def test_local_provider_offers_vms_only_when_asked():
    """The local provider offers all four platforms (VMs: QEMU guests, tests/vm), but the default
    request (``make run``) keeps its time budget: no VM rows unless the platforms name them."""
    assert [p for p in steps.validate({"models": ["alexnet"]})["platforms"]] == [
        "bare_metal", "container_on_bare_metal"]
    request = steps.validate({"platforms": ["virtual_machine", "container_on_vm"], "models": ["alexnet"],
                              "local": {"vm": {"vcpus": 1, "accel": "tcg"}}})
    assert request["providers"][0]["vm"]["vcpus"] == 1
    with pytest.raises(steps.ConfigError, match="accel"):
        steps.validate({"platforms": ["virtual_machine"], "local": {"vm": {"accel": "xen"}}})


def test_scheduled_runs_take_their_request_from_the_variable():
    form = {"provider": "local", "platforms": ["bare_metal"]}
    assert steps.request_params(form, scheduled=False, scheduled_request=None) == form
    with pytest.raises(steps.ConfigError, match="dlbench_scheduled_request"):
        steps.request_params(form, scheduled=True, scheduled_request=None)
    with pytest.raises(steps.ConfigError, match="not JSON"):
        steps.request_params(form, scheduled=True, scheduled_request="{provider: ironic")
    stored = ('{"provider": "ironic", "platforms": ["bare_metal"], '
              '"ironic": {"cloud": "prod", "nodes": {"bare_metal": 4}}}')
    params = steps.request_params(form, scheduled=True, scheduled_request=stored)
    assert params["provider"] == "ironic" and params["ironic"]["nodes"] == {"bare_metal": 4}
    from dlbench.request import parse_request

    assert parse_request(params).provider.node_count("bare_metal") == 4  # validated like the form


def test_run_tags_carry_the_expiry_of_the_request():
    from datetime import UTC, datetime, timedelta

    from dlbench.providers.base import Tags

    local = steps.validate({"platforms": ["bare_metal"], "suites": ["cpu"]})
    assert steps.expiry_for(local, 6) == timedelta(hours=6)
    assert steps.expiry_for(local, 2.5) == timedelta(hours=2.5)  # the dlbench_expiry_hours Variable
    ironic = {**local, "providers": [{"name": "ironic", "cloud": "devcloud", "expiry_hours": 1}]}
    assert steps.expiry_for(ironic, 6) == timedelta(hours=1)  # the provider's settings win
    tags = Tags.from_dict(steps.tags_for("r", expiry=steps.expiry_for(ironic, 6)))
    assert timedelta(minutes=59) < tags.expires_at - datetime.now(UTC) <= timedelta(hours=1)


def test_workloads_do_not_inherit_the_workers_secrets(monkeypatch, tmp_path):
    """A local workload sees locale/paths/TF knobs, never AIRFLOW_CONN_*, OS_* or the warehouse URL."""
    from dlbench.execution.local import LocalProcessExecutor
    from dlbench.execution.targets import LocalProcess, Target
    from dlbench.jobs import Job

    monkeypatch.setenv("AIRFLOW_CONN_SECRET_DB", "postgres://u:hunter2@db/x")
    monkeypatch.setenv("OS_PASSWORD", "hunter2")
    monkeypatch.setenv("DLBENCH_WAREHOUSE_URL", "postgresql://u:hunter2@db/w")
    monkeypatch.setenv("TF_NUM_INTEROP_THREADS", "1")
    probe = tmp_path / "probe"
    (probe / "dlbench" / "workloads").mkdir(parents=True)
    (probe / "dlbench" / "__init__.py").write_text("")
    (probe / "dlbench" / "workloads" / "__init__.py").write_text("")
    seen_file = tmp_path / "seen.json"
    (probe / "dlbench" / "workloads" / "__main__.py").write_text(
        f"import json, os\nopen({str(seen_file)!r}, 'w').write(json.dumps(dict(os.environ)))\n")
    monkeypatch.setenv("PYTHONPATH", str(probe))
    job = Job(job_id="e" * 24, run_id="envtest", platform="bare_metal", suite="cpu", command="cpu", profile="smoke")
    out = tmp_path / "archive" / "doc.json"
    import json

    LocalProcessExecutor().execute(job, Target(name="h", platform="bare_metal", access=LocalProcess()), out, 60)
    seen = json.loads(seen_file.read_text())
    assert "AIRFLOW_CONN_SECRET_DB" not in seen and "OS_PASSWORD" not in seen and "DLBENCH_WAREHOUSE_URL" not in seen
    assert "hunter2" not in json.dumps(seen)
    assert seen["TF_NUM_INTEROP_THREADS"] == "1" and "PATH" in seen
