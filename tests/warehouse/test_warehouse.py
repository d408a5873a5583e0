"""Migrations, idempotent loads and reports on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from dlbench.reports import build_report, text_table
from dlbench.reports.compare import samples_frame, statistics
from dlbench.warehouse import db
from dlbench.warehouse.load import RunInfo, load_documents, reload_archive
from dlbench.warehouse.models import Base
from dlbench.workloads.result import Benchmark, Environment, Platform, ResultDocument, Status

TABLES = ["runs", "environments", "benchmarks", "executions", "samples"]


@pytest.fixture
def engine(warehouse_url):
    engine = db.upgrade(db.engine_for(warehouse_url))
    yield engine
    db.downgrade(engine, "base")
    engine.dispose()


@pytest.fixture(scope="session")
def real_documents(tmp_path_factory):
    """Documents written by the real TF runner: two platforms x two repetitions."""
    out = tmp_path_factory.mktemp("archive") / "real-run"
    for platform in ("bare_metal", "container_on_bare_metal"):
        for rep in (0, 1):
            path = out / f"{platform}-{rep}.json"
            proc = subprocess.run(
                [sys.executable, "-m", "dlbench.workloads", "tf-cnn", "--model", "alexnet", "--platform", platform,
                 "--run-id", "real-run", "--repetition", str(rep), "--warmup-steps", "1", "--measured-steps", "2",
                 "--out", str(path)], capture_output=True, text=True, check=False)
            assert proc.returncode == 0, proc.stderr[-1500:]
    return out


def snapshot(engine) -> dict[str, list]:
    """Every row of every table, minus surrogate keys and load timestamps."""
    rows = {}
    with engine.connect() as conn:
        for table in TABLES:
            columns = [c["name"] for c in inspect(conn).get_columns(table) if c["name"] not in ("id", "loaded_at")]
            result = conn.execute(text(f"SELECT {', '.join(columns)} FROM {table}")).all()
            rows[table] = sorted(json.dumps([str(v) for v in r]) for r in result)
    return rows


def doc(platform: str, rep: int, throughput: float, elapsed: float, run_id: str = "r1",
        status: Status = Status.OK) -> ResultDocument:
    d = ResultDocument(
        run_id=run_id, repetition=rep, status=status, error=None if status is Status.OK else "no Docker engine",
        benchmark=Benchmark(suite="tf_cnn", name="resnet50", parameters={"data": "synthetic", "profile": "smoke",
                                                                         "batch_size_per_device": 32}),
        environment=Environment(hostname="h", platform=Platform(platform)),
    )
    if status is Status.OK:
        d.add("throughput", throughput, "images/s", model="resnet50", data="synthetic", batch_size=32)
        d.add("elapsed_time", elapsed, "s", scope="process_start_to_end")
    return d


def test_migrations_match_the_models_and_go_both_ways(engine):
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == [], diff
        assert set(TABLES) <= set(inspect(conn).get_table_names())
        assert "sample_facts" in inspect(conn).get_view_names()
    db.downgrade(engine, "base")
    with engine.connect() as conn:
        assert not set(TABLES) & set(inspect(conn).get_table_names())
    db.upgrade(engine)
    assert db.current_revision(engine) == "0001"


def test_loading_twice_leaves_the_same_rows(engine, real_documents):
    files = sorted(real_documents.glob("*.json"))
    first = load_documents(engine, files, run=RunInfo(run_id="real-run", dag_id="dlbench_benchmark", profile="smoke"))
    assert first.executions_created == 4
    before = snapshot(engine)
    again = load_documents(engine, files, run=RunInfo(run_id="real-run", dag_id="dlbench_benchmark", profile="smoke"))
    assert again.executions_created == 0 and again.executions_updated == 4
    assert snapshot(engine) == before
    reload_archive(engine, real_documents)
    assert snapshot(engine) == before
    with engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM executions")) == 4
        assert conn.scalar(text("SELECT count(DISTINCT benchmark_id) FROM executions")) == 1  # same case, 2 platforms
        platforms = {r[0] for r in conn.execute(text("SELECT DISTINCT platform FROM sample_facts"))}
        assert platforms == {"bare_metal", "container_on_bare_metal"}


def test_a_batch_is_all_or_nothing(engine, tmp_path):
    good = doc("bare_metal", 0, 10, 5).write(tmp_path / "good.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_id": "dlbench.result", "schema_version": 99}')
    with pytest.raises(ValueError, match="unsupported dlbench.result schema_version 99"):
        load_documents(engine, [good, bad])
    with engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM executions")) == 0


def test_statistics_diff_and_normalization(engine):
    bm = [(100.0, 10.0), (110.0, 12.0), (90.0, 11.0)]
    ct = [(80.0, 15.0), (90.0, 14.0), (85.0, 16.0)]
    docs = [doc("bare_metal", i, t, e) for i, (t, e) in enumerate(bm)]
    docs += [doc("container_on_bare_metal", i, t, e) for i, (t, e) in enumerate(ct)]
    docs.append(doc("container_on_bare_metal", 3, 0, 0, status=Status.SKIPPED))
    load_documents(engine, docs)
    stats = statistics(samples_frame(engine, "r1")).set_index(["metric", "platform"])
    h, d = sum(t for t, _ in bm) / 3, sum(t for t, _ in ct) / 3  # 100, 85
    row = stats.loc[("throughput", "container_on_bare_metal")]
    assert row["n"] == 3  # the skipped execution is not a sample
    assert row["mean"] == pytest.approx(85.0)
    assert row["std"] == pytest.approx(5.0)  # sample std of 80, 90, 85
    assert row["diff_pct"] == pytest.approx((h - d) / h * 100)  # 15 %
    assert row["normalized"] == pytest.approx(0.85)
    assert row["cv"] == pytest.approx(5.0 / 85.0)
    elapsed = stats.loc[("elapsed_time", "container_on_bare_metal")]
    assert elapsed["normalized"] == pytest.approx(15.0 / 11.0)
    assert elapsed["diff_pct"] == pytest.approx((11.0 - 15.0) / 11.0 * 100)
    assert not bool(elapsed["higher_is_better"]) and bool(row["higher_is_better"])


def test_report_from_the_warehouse(engine, real_documents, tmp_path):
    load_documents(engine, sorted(real_documents.glob("*.json")))
    load_documents(engine, [doc("container_on_bare_metal", 9, 0, 0, run_id="real-run", status=Status.SKIPPED)])
    page = build_report(engine, "real-run", tmp_path / "report")
    html = page.read_text()
    assert html.count("data:image/png;base64,") >= 2
    assert "container_on_bare_metal" in html and "no Docker engine" in html
    assert (tmp_path / "report" / "comparison.csv").exists()
    table = text_table(engine, "real-run")
    assert "throughput images/s" in table and "SKIPPED" in table
    assert table.count("container_on_bare_metal") >= 2


def test_cli_reload_and_report(warehouse_url, real_documents, tmp_path):
    env = {"DLBENCH_WAREHOUSE_URL": warehouse_url}
    import os

    run = lambda *a: subprocess.run([sys.executable, "-m", "dlbench.cli", *a], capture_output=True, text=True,  # noqa: E731
                                    env={**os.environ, **env}, check=False)
    assert run("reload-archive", str(real_documents)).returncode == 0
    proc = run("report", "--out", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert "report:" in proc.stdout and (tmp_path / "r" / "report.html").exists()
    db.downgrade(db.engine_for(warehouse_url), "base")
