"""The explorer's serving view (issue 41): latency against the offered load over the selected runs,
from a real SQLite warehouse holding two serving runs written by the workload's own recording code
(tests/support/serving.py), served by the explorer's app under Airflow's prefix. The numbers are
checked against the documents, computed here."""

from __future__ import annotations

import math
import statistics

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from dlbench.ui.app import create_app
from dlbench.warehouse import db
from dlbench.warehouse.load import RunInfo, load_documents
from tests.support.serving import CAPACITY, RATES, RUN, SPEED, documents, ttft_ms

PREFIX = "/plugins/dlbench"
LATER = f"{RUN}-later"


@pytest.fixture
def client(tmp_path):
    engine = db.upgrade(db.engine_for(f"sqlite:///{tmp_path / 'w.db'}"))
    load_documents(engine, documents(), RunInfo(run_id=RUN, profile="smoke", provider="local"))
    later = [doc.model_copy(update={"run_id": LATER, "job_id": f"{doc.job_id}-later"}) for doc in documents()]
    load_documents(engine, later, RunInfo(run_id=LATER, profile="smoke", provider="local"))
    root = FastAPI()
    root.mount(PREFIX, create_app(engine))
    yield TestClient(root)
    engine.dispose()


def test_the_curves_pool_the_selected_runs_and_draw_the_target(client):
    both = client.get(f"{PREFIX}/api/serving", params={"runs": [RUN, LATER]}).json()
    assert both["runs"] == [RUN, LATER] and both["target"] == {"ttft_p99_ms": 250.0, "tpot_p99_ms": 25.0}
    ttft = next(c for c in both["curves"] if c["metric"] == "ttft_p99")
    assert list(ttft["points"]) == ["bare_metal", "container_on_bare_metal"]  # the report's order
    for platform, speed in SPEED.items():
        swept = {p["rate"]: p for p in ttft["points"][platform]}
        for rate in RATES:
            # every repetition of both runs at that rate: 3 repetitions x 2 runs
            assert swept[rate]["n"] == 2 * len(CAPACITY)
            assert swept[rate]["ms"] == pytest.approx(statistics.fmean(ttft_ms(rate, c * speed) for c in CAPACITY))
    # flat at the target across every rate drawn (the sweep's and each repetition's capacity point)
    assert ttft["series"]["target"] == [[min(RATES), 250.0], [max(RATES), 250.0]]
    assert '<svg' in both["svg"] and 'id="serving-chart-ttft_p99"' in both["svg"]
    table = both["table"]
    assert 'id="serving-table"' in table and "missed" in table and "met" in table

    one = client.get(f"{PREFIX}/api/serving", params={"runs": [RUN]}).json()
    first = next(c for c in one["curves"] if c["metric"] == "ttft_p99")
    assert {p["n"] for points in first["points"].values() for p in points if p["rate"] in RATES} == {len(CAPACITY)}


def test_the_default_is_the_latest_serving_run_and_filters_narrow_it(client):
    latest = client.get(f"{PREFIX}/api/serving").json()
    assert latest["runs"] == [LATER]
    # another suite's model in the page's filter does not empty the serving view; the platforms do narrow it
    mixed = client.get(f"{PREFIX}/api/serving", params={"suite": "tf_cnn", "model": "resnet50",
                                                       "platforms": ["bare_metal"]}).json()
    assert [list(c["points"]) for c in mixed["curves"]] == [["bare_metal"], ["bare_metal"]]
    none = client.get(f"{PREFIX}/api/serving", params={"runs": ["no-such-run"]}).json()
    assert none["curves"] == [] and "no serving run in this selection" in none["table"]
    page = client.get(f"{PREFIX}/").text
    assert 'id="serving-chart-box"' in page and "api/serving?" in page


def test_the_capacity_answer_pools_the_selected_runs_and_sizes_the_typed_demand(client):
    """The report's capacity answer over the runs a planner selects, and the instances each platform
    needs for the demand typed in the page (the report sizes for 100 requests/s)."""
    both = client.get(f"{PREFIX}/api/serving", params={"runs": [RUN, LATER], "demand": 250}).json()
    assert both["demand"] == 250
    lines = {line["platform"]: line for line in both["capacity"]}
    assert list(lines) == ["bare_metal", "container_on_bare_metal"]  # the report's order
    bm, ct = lines["bare_metal"], lines["container_on_bare_metal"]
    mean = statistics.fmean(CAPACITY)
    assert bm["capacity"] == pytest.approx(mean) and ct["capacity"] == pytest.approx(mean * SPEED[ct["platform"]])
    assert bm["instances"] == math.ceil(250 / mean) == 13 and ct["instances"] == math.ceil(250 / 18.0) == 14
    assert bm["ratio"] == "baseline" and ct["normalized"] == pytest.approx(0.9)
    # across runs the run is the unit (run-to-run variance, docs/statistics.md): two runs are too few
    assert bm["n"] == ct["n"] == 2 and ct["verdict"] == "too_few_repetitions" and ct["normalized_ci_low"] is None
    assert bm["answer"] == ct["answer"] == "measured" and "TTFT p99 ≤ 250 ms" in bm["target"]
    table = both["capacity_table"]
    assert 'id="serving-capacity-table"' in table and "Instances for 250 requests/s" in table
    assert "⌈250 / capacity⌉" in table and "<td>13</td>" in table and "<td>14</td>" in table
    # one run: its repetitions, with the interval and verdict its report states; the report's demand
    one = {line["platform"]: line for line in client.get(f"{PREFIX}/api/serving", params={"runs": [RUN]}).json()[
        "capacity"]}
    bm, ct = one["bare_metal"], one["container_on_bare_metal"]
    assert bm["n"] == ct["n"] == len(CAPACITY) and ct["normalized_ci_low"] < 0.9 < ct["normalized_ci_high"]
    assert ct["verdict"] == "worse" and ct["ratio"].startswith("×0.900 [")
    assert bm["instances"] == math.ceil(100 / mean) == 5 and ct["instances"] == 6
    # a demand that is not a positive number is refused
    assert client.get(f"{PREFIX}/api/serving", params={"demand": 0}).status_code == 422
    assert client.get(f"{PREFIX}/api/serving", params={"runs": ["no-such-run"]}).json()["capacity"] == []
    page = client.get(f"{PREFIX}/").text
    assert 'id="demand"' in page and 'id="serving-capacity"' in page
    assert 'value="100"' in page and 'const FLEET_RATE = "100";' in page and "{{" not in page  # the report's
