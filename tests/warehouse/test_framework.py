"""The framework dimension in the warehouse (issue 23): ``benchmarks.framework`` and the views'
``framework`` column, from loads, from an old archive reloaded, and from migration 0005's
backfill of a warehouse created at 0004, on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, inspect, select, text

from dlbench.warehouse import db
from dlbench.warehouse.load import load_documents, reload_archive
from dlbench.warehouse.models import Benchmark as BenchmarkRow
from dlbench.warehouse.models import Environment as EnvironmentRow
from dlbench.warehouse.models import Execution, Run, Sample
from dlbench.workloads.result import Benchmark, Environment, Platform, ResultDocument


def training_doc(job_id: str, framework: str | None, throughput: float, *, run_id: str = "fw-run",
                 platform: str = "bare_metal", precision: str = "fp32") -> ResultDocument:
    """A tf_cnn document as ``workloads/cnn/main.py`` writes it: ``framework`` None is one written before
    frameworks existed (no framework anywhere); ``tensorflow`` has the labels but, like every
    TensorFlow document, no ``framework`` parameter; the others have both."""
    parameters = {"model": "resnet50", "data": "synthetic", "batch_size_per_device": 32, "profile": "smoke"}
    labels: dict[str, object] = {}
    versions: dict[str, str] = {}
    if framework is not None:
        labels = {"framework": framework, "precision": precision}
        versions = {{"tensorflow": "tensorflow", "pytorch": "torch", "jax": "jax"}[framework]: "1.0"}
        if framework != "tensorflow":
            parameters["framework"] = framework
        if precision != "fp32":
            parameters["precision"] = precision
    d = ResultDocument(run_id=run_id, job_id=job_id, labels=labels,
                       benchmark=Benchmark(suite="tf_cnn", name="resnet50", parameters=parameters),
                       environment=Environment(hostname="h", platform=Platform(platform), versions=versions))
    d.add("throughput", throughput, "images/s", model="resnet50", data="synthetic", batch_size=32)
    return d


def micro_doc(job_id: str) -> ResultDocument:
    d = ResultDocument(run_id="fw-run", job_id=job_id, benchmark=Benchmark(suite="cpu", name="hpcc"),
                       environment=Environment(hostname="h", platform=Platform("bare_metal")))
    d.add("hpl", 100.0, "GFLOPS")
    return d


def rows(engine, sql: str) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql))]


def test_loads_state_the_framework_on_benchmarks_and_in_both_views(engine):
    load_documents(engine, [training_doc("old", None, 100.0), training_doc("tf", "tensorflow", 101.0),
                            training_doc("torch", "pytorch", 130.0), training_doc("torch-bf16", "pytorch", 200.0,
                                                                                 precision="bf16"),
                            training_doc("jax", "jax", 90.0), micro_doc("cpu")])
    # A micro-benchmark has no framework dimension; the old and the new TensorFlow documents are
    # one case (the same parameters): one row, tensorflow.
    assert rows(engine, "SELECT framework FROM benchmarks WHERE suite = 'cpu'") == [(None,)]
    frameworks = rows(engine, "SELECT framework, count(*) FROM benchmarks WHERE suite = 'tf_cnn' "
                              "GROUP BY framework ORDER BY framework")
    assert frameworks == [("jax", 1), ("pytorch", 2), ("tensorflow", 1)]
    # What a planner writes, the same text on both databases.
    assert rows(engine, "SELECT job_id, value FROM sample_facts WHERE framework = 'pytorch' ORDER BY job_id") == [
        ("torch", 130.0), ("torch-bf16", 200.0)]
    assert rows(engine, "SELECT job_id FROM sample_facts WHERE framework = 'tensorflow' ORDER BY job_id") == [
        ("old",), ("tf",)]
    assert rows(engine, "SELECT job_id FROM sample_facts WHERE framework IS NULL") == [("cpu",)]
    assert rows(engine, "SELECT framework, count(*), avg(value) FROM capacity_facts WHERE metric = 'throughput' "
                        "GROUP BY framework ORDER BY framework") == [
        ("jax", 1, 90.0), ("pytorch", 2, 165.0), ("tensorflow", 2, 100.5)]


def test_an_old_archive_reloaded_into_an_empty_warehouse_comes_out_tensorflow(engine, tmp_path):
    """An archive written before frameworks existed: documents with no framework parameter or
    label, as raw JSON (what is on disk, whatever today's model would write)."""
    run_dir = tmp_path / "results" / "scheduled__2025-06-01T00-00-00"
    run_dir.mkdir(parents=True)
    for rep, platform in enumerate(("bare_metal", "virtual_machine")):
        data = json.loads(training_doc(f"old-{rep}", None, 100.0 - rep, run_id=run_dir.name,
                                       platform=platform).model_dump_json())
        assert "framework" not in json.dumps(data)
        (run_dir / f"old-{rep}.json").write_text(json.dumps(data))
    (run_dir / "pt-0.json").write_text(training_doc("pt-0", "pytorch", 120.0, run_id=run_dir.name).model_dump_json())
    for _ in range(2):  # a reload twice leaves the same rows
        assert reload_archive(engine, tmp_path / "results").documents == 3
    assert rows(engine, "SELECT framework, count(*) FROM benchmarks GROUP BY framework ORDER BY framework") == [
        ("pytorch", 1), ("tensorflow", 1)]
    assert rows(engine, "SELECT job_id, platform FROM sample_facts WHERE framework = 'tensorflow' ORDER BY job_id") \
        == [("old-0", "bare_metal"), ("old-1", "virtual_machine")]


def test_migration_0005_backfills_a_warehouse_created_at_0004(warehouse_url):
    """Rows written at 0004 (before the column existed), then upgraded: each tf_cnn case gets its
    ``framework`` parameter (any spelling, lower-cased; empty means none) or ``tensorflow``, other
    suites NULL, and both views carry it. Down again, 0004's views return without the column."""
    engine = db.upgrade(db.engine_for(warehouse_url), "0004")
    try:
        assert "framework" not in {c["name"] for c in inspect(engine).get_columns("benchmarks")}
        cases = {  # name -> (suite, parameters, the framework the backfill must state)
            "old_tf": ("tf_cnn", {"model": "alexnet", "data": "synthetic"}, "tensorflow"),
            "torch": ("tf_cnn", {"model": "alexnet", "data": "synthetic", "framework": "pytorch"}, "pytorch"),
            "jax": ("tf_cnn", {"model": "alexnet", "data": "real", "framework": "jax", "precision": "bf16"}, "jax"),
            "spelled": ("tf_cnn", {"model": "resnet50", "framework": "PyTorch"}, "pytorch"),
            "empty": ("tf_cnn", {"model": "resnet50", "framework": ""}, "tensorflow"),
            "hpcc": ("cpu", {"ranks": 4}, None),
        }
        now = datetime(2026, 1, 1, tzinfo=UTC)
        # Core inserts name only 0004's columns (the ORM's table now has framework too).
        with engine.begin() as conn:
            run = conn.execute(insert(Run).values(run_id="r0004", loaded_at=now, scheduled=False, config={})
                               .returning(Run.id)).scalar_one()
            env = conn.execute(insert(EnvironmentRow).values(fingerprint="f", platform="bare_metal", gpu_count=0,
                                                             in_container=False, details={})
                               .returning(EnvironmentRow.id)).scalar_one()
            for i, (name, (suite, parameters, _)) in enumerate(cases.items()):
                bench = conn.execute(insert(BenchmarkRow).values(suite=suite, name=name, parameters_hash=f"h{i}",
                                                                 parameters=parameters)
                                     .returning(BenchmarkRow.id)).scalar_one()
                execution = conn.execute(insert(Execution).values(
                    job_id=f"job-{name}", run_pk=run, environment_id=env, benchmark_id=bench, platform="bare_metal",
                    repetition=0, status="ok", labels={}).returning(Execution.id)).scalar_one()
                conn.execute(insert(Sample).values(execution_id=execution, ordinal=0, metric="throughput",
                                                   value=float(i), unit="images/s", labels={}))
        db.upgrade(engine, "0005")
        assert db.current_revision(engine) == "0005"
        expected = {name: framework for name, (_, _, framework) in cases.items()}
        with engine.connect() as conn:
            assert dict(conn.execute(select(BenchmarkRow.name, BenchmarkRow.framework)).all()) == expected
            assert dict(conn.execute(text("SELECT benchmark, framework FROM sample_facts")).all()) == expected
            assert dict(conn.execute(text("SELECT benchmark, framework FROM capacity_facts")).all()) == {
                name: fw for name, fw in expected.items() if name != "hpcc"}
            assert sorted(conn.execute(text(
                "SELECT job_id FROM sample_facts WHERE framework = 'pytorch'")).scalars()) == ["job-spelled",
                                                                                                 "job-torch"]
        db.downgrade(engine, "0004")
        with engine.connect() as conn:
            assert "framework" not in {c["name"] for c in inspect(conn).get_columns("sample_facts")}
            assert conn.scalar(text("SELECT count(*) FROM sample_facts")) == len(cases)
            assert conn.scalar(text("SELECT count(*) FROM capacity_facts")) == len(cases) - 1
        db.upgrade(engine)  # and up again: the same backfill
        with engine.connect() as conn:
            assert dict(conn.execute(select(BenchmarkRow.name, BenchmarkRow.framework)).all()) == expected
    finally:
        db.downgrade(engine, "base")
        engine.dispose()


@pytest.mark.parametrize("framework", ["pytorch", "jax"])
def test_a_load_completes_a_row_written_without_the_column(engine, framework):
    """A benchmark row inserted by another writer without ``framework`` (a bulk import, a generator)
    gets it from the next load of one of its documents."""
    d = training_doc("j", framework, 10.0)
    load_documents(engine, [d])
    with engine.begin() as conn:
        conn.execute(text("UPDATE benchmarks SET framework = NULL"))
    load_documents(engine, [d])
    assert rows(engine, "SELECT framework FROM benchmarks") == [(framework,)]
