"""The serving suite through the main DAG (dag.test()) on this host: vLLM as a process of the job
on bare metal (the host's serving environment) and in its container (the vLLM image), driven by
vLLM's load generator, into the archive, the warehouse and the report."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from dlbench import paths
from dlbench.execution import workload_env
from dlbench.pipeline.steps import safe_run_id
from dlbench.reports import text_table
from dlbench.warehouse import archive, db
from dlbench.workloads.result import ResultDocument, Status
from tests.support.dagruns import assert_succeeded
from tests.support.prereqs import ROOT
from tests.support.serving import serving_python, vllm_servers

PLATFORMS = ("bare_metal", "container_on_bare_metal")
PROFILE = {"serving-e2e": {"extends": "smoke", "serving": {"concurrency": [2], "rates": [4.0, 32.0], "requests": 8,
                                                           "bisection_steps": 1}}}


@pytest.fixture(scope="module")
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py")).dags["dlbench_benchmark"]


def test_serving_on_both_embedded_platforms(dag, serving_image, docker_client, monkeypatch):
    serving_python()  # the host's vLLM environment, once a build beside the tests has ended
    monkeypatch.setenv("AIRFLOW_VAR_DLBENCH_PROFILES", json.dumps(PROFILE))
    run = dag.test(run_conf={"profile": "serving-e2e", "repetitions": 1, "suites": ["serving"],
                             "platforms": list(PLATFORMS), "scenarios": ["single", "shared"]})
    assert_succeeded(run)
    key = safe_run_id(run.run_id)
    docs = [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(key))]
    serving = {d.environment.platform.value: d for d in docs if d.benchmark.suite == "serving"
               and d.benchmark.parameters.get("scenario") == "single"}
    assert set(serving) == set(PLATFORMS), [(d.benchmark.suite, d.environment.platform) for d in docs]

    # Shared: the server alone, then beside the core study's looped training background (TensorFlow,
    # its own image or environment): the cell compares its capacity under both.
    for platform in PLATFORMS:
        cell = next(d for d in docs if d.environment.platform.value == platform and d.labels.get("role") == "aggregate"
                    and d.benchmark.suite == "serving")
        assert cell.status is Status.OK, cell.error
        assert cell.benchmark.parameters["scenario"] == "shared"
        assert cell.benchmark.parameters["interference"] == "background"
        alone, loaded = cell.sample("capacity_alone").value, cell.sample("capacity", condition="loaded").value
        assert cell.sample("degradation_capacity").value == pytest.approx((alone - loaded) / alone * 100)
        assert cell.sample("background_coverage").value > 0.9, cell.samples
        background = next(d for d in docs if d.labels.get("cell_job_id") == cell.job_id
                          and d.labels.get("role") == "background")
        assert background.benchmark.suite == "tf_cnn" and background.labels["ended_by"] == "sigterm"
        assert background.sample("throughput").unit == "images/s"
    for platform, doc in serving.items():
        assert doc.status is Status.OK, (platform, doc.error)
        assert doc.labels["framework"] == "vllm" and doc.sample("startup_time").value > 0
        assert doc.sample("capacity").unit == "requests/s" and doc.labels["capacity_bound"] in (
            "measured", "at_least", "below")
        # the archive keeps every request; each point's share is its request count
        assert {(r.load, r.level) for r in doc.requests} >= {("concurrency", 2.0), ("poisson", 4.0)}
        assert len([r for r in doc.requests if r.load == "concurrency"]) == 8
    assert serving["bare_metal"].labels[workload_env.LABEL] == workload_env.SERVING.label
    assert serving["container_on_bare_metal"].labels[workload_env.LABEL] == f"image {serving_image}"

    # The warehouse holds the percentiles per point and platform (the records stay in the archive).
    with db.engine_for(None).connect() as conn:
        rows = conn.execute(text(
            "SELECT platform, metric, labels FROM sample_facts WHERE suite = 'serving' AND run_id = :run "
            "AND metric IN ('ttft_p99', 'capacity')"), {"run": key}).all()
    points = {(r[0], r[1], json.dumps(r[2] if isinstance(r[2], dict) else json.loads(r[2] or "{}"), sort_keys=True))
              for r in rows}
    for platform in PLATFORMS:
        assert (platform, "capacity", "{}") in points
        assert (platform, "ttft_p99", json.dumps({"concurrency": 2, "load": "concurrency"}, sort_keys=True)) in points

    table = text_table(db.engine_for(None), key, paths.reports_dir() / "serving-e2e")
    assert "Serving capacity (TTFT p99 ≤ 250 ms, TPOT p99 ≤ 25 ms" in table, table
    assert "container_on_bare_metal" in table, table
    page = next(paths.reports_dir().glob(f"{key}/*.html")).read_text()
    assert "Serving capacity at the latency target" in page and "serving-ttft_p99" in page
    assert not vllm_servers(), "a server outlived its job"
    assert not docker_client.containers.list(all=True, filters={"label": f"dlbench.run_id={key}"})
