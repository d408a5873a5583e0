"""The core study's three scenarios through the main DAG (dag.test()), on this host: bare metal as
processes, containers on the local Docker engine; the report shows them side by side."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from dlbench import paths
from dlbench.pipeline.steps import safe_run_id
from dlbench.warehouse import archive, db
from dlbench.workloads.result import ResultDocument, Status
from tests.support.dagruns import assert_succeeded
from tests.support.prereqs import ROOT

PLATFORMS = ("bare_metal", "container_on_bare_metal")


@pytest.fixture(scope="module")
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py")).dags["dlbench_benchmark"]


def _documents(run_id: str) -> list[ResultDocument]:
    return [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(safe_run_id(run_id)))]


def test_three_scenarios_side_by_side(dag, workload_image):
    run = dag.test(run_conf={"profile": "smoke", "repetitions": 1, "suites": ["tf_cnn"], "models": ["alexnet"],
                             "data": ["synthetic"], "scenarios": ["single", "distributed", "shared"]})
    states = assert_succeeded(run)
    assert len([k for k in states if k[0] == "run_job"]) == 2 * 5  # single, distributed, background, control, tenants
    docs = _documents(run.run_id)
    cells = {(d.environment.platform.value, d.benchmark.parameters.get("scenario", "single"),
              d.benchmark.parameters.get("interference", ""), d.benchmark.parameters.get("batch_size_per_device"))
             : d for d in docs if d.labels.get("role") in (None, "aggregate")}
    assert all(d.status is Status.OK for d in cells.values()), {k: d.error for k, d in cells.items()}

    for platform in PLATFORMS:
        dist = cells[(platform, "distributed", "", 8)]
        roles = [d for d in docs if d.labels.get("cell_job_id") == dist.job_id]
        workers = [d for d in roles if d.labels["role"] == "worker"]
        ps = [d for d in roles if d.labels["role"] == "ps"]
        assert len(workers) == 2 and len(ps) == 1 and all(d.status is Status.OK for d in workers + ps)
        assert ps[0].labels.get("ended_by") == "sigterm"  # the executor ended it after the workers
        # the cell's figures are the workers' own, added up (independent of aggregate.py)
        assert dist.sample("throughput").value == pytest.approx(sum(w.sample("throughput").value for w in workers))
        assert dist.sample("measured_window_overlap").value > 0.8
        addresses = json.loads(workers[0].labels["cluster"])
        assert len(addresses["ps"]) == 1 and len(addresses["worker"]) == 2
        assert len({a for group in addresses.values() for a in group}) == 3
        if platform == "container_on_bare_metal":  # three containers on one user-defined network, by name
            assert all(a.startswith("dlbench-") for group in addresses.values() for a in group)
        assert any(s.metric == "network_tcp_throughput" for s in dist.samples), dist.labels

        shared = cells[(platform, "shared", "background", 8)]
        roles = {d.labels["role"]: d for d in docs if d.labels.get("cell_job_id") == shared.job_id}
        assert set(roles) == {"alone", "foreground", "background"}
        alone, fg = roles["alone"].sample("elapsed_time").value, roles["foreground"].sample("elapsed_time").value
        assert shared.sample("degradation_elapsed_time").value == pytest.approx((fg - alone) / alone * 100)
        t_alone, t_fg = roles["alone"].sample("throughput").value, roles["foreground"].sample("throughput").value
        assert shared.sample("degradation_throughput").value == pytest.approx((t_alone - t_fg) / t_alone * 100)
        assert roles["background"].labels.get("ended_by") == "sigterm"
        assert shared.sample("background_coverage").value >= 0.99, "the background must outlast the foreground"
        assert (platform, "shared", "background", 4) in cells  # the small-batch control
        tenants = cells[(platform, "shared", "tenants", 8)]
        assert len([d for d in docs if d.labels.get("cell_job_id") == tenants.job_id
                    and d.labels["role"] == "tenant"]) == 2
        assert any(s.metric == "writeback_dirtied" for s in tenants.samples)
    cpusets = json.loads(cells[("container_on_bare_metal", "shared", "background", 8)].labels["cpusets"])
    assert cpusets["foreground"] != cpusets["background"]

    # warehouse: scenarios are separate cases; roles are loaded but are not cells
    with db.engine_for(None).connect() as conn:
        scenarios = {r[0] for r in conn.execute(text(
            "SELECT DISTINCT b.parameters FROM executions e JOIN benchmarks b ON b.id = e.benchmark_id "
            "JOIN runs r ON r.id = e.run_pk WHERE r.run_id = :run AND b.suite = 'tf_cnn'"),
            {"run": safe_run_id(run.run_id)})}
    assert {json.loads(p).get("scenario", "single") if isinstance(p, str) else p.get("scenario", "single")
            for p in scenarios} == {"single", "distributed", "shared"}
    page = (paths.reports_dir() / safe_run_id(run.run_id) / "report.html").read_text()
    for scenario in ("single", "distributed", "shared"):
        assert scenario in page
    assert "degradation" in page.lower()
