"""The serving suite through the main DAG (dag.test()) on this host: vLLM as a process of the job
on bare metal (the host's serving environment) and in its container (the vLLM image), driven by
vLLM's load generator, into the archive, the warehouse and the report."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sqlalchemy import text

from dlbench import paths
from dlbench.execution import workload_env
from dlbench.pipeline.steps import safe_run_id
from dlbench.reports import text_table
from dlbench.warehouse import archive, db
from dlbench.workloads.profiles import get_profile
from dlbench.workloads.result import ResultDocument, Status
from dlbench.workloads.serving.load import LoadPoint, requests_for
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
                    and d.benchmark.suite == "serving" and d.benchmark.parameters.get("interference") == "background")
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
    # Tenants (the profile's shared.tenants: smoke's 2): the server alone, then one job with two servers on
    # the machine, each on its half of the CPUs, every point offered to both at once.
    for platform in PLATFORMS:
        cell = next(d for d in docs if d.environment.platform.value == platform and d.labels.get("role") == "aggregate"
                    and d.benchmark.suite == "serving" and d.benchmark.parameters.get("interference") == "tenants")
        assert cell.status is Status.OK, cell.error
        alone, loaded = cell.sample("capacity_alone").value, cell.sample("capacity", condition="loaded").value
        assert cell.sample("degradation_capacity").value == pytest.approx((alone - loaded) / alone * 100)
        assert cell.sample("capacity_machine").value == pytest.approx(2 * loaded)
        (tenants,) = [d for d in docs if d.labels.get("cell_job_id") == cell.job_id
                      and d.labels.get("role") == "tenant"]
        assert tenants.status is Status.OK, tenants.error
        assert tenants.benchmark.parameters["condition"] == "tenants" and tenants.benchmark.parameters["tenants"] == 2
        shares = [set(share.split(",")) for share in tenants.labels["server_cpus"].split()]
        assert len(shares) == 2 and not shares[0] & shares[1], tenants.labels  # disjoint shares of the CPUs
        each = [float(seconds) for seconds in tenants.labels["startup_times"].split()]
        assert len([s for s in tenants.samples if s.metric == "startup_time"]) == 1 and len(each) == 2
        assert tenants.sample("startup_time").value == pytest.approx(max(each), abs=0.05)  # until both answer
        assert tenants.sample("capacity_machine").value == pytest.approx(2 * tenants.sample("capacity").value)
        spec = get_profile("smoke").serving.model_copy(update=PROFILE["serving-e2e"]["serving"])
        for point in (LoadPoint(concurrency=2), LoadPoint(rate=4.0)):
            # Both servers answered every point, as many requests each as one server alone would get.
            records = [r for r in tenants.requests if r.load == point.kind and r.level == point.level]
            assert [len([r for r in records if r.server == s]) for s in (0, 1)] == [requests_for(spec, point)] * 2
            # The point's percentiles are the two servers' requests pooled (numpy's definition).
            ttfts, tpots = np.array([r.ttft_s for r in records]), np.array([r.tpot_s for r in records])
            assert tenants.sample("ttft_p99", **point.labels).value == pytest.approx(np.percentile(ttfts, 99),
                                                                                    rel=1e-9)
            assert tenants.sample("tpot_p50", **point.labels).value == pytest.approx(np.percentile(tpots, 50),
                                                                                    rel=1e-9)
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
