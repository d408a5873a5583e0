"""Migrations, idempotent loads and archive reloads on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.orm import Session

from dlbench import paths
from dlbench.warehouse import archive, db
from dlbench.warehouse.load import RunInfo, load_document, load_documents, reload_archive
from dlbench.warehouse.models import Base
from dlbench.workloads.result import Benchmark, Environment, Platform, ResultDocument
from tests.warehouse.realdocs import PLATFORMS, REPETITIONS, RUN_ID, raw_samples

TABLES = ["runs", "environments", "benchmarks", "executions", "samples"]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "warehouse.md"


def snapshot(engine) -> dict[str, list]:
    """Every row of every table, minus surrogate keys and load timestamps."""
    rows = {}
    with engine.connect() as conn:
        for table in TABLES:
            columns = [c["name"] for c in inspect(conn).get_columns(table) if c["name"] not in ("id", "loaded_at")]
            result = conn.execute(text(f"SELECT {', '.join(columns)} FROM {table}")).all()
            rows[table] = sorted(json.dumps([str(v) for v in r]) for r in result)
    return rows


def count(engine, sql: str) -> int:
    with engine.connect() as conn:
        return conn.scalar(text(sql))


def doc(platform: str, rep: int, throughput: float, *, run_id: str = "r1", job_id: str | None = None,
        hostname: str = "h") -> ResultDocument:
    d = ResultDocument(
        run_id=run_id, repetition=rep, **({"job_id": job_id} if job_id else {}),
        benchmark=Benchmark(suite="tf_cnn", name="resnet50", parameters={"data": "synthetic", "profile": "smoke"}),
        environment=Environment(hostname=hostname, platform=Platform(platform)),
    )
    d.add("throughput", throughput, "images/s", model="resnet50", data="synthetic", batch_size=4)
    return d


def test_migrations_match_the_models_and_go_both_ways(engine):
    assert db.current_revision(engine) == db.head_revision() == "0006"
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == [], diff
        inspector = inspect(conn)
        assert set(TABLES) <= set(inspector.get_table_names())
        assert "sample_facts" in inspector.get_view_names()
        # The planners' two questions have their indexes.
        indexes = {i["name"]: i["column_names"] for t in TABLES for i in inspector.get_indexes(t)}
        assert indexes["ix_executions_benchmark_id_platform"] == ["benchmark_id", "platform"]
        assert indexes["ix_runs_scheduled_started_at"] == ["scheduled", "started_at"]
    assert "capacity_facts" in inspect(engine).get_view_names()
    assert "change_acks" in inspect(engine).get_table_names()
    db.downgrade(engine, "0005")
    with engine.connect() as conn:
        assert "change_acks" not in inspect(conn).get_table_names()
    db.downgrade(engine, "0004")
    with engine.connect() as conn:
        assert "framework" not in {c["name"] for c in inspect(conn).get_columns("benchmarks")}
        assert {"sample_facts", "capacity_facts"} <= set(inspect(conn).get_view_names())  # 0004's, restored
        assert "framework" not in {c["name"] for c in inspect(conn).get_columns("sample_facts")}
    db.downgrade(engine, "0003")
    with engine.connect() as conn:
        assert "baseline_pins" not in inspect(conn).get_table_names()
        assert "capacity_facts" not in inspect(conn).get_view_names()
    db.downgrade(engine, "0002")
    with engine.connect() as conn:
        assert "tags" not in {c["name"] for c in inspect(conn).get_columns("runs")}
    db.downgrade(engine, "0001")
    assert db.current_revision(engine) == "0001"
    db.downgrade(engine, "base")
    with engine.connect() as conn:
        assert not set(TABLES) & set(inspect(conn).get_table_names())
    db.upgrade(engine)
    db.upgrade(engine)  # idempotent: the DAG calls it before every load
    assert db.current_revision(engine) == "0006"


def test_engine_for_defaults_to_sqlite_in_dlbench_home(monkeypatch, tmp_path):
    monkeypatch.delenv(db.URL_ENV, raising=False)
    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path / "home"))
    engine = db.upgrade(None)
    assert engine.url.database == str(tmp_path / "home" / "warehouse.db")
    assert (tmp_path / "home" / "warehouse.db").exists()
    monkeypatch.setenv(db.URL_ENV, f"sqlite:///{tmp_path / 'other.db'}")
    assert db.engine_for().url.database == str(tmp_path / "other.db")


def test_loading_twice_leaves_the_same_rows(engine, real_documents):
    files = sorted(real_documents.glob("*.json"))
    info = RunInfo(run_id=RUN_ID, dag_id="dlbench_benchmark", profile="smoke", provider="local",
                   config={"profile": "smoke"})
    first = load_documents(engine, files, run=info)
    n = len(PLATFORMS) * len(REPETITIONS)
    assert (first.documents, first.executions_created, first.executions_updated) == (n, n, 0)
    before = snapshot(engine)
    again = load_documents(engine, files, run=info)
    assert (again.executions_created, again.executions_updated) == (0, n)
    assert snapshot(engine) == before
    assert reload_archive(engine, real_documents).documents == n
    assert snapshot(engine) == before  # the run's DAG id, profile and config survive a reload
    samples_in_files = sum(len(json.loads(f.read_text())["samples"]) for f in files)
    assert count(engine, "SELECT count(*) FROM samples") == samples_in_files == first.samples
    assert count(engine, "SELECT count(*) FROM executions") == n
    assert count(engine, "SELECT count(DISTINCT benchmark_id) FROM executions") == 1  # one case, two platforms
    with engine.connect() as conn:
        run = conn.execute(text("SELECT dag_id, profile, provider, scheduled FROM runs")).one()
        assert tuple(run) == ("dlbench_benchmark", "smoke", "local", False)
        # Typed values, as the runner wrote them.
        stored = sorted(conn.execute(text(
            "SELECT value FROM sample_facts WHERE metric = 'throughput' AND platform = 'bare_metal'")).scalars())
    assert stored == pytest.approx(sorted(raw_samples(real_documents, "throughput")["bare_metal"]))


def test_a_changed_document_replaces_its_samples(engine):
    load_documents(engine, [doc("bare_metal", 0, 10.0, job_id="j1"), doc("bare_metal", 1, 12.0, job_id="j2")])
    fixed = doc("bare_metal", 0, 11.0, job_id="j1")
    fixed.add("elapsed_time", 3.0, "s")
    summary = load_documents(engine, [fixed])
    assert (summary.executions_created, summary.executions_updated) == (0, 1)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT job_id, metric, value FROM sample_facts ORDER BY job_id, metric")).all()
    assert [tuple(r) for r in rows] == [("j1", "elapsed_time", 3.0), ("j1", "throughput", 11.0),
                                        ("j2", "throughput", 12.0)]


def test_a_batch_is_all_or_nothing_and_unknown_versions_are_refused(engine, tmp_path):
    good = doc("bare_metal", 0, 10).write(tmp_path / "good.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(good.read_text()), "schema_version": 99}))
    with pytest.raises(ValueError, match="unsupported dlbench.result schema_version 99"):
        load_documents(engine, [good, bad])
    assert count(engine, "SELECT count(*) FROM executions") == 0
    assert count(engine, "SELECT count(*) FROM runs") == 0


def test_archive_layout_and_reload_into_an_empty_warehouse(engine, monkeypatch, tmp_path):
    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path / "home"))
    assert archive.archive_path("scheduled__2026-11-16T00-00-00", "abc") == \
        tmp_path / "home" / "results" / "scheduled__2026-11-16T00-00-00" / "abc.json"
    assert archive.archive_dir("manual") == paths.results_dir() / "manual"
    for bad in ("", "..", "a/b"):
        with pytest.raises(ValueError, match="archive file name"):
            archive.archive_path(bad, "j")
    weekly = "scheduled__2026-11-16T00-00-00"
    for rep in (0, 1):
        weekly_doc = doc("bare_metal", rep, 100.0 + rep, run_id=weekly, job_id=f"w{rep}")
        weekly_doc.write(archive.archive_path(weekly, f"w{rep}"))
    doc("bare_metal", 0, 90.0, run_id="manual", job_id="m0").write(archive.archive_path("manual", "m0"))
    # A half-written document (ResultDocument.write's temp name) is not picked up.
    (archive.archive_dir("manual") / ".m1.json.tmp").write_text("{")
    (archive.archive_dir("manual") / ".m2.json").write_text("{")
    summary = reload_archive(engine)  # default: the whole $DLBENCH_HOME/results tree
    assert summary.documents == 3 and summary.runs == {weekly, "manual"}
    with engine.connect() as conn:
        runs = dict(conn.execute(text("SELECT run_id, scheduled FROM runs")).all())
        paths_ = set(conn.execute(text("SELECT archive_path FROM executions")).scalars())
    assert {k: bool(v) for k, v in runs.items()} == {weekly: True, "manual": False}
    assert str(archive.archive_path(weekly, "w1")) in paths_
    with pytest.raises(FileNotFoundError, match="no result archive"):
        reload_archive(engine, tmp_path / "missing")


def test_the_archive_describes_its_runs_so_a_rebuilt_warehouse_is_complete(engine, monkeypatch, tmp_path):
    """Request, DAG, provider and tags are archived with the documents (``run.info.json``), and
    reload-archive restores them into an empty warehouse; reloading twice changes nothing."""
    from dlbench.pipeline import steps

    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path / "home"))
    run_id = "manual__2026-11-22T10:00:00+00:00"
    request = steps.validate({"provider": "local", "platforms": ["bare_metal"], "suites": ["cpu"]})
    tags = steps.tags_for(run_id, "dlbench_benchmark", run_id)
    steps.archive_run(run_id, request, "dlbench_benchmark", tags)
    safe = steps.safe_run_id(run_id)
    doc("bare_metal", 0, 50.0, run_id=safe, job_id="j0").write(archive.archive_path(safe, "j0"))
    for _ in range(2):
        summary = reload_archive(engine)
        assert summary.documents == 1
    with engine.connect() as conn:
        row = conn.execute(text("SELECT dag_id, provider, profile, config, tags FROM runs WHERE run_id = :r"),
                           {"r": safe}).one()
    config = row.config if isinstance(row.config, dict) else json.loads(row.config)
    stored_tags = row.tags if isinstance(row.tags, dict) else json.loads(row.tags)
    assert (row.dag_id, row.provider, row.profile) == ("dlbench_benchmark", "local", "smoke")
    assert config == request and stored_tags == tags
    assert count(engine, "SELECT count(*) FROM executions") == 1


def test_environments_and_benchmarks_are_deduplicated(engine):
    load_documents(engine, [doc("bare_metal", r, 10.0 + r, job_id=f"a{r}") for r in range(3)]
                   + [doc("container_on_bare_metal", 0, 9.0, job_id="c0", hostname="ctr")])
    assert count(engine, "SELECT count(*) FROM environments") == 2
    assert count(engine, "SELECT count(*) FROM benchmarks") == 1


def test_concurrent_loads_share_new_environment_rows(postgres_url):
    """Two transactions inserting the same new environment: the second reads the first's row."""
    engine = db.upgrade(db.engine_for(postgres_url))
    try:
        outcome: dict[str, object] = {}
        with Session(engine) as session, session.begin():
            load_document(session, doc("bare_metal", 0, 10.0, job_id="first"))  # row inserted, not committed

            def other_loader() -> None:
                try:
                    outcome["summary"] = load_documents(engine, [doc("bare_metal", 1, 11.0, job_id="second")])
                except Exception as exc:  # noqa: BLE001 - reported to the main thread
                    outcome["error"] = exc

            thread = threading.Thread(target=other_loader)
            thread.start()
            time.sleep(1.5)  # the other loader is now blocked on our uncommitted unique keys
            assert thread.is_alive(), "the second load should wait for the first transaction"
        thread.join(timeout=30)
        assert "error" not in outcome, outcome.get("error")
        assert count(engine, "SELECT count(*) FROM environments") == 1
        assert count(engine, "SELECT count(*) FROM executions") == 2
    finally:
        db.downgrade(engine, "base")
        engine.dispose()


def documented_queries() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", DOCS.read_text(), flags=re.S)


def test_the_documented_planner_queries_run_and_answer(engine):
    """The SQL in docs/warehouse.md runs on both databases and returns what was loaded."""
    queries = documented_queries()
    assert len(queries) >= 4
    weeks = ["scheduled__2026-11-09T00-00-00", "scheduled__2026-11-16T00-00-00"]
    docs = []
    for week, base, day in zip(weeks, (100.0, 80.0), (9, 16), strict=True):
        for platform, factor in (("bare_metal", 1.0), ("container_on_vm", 0.5)):
            for rep in (0, 1):
                d = doc(platform, rep, base * factor + rep * 2, run_id=week, job_id=f"{week}-{platform}-{rep}")
                d.started_at = datetime(2026, 11, day, 1, rep, tzinfo=UTC)
                docs.append(d)
    load_documents(engine, docs)
    params = {"run": weeks[1], "suite": "tf_cnn", "benchmark": "resnet50", "metric": "throughput",
              "platform": "container_on_vm"}
    with engine.connect() as conn:
        results = [conn.execute(text(q), {k: v for k, v in params.items() if f":{k}" in q}).all() for q in queries]
    by_platform = {r.platform: r for r in results[0]}
    assert by_platform["bare_metal"].n == 2 and by_platform["bare_metal"].mean == pytest.approx(81.0)
    assert by_platform["container_on_vm"].mean == pytest.approx(41.0)
    assert [round(r.mean, 6) for r in results[1]] == [51.0, 41.0]  # weekly trend, oldest first
    normalized = {r.platform: r.normalized for r in results[2]}
    assert normalized["container_on_vm"] == pytest.approx(41.0 / 81.0)
    # Documents without a framework (every one before frameworks existed) are TensorFlow's.
    assert [(r.framework, r.platform, r.n, round(r.mean, 6)) for r in results[3]] == [
        ("tensorflow", "bare_metal", 2, 81.0), ("tensorflow", "container_on_vm", 2, 41.0)]
