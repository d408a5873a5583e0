"""The main DAG end to end with Airflow's dag.test(): this host as bare metal and a real Docker
container, the smoke profile, all three models on synthetic and real data, into the warehouse."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from dlbench import paths
from dlbench.pipeline.embedded import in_plan_order
from dlbench.pipeline.steps import safe_run_id
from dlbench.warehouse import db
from tests.support.dagruns import assert_succeeded
from tests.support.prereqs import ROOT


@pytest.fixture(scope="module")
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags")).dags["dlbench_benchmark"]


def test_embedded_run(dag, workload_image):
    with in_plan_order():  # as make run does (dlbench.pipeline.embedded)
        run = dag.test(run_conf={"profile": "smoke", "repetitions": 1})
    states = assert_succeeded(run)
    jobs = {k: v for k, v in states.items() if k[0] == "run_job"}
    assert len(jobs) == 2 * (3 * 2 + 5)  # platforms x (models x data kinds + micro suites)
    # Only the GPU suite may be skipped (no GPU here), and it is visible as skipped, not missing.
    skipped = [k for k, v in jobs.items() if v.endswith("skipped")]
    assert len(skipped) <= 2, states
    assert all(v.endswith(("success", "skipped")) for v in states.values()), states
    # The jobs ran in plan order (a cell's platforms back to back), not in dag.test()'s set order.
    started = sorted((ti for ti in run.get_task_instances() if ti.task_id == "run_job" and ti.start_date),
                     key=lambda ti: ti.start_date)
    assert [ti.map_index for ti in started] == sorted(ti.map_index for ti in started), \
        [ti.map_index for ti in started]

    engine = db.engine_for(None)
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT platform, benchmark, parameters, count(*) FROM sample_facts "
            "WHERE metric = 'throughput' AND status = 'ok' AND run_id = :run GROUP BY platform, benchmark, parameters"),
            {"run": run.run_id.replace(":", "-").replace("+", "-")}).all()
    assert {(r[0], r[1]) for r in rows} == {
        (p, m) for p in ("bare_metal", "container_on_bare_metal") for m in ("inception3", "resnet50", "alexnet")}
    assert len(rows) == 12  # x synthetic, real
    with engine.connect() as conn:
        micro = {(r[0], r[1]) for r in conn.execute(text(
            "SELECT platform, suite FROM sample_facts WHERE suite != 'tf_cnn' AND status = 'ok' AND run_id = :run"),
            {"run": run.run_id.replace(":", "-").replace("+", "-")})}
        gpu = conn.execute(text("SELECT DISTINCT status, error FROM executions e JOIN benchmarks b "
                                "ON b.id = e.benchmark_id WHERE b.suite = 'gpu'")).all()
    assert micro == {(p, s) for p in ("bare_metal", "container_on_bare_metal")
                     for s in ("cpu", "deepbench", "disk", "network")}
    assert gpu and all(status in ("ok", "skipped") for status, _ in gpu)
    reports = list((paths.reports_dir()).glob("*/report.html"))
    page = reports[0].read_text()
    assert reports and "container_on_bare_metal" in page
    assert all(f"<h2>{suite}</h2>" in page for suite in ("tf_cnn", "cpu", "disk", "network", "deepbench"))
    # Locally bare metal measures loopback and the container the Docker bridge: the report says so.
    assert "network paths differ" in page and "loopback" in page and "Docker bridge" in page
    assert not (paths.runs_dir() / safe_run_id(run.run_id)).exists()  # the teardown removed the run's workdir


def test_bad_input_is_refused_before_anything_runs(dag):
    from airflow.sdk.definitions.param import ParamValidationError

    with pytest.raises(ParamValidationError, match="vgg16"):
        dag.test(run_conf={"models": ["vgg16"]})
