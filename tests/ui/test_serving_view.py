"""The explorer's serving view (issue 41): latency against the offered load over the selected runs,
from a real SQLite warehouse holding two serving runs written by the workload's own recording code
(tests/support/serving.py), served by the explorer's app under Airflow's prefix. The numbers are
checked against the documents, computed here."""

from __future__ import annotations

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
