"""The explorer's API on a generated multi-run warehouse (SQLite and PostgreSQL), mounted under a
prefix like Airflow mounts it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, insert, select, update

from dlbench.pipeline import steps
from dlbench.ui.app import create_app
from dlbench.warehouse import load
from dlbench.warehouse.models import Benchmark, Environment, Execution, Run, Sample
from tools.ui_history import Step, generate_history

PREFIX = "/plugins/dlbench"


def client_for(engine) -> TestClient:
    root = FastAPI()
    root.mount(PREFIX, create_app(engine))
    return TestClient(root)


def test_explorer_api_on_generated_history(engine):
    runs = generate_history(engine, runs=10, step=Step("virtual_machine", 7, 0.8), seed=3)
    # The DAG's run_tags task writes these tags (Airflow's own run id among them) into run.info.json,
    # and the load copies them into runs.tags (RunInfo.from_archive): the link must use that id.
    airflow_run_id = "scheduled__2026-03-08T02:00:00+00:00"
    tags = steps.tags_for(airflow_run_id, "dlbench_benchmark", airflow_run_id)
    assert tags["dlbench_run_id"] != airflow_run_id  # the warehouse's file-safe id: Airflow answers 404 for it
    with engine.begin() as conn:
        conn.execute(update(Run).where(Run.run_id == runs[-1]).values(
            tags=load.RunInfo.from_archive({"run_id": runs[-1], "tags": tags}).tags))
    client = client_for(engine)
    page = client.get(f"{PREFIX}/")
    assert page.status_code == 200 and "dlbench results explorer" in page.text
    assert 'src="http' not in page.text and 'href="/' not in page.text  # relative links, nothing fetched outside
    options = client.get(f"{PREFIX}/api/options").json()
    assert [r["run_id"] for r in options["runs"]][:2] == [runs[-1], runs[-2]]
    assert options["platforms"][0] == "bare_metal" and options["hardware"] == ["NVIDIA V100"]

    cmp = client.get(f"{PREFIX}/api/comparison", params={"runs": [runs[-1]], "model": "resnet50",
                                                         "data": "synthetic", "scenario": "single"}).json()
    rows = {(r["metric"], r["platform"]): r for r in cmp["rows"]}
    assert rows[("throughput", "bare_metal")]["verdict"] == "baseline"
    vm = rows[("throughput", "virtual_machine")]
    # The report's ×BM interval columns (compare.statistics), not an interval recomputed here.
    assert vm["normalized"] < 0.8 and vm["verdict"] == "worse"
    assert 0 < vm["normalized_ci_low"] < vm["normalized"] < vm["normalized_ci_high"]
    assert vm["diff_pct_ci_low"] == pytest.approx((1 - vm["normalized_ci_high"]) * 100)
    assert vm["direction"] == "higher" and rows[("elapsed_time", "virtual_machine")]["direction"] == "lower"
    assert "<svg" in cmp["svg"] and 'id="comparison-table"' in cmp["table"]
    assert ('target="_top" href="../dags/dlbench_benchmark/runs/scheduled__2026-03-08T02%3A00%3A00%2B00%3A00"'
            in cmp["links"])
    two = client.get(f"{PREFIX}/api/comparison", params={"runs": runs[-2:], "model": "resnet50",
                                                         "data": "synthetic", "scenario": "single",
                                                         "platforms": ["bare_metal"]}).json()
    # Two runs of 3 repetitions: compared on the two run means (issue 39, item 2), not 6 pooled repetitions.
    assert {r["platform"] for r in two["rows"]} == {"bare_metal"}
    assert (two["rows"][0]["n"], two["rows"][0]["n_of"]) == (2, "runs")
    ranged = client.get(f"{PREFIX}/api/comparison", params={"since": "2026-01-01", "until": "2026-01-20",
                                                             "model": "alexnet"}).json()
    assert ranged["rows"] and all((r["n"], r["n_of"]) == (3, "runs") for r in ranged["rows"])  # 3 scheduled weeks

    trend = client.get(f"{PREFIX}/api/trend", params={"model": "resnet50", "data": "synthetic",
                                                      "scenario": "single", "metric": "throughput"}).json()
    # All 10 runs: the default trend is the latest runs (TREND_RUNS), not an empty chart.
    assert trend["case"] == "resnet50 single synthetic batch 32" and len(trend["runs"]) == 10
    assert [x for x, _ in trend["change_points"]["virtual_machine"]] == [7]
    assert trend["change_points"]["bare_metal"] == []
    assert 'class="change-point"' in trend["svg"]
    assert f'href="../dags/dlbench_benchmark/runs/{runs[0]}"' in trend["links"]

    cap = client.get(f"{PREFIX}/api/capacity", params={"model": "resnet50", "data": "real"}).json()
    assert cap["hardware"] == "NVIDIA V100" and len(cap["rows"]) == 4 * 3 and cap["runs"] == [runs[-1]]
    assert "density vs degradation" in cap["svg"] and 'id="capacity-table"' in cap["table"]

    pins = client.post(f"{PREFIX}/api/pins", json={"run_id": runs[2], "suite": "tf_cnn"}).json()
    assert pins == client.get(f"{PREFIX}/api/pins").json() and pins[0]["run_id"] == runs[2]
    assert client.post(f"{PREFIX}/api/pins", json={"run_id": "nope"}).status_code == 404
    assert client.post(f"{PREFIX}/api/pins", json={"run_id": runs[2], "suite": "tf_cnn", "remove": True}).json() == []


def test_inputs_are_validated_and_bound(engine):
    generate_history(engine, runs=2, seed=1)
    client = client_for(engine)
    evil = "resnet50' OR '1'='1"
    assert client.get(f"{PREFIX}/api/comparison", params={"model": evil}).status_code == 422
    assert client.get(f"{PREFIX}/api/comparison", params={"since": "yesterday"}).status_code == 422
    # A well-formed but unknown value is just a parameter: nothing matches, nothing breaks.
    assert client.get(f"{PREFIX}/api/comparison", params={"model": "vgg16"}).json()["rows"] == []
    assert client.get(f"{PREFIX}/api/trend", params={"model": "vgg16"}).json()["case"] is None


def add_cpu_suite(engine, run_id: str) -> None:
    """An HPL result (suite cpu) of bare metal and a VM in ``run_id``, three repetitions each."""
    with engine.begin() as conn:
        run_pk = conn.scalar(select(Run.id).where(Run.run_id == run_id))
        envs = dict(conn.execute(select(Environment.platform, Environment.id)).all())
        # Explicit ids, like the generator (which leaves PostgreSQL's sequences behind).
        bench = conn.scalar(select(func.max(Benchmark.id))) + 1
        execution = conn.scalar(select(func.max(Execution.id)))
        sample = conn.scalar(select(func.max(Sample.id)))
        conn.execute(insert(Benchmark).values(id=bench, suite="cpu", name="hpcc", parameters_hash="hpcc-test",
                                              parameters={"ranks": 4}))
        started = datetime(2026, 1, 4, tzinfo=UTC)
        for platform, gflops in (("bare_metal", 100.0), ("virtual_machine", 90.0)):
            for rep in range(3):
                execution, sample = execution + 1, sample + 1
                conn.execute(insert(Execution).values(
                    id=execution, job_id=f"{run_id}-cpu-{platform}-{rep}", run_pk=run_pk,
                    environment_id=envs[platform], benchmark_id=bench, platform=platform, repetition=rep,
                    status="ok", started_at=started, finished_at=started + timedelta(minutes=1), labels={}))
                conn.execute(insert(Sample).values(id=sample, execution_id=execution, ordinal=0, metric="hpl",
                                                   value=gflops + rep, unit="GFLOPS", labels={}))


def test_suite_filter_applies_to_every_view(engine):
    runs = generate_history(engine, runs=4, seed=5)
    add_cpu_suite(engine, runs[1])  # an older run: the latest run has no cpu result
    client = client_for(engine)
    cpu = client.get(f"{PREFIX}/api/comparison", params={"suite": "cpu"}).json()
    # The default selection is the latest run *of the suite*, not the latest run (which has none).
    assert cpu["runs"] == [runs[1]] and {r["metric"] for r in cpu["rows"]} == {"hpl"}
    assert {r["platform"] for r in cpu["rows"]} == {"bare_metal", "virtual_machine"}
    tf = client.get(f"{PREFIX}/api/comparison").json()
    assert tf["runs"] == [runs[-1]] and "hpl" not in {r["metric"] for r in tf["rows"]} and tf["rows"]
    trend = client.get(f"{PREFIX}/api/trend", params={"suite": "cpu"}).json()
    assert trend["metric"] == "hpl" and trend["case"] == "hpcc" and [r["run_id"] for r in trend["runs"]] == [runs[1]]
    assert "alexnet" not in " ".join(trend["cases"])
    cap = client.get(f"{PREFIX}/api/capacity", params={"suite": "cpu"}).json()
    assert cap["rows"] == [] and "suite cpu has none" in cap["table"]
    assert client.get(f"{PREFIX}/api/capacity").json()["rows"]
    options = client.get(f"{PREFIX}/api/options").json()
    assert options["metrics"]["cpu"][0] == {"metric": "hpl", "direction": "higher"}


def test_capacity_per_model_data_and_framework_with_n_interval_and_flags(engine):
    tf = generate_history(engine, runs=3, seed=2, tenants=(2,))
    torch = generate_history(engine, runs=1, seed=3, tenants=(2,), prefix="manual__",
                             parameters={"framework": "PyTorch"}, start=datetime(2026, 3, 1, 2, 0, tzinfo=UTC),
                             repetitions=2)
    client = client_for(engine)
    every = client.get(f"{PREFIX}/api/capacity", params={"runs": tf + torch}).json()["rows"]
    configs = {(r["model"], r["data"], r["framework"]) for r in every}
    # "All models": every model, data kind and framework has its own rows; nothing is averaged.
    assert configs == {(m, d, f) for m in ("alexnet", "resnet50") for d in ("real", "synthetic")
                       for f in ("TensorFlow", "PyTorch")}
    by = {(r["model"], r["data"], r["framework"], r["platform"], r["instances_per_host"]): r for r in every}
    real, synthetic = by[("resnet50", "real", "TensorFlow", "bare_metal", 1)], by[
        ("resnet50", "synthetic", "TensorFlow", "bare_metal", 1)]
    assert real["per_instance"] < 0.97 * synthetic["per_instance"]  # generated: real data 5 % slower
    # Three runs of 3 repetitions: planned on the 3 run means (issue 39), not 9 pooled repetitions.
    assert (real["n"], real["n_of"]) == (3, "runs") and real["runs"] == 3 and real["flags"] == ""
    assert real["per_instance_ci_low"] < real["per_instance"] < real["per_instance_ci_high"]
    shared = by[("resnet50", "real", "TensorFlow", "virtual_machine", 2)]
    assert shared["degradation_n"] == 3 and shared["degradation_ci_low"] < shared["degradation_pct"]
    assert shared["per_host_ci_low"] < shared["per_host"] < shared["per_host_ci_high"]
    # The PyTorch run has two repetitions: its rows say so and state no interval.
    few = by[("resnet50", "real", "PyTorch", "bare_metal", 1)]
    assert few["n"] == 2 and few["per_instance_ci_low"] is None and "too few repetitions (n=2)" in few["flags"]
    page = client.get(f"{PREFIX}/api/capacity", params={"runs": tf + torch}).json()
    assert "too few repetitions (n=2)" in page["table"] and "PyTorch" in page["table"]
    assert page["svg"].count("<svg") == len(configs)  # one density chart per configuration
    one = client.get(f"{PREFIX}/api/capacity", params={"runs": tf, "model": "alexnet", "data": "real",
                                                       "platforms": ["bare_metal", "container_on_vm"]}).json()["rows"]
    assert {(r["model"], r["data"], r["platform"]) for r in one} == {
        ("alexnet", "real", "bare_metal"), ("alexnet", "real", "container_on_vm")}


def test_framework_filter_and_names_in_every_view(engine):
    """Issue 23: the framework filter (``benchmarks.framework``, offered per suite) in the
    comparison, the trend and the capacity view; with several frameworks shown, the charts name
    each case's framework (a TensorFlow case's own name has none)."""
    tf = generate_history(engine, runs=3, seed=7, tenants=(2,))
    torch = generate_history(engine, runs=3, seed=8, tenants=(2,), prefix="manual__",
                             parameters={"framework": "pytorch"})
    generate_history(engine, runs=1, seed=9, tenants=(), prefix="jax__", parameters={"framework": "jax"},
                     start=datetime(2026, 2, 1, 2, 0, tzinfo=UTC))
    add_cpu_suite(engine, tf[-1])
    client = client_for(engine)
    options = client.get(f"{PREFIX}/api/options").json()
    assert options["frameworks"] == {"cpu": [], "tf_cnn": [
        {"value": "jax", "label": "JAX"}, {"value": "pytorch", "label": "PyTorch"},
        {"value": "tensorflow", "label": "TensorFlow"}]}
    page = client.get(f"{PREFIX}/").text
    assert '<select id="framework" name="framework">' in page

    case = {"runs": [tf[-1], torch[-1]], "model": "resnet50", "data": "synthetic", "scenario": "single"}
    both = client.get(f"{PREFIX}/api/comparison", params=case).json()
    assert {r["framework"] for r in both["rows"]} == {"TensorFlow", "PyTorch"}
    assert 'data-group="TensorFlow · resnet50 single synthetic batch 32 · throughput"' in both["svg"]
    assert 'data-group="PyTorch · resnet50 single pytorch synthetic batch 32 · throughput"' in both["svg"]
    torch_only = client.get(f"{PREFIX}/api/comparison", params={**case, "framework": "pytorch"}).json()
    assert torch_only["rows"] and {r["framework"] for r in torch_only["rows"]} == {"PyTorch"}
    by = {(r["metric"], r["platform"]): r for r in torch_only["rows"]}
    assert by[("throughput", "bare_metal")]["verdict"] == "baseline"  # bare metal of the same framework
    assert by[("throughput", "virtual_machine")]["n"] == 3 and by[("throughput", "virtual_machine")]["normalized"] < 1
    assert "data-group=\"resnet50 single pytorch" in torch_only["svg"] and "TensorFlow" not in torch_only["svg"]
    tf_only = client.get(f"{PREFIX}/api/comparison", params={**case, "framework": "tensorflow"}).json()
    assert tf_only["rows"] and {r["framework"] for r in tf_only["rows"]} == {"TensorFlow"}
    assert {r["n"] for r in tf_only["rows"]} == {3}  # one run's three repetitions: nothing of PyTorch's mixed in

    trend_query = {"runs": tf + torch, "model": "resnet50", "data": "synthetic", "scenario": "single",
                   "metric": "throughput"}
    trend = client.get(f"{PREFIX}/api/trend", params=trend_query).json()
    assert set(trend["case_frameworks"].values()) == {"TensorFlow", "PyTorch"}
    assert f'trend: {trend["case"]} ({trend["framework"]})' in trend["svg"]
    torch_trend = client.get(f"{PREFIX}/api/trend", params={**trend_query, "framework": "pytorch"}).json()
    assert torch_trend["cases"] == ["resnet50 single pytorch synthetic batch 32"]
    assert [r["run_id"] for r in torch_trend["runs"]] == torch and torch_trend["framework"] == "PyTorch"
    assert "(PyTorch)" not in torch_trend["svg"]  # one framework: its name is in the case already

    capacity = client.get(f"{PREFIX}/api/capacity", params={"runs": tf + torch, "model": "resnet50"}).json()
    assert {r["framework"] for r in capacity["rows"]} == {"TensorFlow", "PyTorch"}
    assert "· PyTorch ·" in capacity["svg"] and "· TensorFlow ·" in capacity["svg"]  # chart per framework
    torch_capacity = client.get(f"{PREFIX}/api/capacity", params={"runs": tf + torch, "model": "resnet50",
                                                                  "framework": "pytorch"}).json()
    assert torch_capacity["rows"] and {r["framework"] for r in torch_capacity["rows"]} == {"PyTorch"}
    assert {r["instances_per_host"] for r in torch_capacity["rows"]} == {1, 2}

    for bad in ("PyTorch", "pytorch' OR '1'='1"):
        assert client.get(f"{PREFIX}/api/comparison", params={"framework": bad}).status_code == 422
    assert client.get(f"{PREFIX}/api/comparison", params={**case, "framework": "mxnet"}).json()["rows"] == []
