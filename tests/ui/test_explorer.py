"""The explorer's API on a generated multi-run warehouse (SQLite and PostgreSQL), mounted under a
prefix like Airflow mounts it."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from dlbench.ui.app import create_app
from tools.ui_history import Step, generate_history

PREFIX = "/plugins/dlbench"


def client_for(engine) -> TestClient:
    root = FastAPI()
    root.mount(PREFIX, create_app(engine))
    return TestClient(root)


def test_explorer_api_on_generated_history(engine):
    from sqlalchemy import update

    from dlbench.warehouse.models import Run

    runs = generate_history(engine, runs=10, step=Step("virtual_machine", 7, 0.8), seed=3)
    with engine.begin() as conn:  # the load task records Airflow's own run id in the run's tags
        conn.execute(update(Run).where(Run.run_id == runs[-1]).values(
            tags={"dag_run_id": "scheduled__2026-03-08T02:00:00+00:00"}))
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
    assert vm["normalized"] < 0.8 and vm["verdict"] == "worse" and vm["ci_low"] < vm["normalized"] < vm["ci_high"]
    assert "<svg" in cmp["svg"] and 'id="comparison-table"' in cmp["table"]
    assert 'href="../dags/dlbench_benchmark/runs/scheduled__2026-03-08T02%3A00%3A00%2B00%3A00"' in cmp["links"]
    two = client.get(f"{PREFIX}/api/comparison", params={"runs": runs[-2:], "model": "resnet50",
                                                         "data": "synthetic", "scenario": "single",
                                                         "platforms": ["bare_metal"]}).json()
    assert {r["platform"] for r in two["rows"]} == {"bare_metal"} and two["rows"][0]["n"] == 6
    ranged = client.get(f"{PREFIX}/api/comparison", params={"since": "2026-01-01", "until": "2026-01-20",
                                                             "model": "alexnet"}).json()
    assert ranged["rows"] and all(r["n"] == 3 * 3 for r in ranged["rows"])  # 3 scheduled weeks x 3 reps

    trend = client.get(f"{PREFIX}/api/trend", params={"model": "resnet50", "data": "synthetic",
                                                      "scenario": "single", "metric": "throughput"}).json()
    assert trend["case"] == "resnet50 single synthetic batch 32" and len(trend["runs"]) == 10
    assert [x for x, _ in trend["change_points"]["virtual_machine"]] == [7]
    assert trend["change_points"]["bare_metal"] == []
    assert 'class="change-point"' in trend["svg"]
    assert f'href="../dags/dlbench_benchmark/runs/{runs[0]}"' in trend["links"]

    cap = client.get(f"{PREFIX}/api/capacity", params={"model": "resnet50", "data": "real"}).json()
    assert cap["hardware"] == "NVIDIA V100" and len(cap["rows"]) == 4 * 3
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
