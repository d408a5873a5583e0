"""The shared store: setting precedence, round trips of the archive and reports on file:// and
memory://, atomic writes under concurrent writers."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path

import pytest

from dlbench import paths, settings, storage
from dlbench.pipeline import steps
from dlbench.warehouse import archive, db
from dlbench.workloads.result import ResultDocument, Status


def test_precedence_env_then_variable_then_default(monkeypatch, tmp_path):
    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path))
    monkeypatch.delenv(storage.ENV, raising=False)
    storage.reset()
    monkeypatch.setattr(settings, "_variable_cache", {storage.VARIABLE: None})
    assert storage.storage_url() == tmp_path.resolve().as_uri()  # default: file:// under DLBENCH_HOME
    assert "default" in storage.describe()
    monkeypatch.setattr(settings, "_variable_cache", {storage.VARIABLE: "memory://from-variable"})
    assert storage.storage_url() == "memory://from-variable"
    assert "Airflow Variable" in storage.describe()
    monkeypatch.setenv(storage.ENV, "memory://from-env")
    assert storage.storage_url() == "memory://from-env"
    assert "env" in storage.describe()


def test_default_store_is_the_data_dir_layout(monkeypatch, tmp_path):
    """Unset, the store is DLBENCH_HOME itself: the archive is where it always was."""
    from dlbench import paths

    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path))
    monkeypatch.delenv(storage.ENV, raising=False)
    monkeypatch.setattr(settings, "_variable_cache", {storage.VARIABLE: None})
    store = storage.store()
    assert store.local and store.local_path(archive.archive_key("r", "j.json")) == (
        paths.results_dir() / "r" / "j.json").resolve()


def _document(run_id: str, job_id: str, payload: int = 0) -> ResultDocument:
    from dlbench.execution.base import failed_document
    from dlbench.request import plan_jobs

    request = steps.request_from(steps.validate({"platforms": ["bare_metal"], "models": ["alexnet"],
                                                 "data": ["synthetic"], "repetitions": 1}))
    job = plan_jobs(request, run_id)[0].model_copy(update={"job_id": job_id})
    doc = failed_document(job, "x" * payload)
    doc.status = Status.SKIPPED
    return doc


def test_archive_load_outcome_report_round_trip(store_url, tmp_path):
    run = "manual__2026-11-23T01:00:00+00:00"
    safe = steps.safe_run_id(run)
    request = steps.validate({"platforms": ["bare_metal"], "models": ["alexnet"], "data": ["synthetic"],
                              "repetitions": 1})
    steps.archive_run(run, request, "dlbench_benchmark", steps.tags_for(run, "dlbench_benchmark"))
    doc = _document(safe, "abc123")
    staged = doc.write(steps.archive_path(safe, "abc123"))
    archive.publish(safe, staged)  # what run_job does after the executor wrote the document
    store = storage.store()
    assert store.list(f"results/{safe}") == [f"results/{safe}/abc123.json", f"results/{safe}/run.info.json"]
    if not store.local:
        assert not Path(staged).exists()  # the worker's staging copy is dropped once published
    assert archive.run_info(safe)["dag_id"] == "dlbench_benchmark"
    assert steps.outcome(run, 1)["counts"] == {"ok": 0, "failed": 0, "skipped": 1, "missing": 0}
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    for _ in range(2):  # idempotent: loading twice leaves the same rows
        assert steps.load_run(run, request, "dlbench_benchmark", url) == {"run_id": safe, "documents": 1}
    from sqlalchemy import text

    with db.engine_for(url).connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM executions")).scalar() == 1
        assert conn.execute(text("SELECT dag_id FROM runs")).scalar() == "dlbench_benchmark"
    result = steps.report_run(run, url)
    assert store.exists(f"reports/{safe}/report.html")
    if not store.local:
        assert not (paths.reports_dir() / safe).exists()  # nor the report's staging copy (issue 42's stack)
    assert result["html"] == store.url_of(f"reports/{safe}/report.html")
    steps.compare_run(run, url)
    assert json.loads(store.read_text(f"reports/{safe}/regressions.json"))["run_id"] == safe
    # A new warehouse rebuilt from the store's archive alone (`dlbench reload-archive`, no DIR).
    from dlbench.warehouse.load import reload_archive

    fresh = db.engine_for(f"sqlite:///{tmp_path / 'rebuilt.db'}")
    db.upgrade(fresh)
    assert reload_archive(fresh).runs == {safe}
    with fresh.connect() as conn:
        assert conn.execute(text("SELECT dag_id FROM runs")).scalar() == "dlbench_benchmark"
        assert conn.execute(text("SELECT count(*) FROM executions")).scalar() == 1


def test_ui_lists_and_serves_reports_from_the_store(store_url):
    from fastapi.testclient import TestClient

    from dlbench.ui.app import create_app

    store = storage.store()
    store.write_text("reports/run-a/report.html", "<html>A</html>")
    store.write_text("reports/run-a/chart.png", "png")
    store.write_text("reports/no-page/other.txt", "x")
    client = TestClient(create_app())
    listed = client.get("/api/reports").json()
    assert [r["run_id"] for r in listed] == ["run-a"]
    assert client.get("/runs/run-a/report.html").text == "<html>A</html>"
    assert client.get("/runs/run-a/missing.html").status_code == 404


def _writer(url: str, key: str, size: int, rounds: int, marker: int) -> None:
    store = storage.Store(url)
    for i in range(rounds):
        store.write_text(key, json.dumps({"writer": marker, "round": i, "pad": str(marker) * size}))


def _check_readers(store: storage.Store, key: str, writers: list, size: int) -> int:
    seen = 0
    while any(w.is_alive() for w in writers) or seen == 0:
        try:
            text = store.read_text(key)
        except FileNotFoundError:
            continue
        data = json.loads(text)  # a partial document would not parse
        assert len(data["pad"]) == size and set(data["pad"]) == {str(data["writer"])}
        assert not [k for k in store.list("results/r") if k.rsplit("/", 1)[-1].startswith(".")]
        seen += 1
    return seen


def test_concurrent_writers_of_one_document_never_expose_a_partial_file(store_url):
    key, size = "results/r/same-job.json", 1 << 20
    if store_url.startswith("file://"):  # processes, like several workers on one shared file system
        ctx = multiprocessing.get_context("spawn")
        writers = [ctx.Process(target=_writer, args=(store_url, key, size, 15, n)) for n in range(1, 4)]
    else:  # memory:// lives in this process: threads
        writers = [threading.Thread(target=_writer, args=(store_url, key, size, 30, n)) for n in range(1, 4)]
    for w in writers:
        w.start()
    seen = _check_readers(storage.Store(store_url), key, writers, size)
    for w in writers:
        w.join()
        assert getattr(w, "exitcode", 0) == 0
    assert seen > 0
    store = storage.Store(store_url)
    assert store.list("results/r") == [key]  # no temporary left behind
    if store.local:
        assert sorted(p.name for p in Path(store.path("results/r")).iterdir()) == ["same-job.json"]


def test_keys_cannot_escape_the_root(store_url):
    with pytest.raises(ValueError):
        storage.store().write_text("results/../../etc/x", "no")
