"""The serving suite's report, read from a real SQLite warehouse: documents written by the
workload's own recording code (``add_point``, ``add_capacity``) for two platforms and three
repetitions, loaded by the product's load path; the capacity table and the latency curves checked
against numbers computed here."""

from __future__ import annotations

import math
import statistics

import pytest

from dlbench.reports import build_report, text_table
from dlbench.reports.sections import serving as section
from dlbench.reports.sections.base import RunView
from dlbench.warehouse import db
from dlbench.warehouse.load import RunInfo, load_documents
from dlbench.workloads.result import Benchmark, Environment, Platform, ResultDocument
from dlbench.workloads.serving.capacity import Bound, Capacity
from dlbench.workloads.serving.load import LATENCIES, PERCENTILES, LoadPoint, PointResult
from dlbench.workloads.serving.main import add_capacity, add_point

RUN = "serve41"
SPEED = {"bare_metal": 1.0, "container_on_bare_metal": 0.9}
"""The container serves 10 % fewer requests at the target, at every repetition."""
CAPACITY = (20.0, 20.1, 19.9)
"""Bare metal's capacity per repetition (requests/s)."""
RATES = (10.0, 20.0, 30.0)
PARAMETERS = {"profile": "smoke", "scenario": "single", "hidden_size": 256, "precision": "bf16", "input_tokens": 64,
              "output_tokens": 32, "ttft_p99_ms": 250.0, "tpot_p99_ms": 25.0}


def ttft_ms(rate: float, capacity: float) -> float:
    """A TTFT p99 that grows with the load and crosses 250 ms above the capacity."""
    return 100.0 * rate / capacity * 2.0


def point(load: LoadPoint, ttft: float, tokens: float) -> PointResult:
    percentiles = {name: {p: (ttft if name == "ttft" else 10.0) * (0.5 + p / 200) for p in PERCENTILES}
                   for name in LATENCIES}
    percentiles["ttft"][99] = ttft
    return PointResult(point=load, completed=8, failed=0, duration=1.0, request_throughput=float(load.rate or 1),
                       output_throughput=tokens, goodput=float(load.rate or 1), percentiles_ms=percentiles)


def documents() -> list[ResultDocument]:
    docs = []
    for rep, base in enumerate(CAPACITY):
        for platform, speed in SPEED.items():
            capacity = base * speed
            doc = ResultDocument(job_id=f"s-{platform}-{rep}", run_id=RUN, repetition=rep,
                                 benchmark=Benchmark(suite="serving", name="tiny-llama", parameters=PARAMETERS),
                                 environment=Environment(hostname=f"h-{platform[:4]}", platform=Platform(platform)),
                                 labels={"framework": "vllm", "host_cpus": "16", "host_steal_share": "0.0",
                                         "host_other_cpu_share": "0.01"})
            doc.add("startup_time", 25.0 / speed, "s")
            by_rate = {}
            for rate in RATES:
                by_rate[rate] = point(LoadPoint(rate=rate), ttft_ms(rate, capacity), tokens=rate * 32)
                add_point(doc, by_rate[rate])
            met = [r for r in RATES if by_rate[r].percentiles_ms["ttft"][99] <= 250.0]
            # What the search would have found: the bisection stops at the capacity itself.
            by_rate[capacity] = point(LoadPoint(rate=capacity), 250.0, tokens=capacity * 32)
            add_capacity(doc, Capacity(rate=capacity, bound=Bound.MEASURED, missed=30.0,
                                       tried=tuple((r, r in met) for r in RATES) + ((capacity, True),)), by_rate)
            docs.append(doc)
    return docs


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

    curves = section.latency_curves(view.frame, "ttft_p99")
    assert list(curves) == ["bare_metal", "container_on_bare_metal"]
    for platform, speed in SPEED.items():
        # the swept rates and each repetition's own capacity point
        swept = dict(curves[platform])
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
