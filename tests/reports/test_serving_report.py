"""The serving suite's report, read from a real SQLite warehouse: documents written by the
workload's own recording code (``add_point``, ``add_capacity``) for two platforms and three
repetitions, loaded by the product's load path; the capacity table and the latency curves checked
against numbers computed here."""

from __future__ import annotations

import math
import statistics

import pytest

from dlbench.reports import build_report, text_table
from dlbench.reports.analysis import serving as latency
from dlbench.reports.sections import serving as section
from dlbench.reports.sections.base import RunView
from dlbench.warehouse import db
from dlbench.warehouse.load import RunInfo, load_documents
from tests.support.serving import CAPACITY, RATES, RUN, SPEED, documents, ttft_ms


@pytest.fixture
def run(tmp_path):
    engine = db.upgrade(db.engine_for(f"sqlite:///{tmp_path / 'w.db'}"))
    load_documents(engine, documents(), RunInfo(run_id=RUN, profile="smoke", provider="local"))
    yield engine, tmp_path
    engine.dispose()


def test_the_capacity_table_and_the_curves_are_the_documents(run):
    engine, tmp_path = run
    view = RunView(engine, RUN, tmp_path)
    lines = {line.platform: line for line in section.capacity_lines(view)}
    assert set(lines) == set(SPEED)
    bm, ct = lines["bare_metal"], lines["container_on_bare_metal"]
    assert bm.capacity == pytest.approx(statistics.fmean(CAPACITY))
    assert ct.capacity == pytest.approx(statistics.fmean(c * 0.9 for c in CAPACITY))
    assert ct.normalized == pytest.approx(0.9) and ct.low < 0.9 < ct.high and ct.verdict == "worse"
    assert bm.bounds == ct.bounds == ("measured",)
    assert bm.instances_per_fleet_rate == math.ceil(100 / statistics.fmean(CAPACITY)) == 5
    assert ct.instances_per_fleet_rate == math.ceil(100 / 18.0) == 6
    assert ct.tokens == pytest.approx(statistics.fmean(c * 0.9 * 32 for c in CAPACITY))
    assert bm.target == "TTFT p99 ≤ 250 ms, TPOT p99 ≤ 25 ms" and bm.n == ct.n == 3

    curves = latency.latency_points(view.frame, "ttft_p99")
    assert list(curves) == ["bare_metal", "container_on_bare_metal"]
    for platform, speed in SPEED.items():
        # the swept rates and each repetition's own capacity point
        swept = {point.rate: point.ms for point in curves[platform]}
        for rate in RATES:
            expected = statistics.fmean(ttft_ms(rate, c * speed) for c in CAPACITY)
            assert swept[rate] == pytest.approx(expected)


def test_the_page_and_the_text_say_it(run):
    engine, tmp_path = run
    page = build_report(engine, RUN, tmp_path / "report").read_text()
    assert "Serving capacity at the latency target" in page and "href='#serving'" in page
    assert "id=\"serving-ttft_p99\"" in page or "id='serving-ttft_p99'" in page
    assert "instances per 100 requests/s" in page
    text = text_table(engine, RUN, tmp_path / "report")
    assert "Serving capacity (TTFT p99 ≤ 250 ms, TPOT p99 ≤ 25 ms; instances per 100 requests/s):" in text
    assert "container_on_bare_metal: 18 requests/s (measured), ×0.900" in text and "; 6 instances" in text
