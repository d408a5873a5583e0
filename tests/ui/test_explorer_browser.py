"""The explorer in a real headless browser (Debian's chromium over the DevTools protocol), served by
uvicorn under a prefix, on a warehouse with generated multi-run history, checked on what is drawn:
every point, bar and interval whisker inside its chart's plot area, one colour per platform in
every view (the palette's), a direction marker and one direction per comparison chart, the ⚠ flags,
a non-empty default trend, no horizontal scrolling at 1280 px, and filters that survive a reload of
the page's address. Changing a filter changes the charts, and the console stays free of errors."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy import select, update

from dlbench.reports.analysis.metrics import Direction, direction
from dlbench.reports.rendering.charts import Bar, bar_chart, line_chart
from dlbench.reports.rendering.palette import platform_color
from dlbench.ui.app import create_app
from dlbench.warehouse.models import Execution, Run, Sample
from tests.support.prereqs import require
from tests.ui.cdp import Browser, chromium_binary
from tools.ui_history import PLATFORMS, Step, generate_history

PREFIX = "/plugins/dlbench"
WIDTH = 1280

# Every data mark of every chart on the page against its own chart's plot area (screen pixels,
# half a pixel of rounding allowed). Returns {chart id: {"marks": n, "outside": [...]}}.
MARKS_INSIDE = """(() => {
  const out = {};
  for (const svg of document.querySelectorAll("svg.chart")) {
    const area = svg.querySelector("rect.plot-area");
    if (!area) continue;
    const p = area.getBoundingClientRect();
    const marks = svg.querySelectorAll(".point, .bar, .whisker, polyline.series");
    const outside = [];
    for (const m of marks) {
      const r = m.getBoundingClientRect();
      if (r.left < p.left - 0.5 || r.right > p.right + 0.5 || r.top < p.top - 0.5 || r.bottom > p.bottom + 0.5)
        outside.push(m.getAttribute("class") + " " + (m.dataset.series || "") + " " + (m.dataset.group || "")
                     + " top " + r.top.toFixed(1) + " (plot " + p.top.toFixed(1) + ".." + p.bottom.toFixed(1) + ")");
    }
    out[svg.id] = {marks: marks.length, outside: outside};
  }
  return out;
})()"""

# Per chart, each series' colour: the fill of bars, points and legend swatches, the stroke of lines.
COLOURS = """(() => {
  const out = {};
  for (const svg of document.querySelectorAll("svg.chart")) {
    const seen = {};
    for (const m of svg.querySelectorAll(".bar, .point, .legend-swatch, polyline.series")) {
      const colour = m.tagName === "polyline" ? m.getAttribute("stroke") : m.getAttribute("fill");
      (seen[m.dataset.series] = seen[m.dataset.series] || []).push(colour);
    }
    out[svg.id] = Object.fromEntries(Object.entries(seen).map(([k, v]) => [k, [...new Set(v)]]));
  }
  return out;
})()"""


@pytest.fixture
def served(tmp_path):
    from dlbench.warehouse import db

    engine = db.upgrade(db.engine_for(f"sqlite:///{tmp_path / 'warehouse.db'}"))
    # VMs 20 % slower from run 7 on: a level of five runs, the trend's change point (E-divisive
    # needs 3 runs a side; a step of containers on VMs would be masked by the manual run below).
    runs = generate_history(engine, runs=12, step=Step("virtual_machine", 7, 0.8), seed=11)
    # The latest run is a manual one (not scheduled: the trend must show it by default) where
    # containers on VMs ran 1.95x faster: ×BM about 1.7, the bar the old axis cut at 1.5.
    runs += generate_history(engine, runs=1, step=Step("container_on_vm", 0, 1.95), seed=12, prefix="manual__",
                             start=datetime(2026, 3, 29, 2, 0, tzinfo=UTC))
    with engine.begin() as conn:  # and containers on bare metal were noisy in it (CV about 25 %): flagged
        noisy = select(Execution.id, Execution.repetition).join(Run, Run.id == Execution.run_pk).where(
            Run.run_id == runs[-1], Execution.platform == "container_on_bare_metal")
        for execution, rep in conn.execute(noisy).all():
            conn.execute(update(Sample).where(Sample.execution_id == execution, Sample.metric == "throughput")
                         .values(value=Sample.value * (0.75 + 0.25 * rep)))
    with serving(engine) as url:
        yield url, runs


@contextmanager
def serving(engine) -> Iterator[str]:
    """The app on ``engine``, served by uvicorn under :data:`PREFIX` on a free port: its URL."""
    root = FastAPI()
    root.mount(PREFIX, create_app(engine))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(root, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}{PREFIX}/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def browser():
    binary = chromium_binary()
    if binary is None:
        print("\nskipping the browser test: no chromium binary (Debian: apt-get install chromium; make prereqs)")
    require(binary is not None, "chromium is not installed (Debian: apt-get install chromium; make prereqs)")
    instance = Browser(binary)
    instance.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False)
    yield instance
    instance.close()


def charts(browser: Browser, box: str) -> str:
    """Every chart of a view, as drawn."""
    return browser.evaluate(f"Array.from(document.querySelectorAll('#{box} svg')).map((s) => s.outerHTML).join('')")


def updates(browser: Browser) -> int:
    return int(browser.evaluate("document.body.dataset.updates") or 0)


def change(browser: Browser, expression: str) -> None:
    """Run ``expression`` (it changes a filter and fires its change event); wait for the refresh."""
    before = updates(browser)
    browser.evaluate(expression)
    browser.wait_for(f"Number(document.body.dataset.updates) > {before}")


def open_page(browser: Browser, url: str) -> None:
    browser.call("Page.navigate", url=url)
    browser.wait_for("document.body && Number(document.body.dataset.updates) >= 1")


def assert_drawn_inside(browser: Browser) -> dict:
    found = browser.evaluate(MARKS_INSIDE)
    assert found, "no chart with a plot area on the page"
    assert {chart: f["outside"] for chart, f in found.items() if f["outside"]} == {}
    return found


def test_the_mark_check_fails_on_a_mark_outside_its_axes(browser):
    """The drawing assertions can fail: a point above the axis, as the old trend drew 33.5 and
    34.1 on an axis ending at 30, is reported; the same values drawn by charts.py are inside."""
    browser.call("Page.navigate", url="about:blank")
    browser.wait_for("document.readyState === 'complete'")
    broken = ('<svg class="chart" id="broken" width="300" height="200"><rect class="plot-area" x="40" y="20" '
              'width="200" height="150"/><circle class="point" data-series="bare_metal" cx="100" cy="10" r="3"/></svg>')
    drawn = (line_chart({"bare_metal": [(0, 33.5), (1, 34.1)]}, chart_id="trend-values")
             + bar_chart(["resnet50"], {"container_on_vm": [Bar(1.70, 1.61, 1.79, "noisy: CV 9%")]}, reference=1.0,
                         direction=Direction.HIGHER, chart_id="bar-values"))
    browser.evaluate(f"document.body.innerHTML = {json.dumps(broken + drawn)}")
    found = browser.evaluate(MARKS_INSIDE)
    assert len(found["broken"]["outside"]) == 1 and found["broken"]["outside"][0].startswith("point bare_metal")
    assert found["trend-values"] == {"marks": 3, "outside": []}  # two points and their line
    assert found["bar-values"] == {"marks": 2, "outside": []}  # the bar and its whisker
    top_tick = browser.evaluate("Math.max(...Array.from(document.querySelectorAll('#trend-values text'))"
                                ".map((t) => Number(t.textContent)).filter((v) => !isNaN(v)))")
    assert top_tick >= 34.1


def test_explorer_draws_the_truth_in_headless_chromium(served, browser):
    url, runs = served
    open_page(browser, url)
    assert browser.evaluate("document.title") == "dlbench results explorer"
    assert browser.evaluate("document.getElementById('status').textContent") == f"runs: {runs[-1]}"
    assert browser.evaluate("document.querySelectorAll('#runs option').length") == len(runs)
    assert browser.evaluate("document.querySelectorAll('#platforms input').length") == 4

    # Every point, bar and whisker inside its axes, in every view; the 1.7 bar and its interval too.
    found = assert_drawn_inside(browser)
    views = {"comparison": ["comparison-chart-higher", "comparison-chart-lower"], "trend": ["trend-chart"],
             "capacity": [c for c in found if c.startswith("capacity-chart-")]}
    assert all(found[c]["marks"] > 0 for charts_ in views.values() for c in charts_), found
    assert len(views["capacity"]) == 4  # alexnet and resnet50 x real and synthetic: never averaged
    tall = browser.evaluate("Array.from(document.querySelectorAll('#comparison-chart-higher rect.bar'))"
                            ".map((b) => b.querySelector('title').textContent).filter((t) => /: 1\\.[6-9]/.test(t))")
    assert tall and all("container_on_vm" in t for t in tall)

    # One colour per platform, in every view, the palette's.
    colours = browser.evaluate(COLOURS)
    for view, ids in views.items():
        for platform in PLATFORMS:
            for chart_id in ids:
                assert colours[chart_id].get(platform) == [platform_color(platform)], (view, chart_id, platform)

    # A direction marker on each comparison chart, and only metrics of that direction in it.
    for way in Direction:
        marker = browser.evaluate(f"document.querySelector('#comparison-chart-{way.value} .direction').textContent")
        assert marker == ("↑ higher is better" if way is Direction.HIGHER else "↓ lower is better")
        metrics = set(browser.evaluate(f"Array.from(document.querySelectorAll('#comparison-chart-{way.value} "
                                       "rect.bar')).map((b) => b.dataset.group.split(' · ').pop())"))
        assert metrics and {direction(m, "") for m in metrics} == {way}, (way, metrics)

    # The report's flags: the noisy platform is flagged in the chart and the tables.
    flagged = browser.evaluate("Array.from(document.querySelectorAll('#comparison-chart-higher text.flag'))"
                               ".map((t) => t.dataset.series)")
    assert "container_on_bare_metal" in flagged
    assert "⚠ noisy: CV" in browser.evaluate("document.getElementById('comparison').textContent")
    assert browser.evaluate("document.querySelectorAll('#capacity .flag').length") > 0

    # The default trend is not empty: the latest runs, the manual one included, with the change point.
    assert browser.evaluate("document.querySelectorAll('#trend-chart .point').length") >= 4 * 13
    links = browser.evaluate("Array.from(document.querySelectorAll('#trend-links a.dagrun'))"
                             ".map((a) => [a.textContent, a.target, a.href])")
    assert [text for text, _, _ in links] == runs and {target for _, target, _ in links} == {"_top"}
    assert links[0][2].startswith(url.rsplit("/dlbench/", 1)[0] + "/dags/dlbench_benchmark/runs/")
    assert browser.evaluate("document.querySelectorAll('#trend-chart .change-point').length") >= 1

    # A 1280 px window: no horizontal scrolling.
    assert browser.evaluate("document.documentElement.scrollWidth") <= WIDTH

    # Filters change every view and land in the address.
    first = {box: charts(browser, box) for box in ("comparison-chart-box", "trend-chart-box", "capacity-chart-box")}
    change(browser, "const m = document.getElementById('model'); m.value = 'resnet50';"
                    "m.dispatchEvent(new Event('change'))")
    second = {box: charts(browser, box) for box in first}
    assert all(second[box] != first[box] for box in first)
    text = browser.evaluate("document.getElementById('comparison').textContent")
    assert "resnet50" in text and "alexnet" not in text
    assert "alexnet" not in browser.evaluate("document.getElementById('capacity').textContent")
    change(browser, "const c = document.querySelector('#platforms input[value=virtual_machine]');"
                    "c.checked = false; c.dispatchEvent(new Event('change'))")
    change(browser, "const s = document.getElementById('scenario'); s.value = 'single';"
                    "s.dispatchEvent(new Event('change'))")
    assert browser.evaluate("document.querySelectorAll('#trend-chart polyline.series').length") == 3
    assert "virtual_machine" not in browser.evaluate("document.getElementById('comparison').textContent")
    assert "virtual_machine" not in browser.evaluate("document.getElementById('capacity').textContent")
    assert_drawn_inside(browser)
    shared = browser.evaluate("location.href")
    assert "model=resnet50" in shared and "scenario=single" in shared and "platforms=bare_metal" in shared
    assert "platforms=virtual_machine" not in shared
    assert browser.evaluate("document.getElementById('share').href") == shared
    drawn = {box: charts(browser, box) for box in first}

    # The shared address restores the same view in a fresh page.
    open_page(browser, shared)
    assert browser.evaluate("document.getElementById('model').value") == "resnet50"
    assert browser.evaluate("document.getElementById('scenario').value") == "single"
    assert browser.evaluate("Array.from(document.querySelectorAll('#platforms input:checked')).map((c) => c.value)"
                            ) == ["bare_metal", "container_on_bare_metal", "container_on_vm"]
    assert {box: charts(browser, box) for box in first} == drawn
    assert browser.evaluate("location.href") == shared

    change(browser, "const r = document.getElementById('runs'); r.options[3].selected = true;"
                    "r.options[4].selected = true; r.dispatchEvent(new Event('change'))")
    assert browser.evaluate("document.getElementById('status').textContent") == f"runs: {runs[-4]}, {runs[-5]}"
    assert browser.evaluate("new URLSearchParams(location.search).getAll('runs')") == [runs[-4], runs[-5]]

    # Pin a baseline from the page.
    browser.evaluate("document.getElementById('pin-run').value = " + repr(runs[1]))
    browser.evaluate("document.getElementById('pin-button').click()")
    browser.wait_for(f"document.getElementById('pins').textContent.includes('{runs[1]}')")
    assert browser.errors() == []


def test_the_framework_filter_and_names_in_chromium(tmp_path, browser):
    """Issue 23: TensorFlow and PyTorch runs side by side. Every comparison bar's group names its
    framework (the series stay the platforms, in the palette's colours), the trend's cases name
    theirs; picking PyTorch leaves only PyTorch in every view and lands in the address, which
    restores the same view in a fresh page."""
    from dlbench.warehouse import db

    engine = db.upgrade(db.engine_for(f"sqlite:///{tmp_path / 'warehouse.db'}"))
    tf = generate_history(engine, runs=3, seed=21, tenants=(2,))
    torch = generate_history(engine, runs=3, seed=22, tenants=(2,), prefix="manual__",
                             parameters={"framework": "pytorch"}, start=datetime(2026, 2, 1, 2, 0, tzinfo=UTC))
    with serving(engine) as url:
        open_page(browser, f"{url}?runs={tf[-1]}&runs={torch[-1]}&model=resnet50&scenario=single")
        assert browser.evaluate("Array.from(document.querySelectorAll('#framework option'))"
                                ".map((o) => [o.value, o.textContent])") == [
            ["", "all frameworks"], ["pytorch", "PyTorch"], ["tensorflow", "TensorFlow"]]
        groups = set(browser.evaluate("Array.from(document.querySelectorAll('#comparison-chart-box rect.bar'))"
                                      ".map((b) => b.dataset.group)"))
        assert groups and {g.split(" · ")[0] for g in groups} == {"TensorFlow", "PyTorch"}
        colours = browser.evaluate(COLOURS)
        for chart in ("comparison-chart-higher", "comparison-chart-lower"):
            assert colours[chart] == {p: [platform_color(p)] for p in PLATFORMS}, chart
        cases = browser.evaluate("Array.from(document.querySelectorAll('#case option')).map((o) => o.textContent)")
        assert {c.rsplit(" · ", 1)[1] for c in cases} == {"TensorFlow", "PyTorch"}
        assert "PyTorch" in browser.evaluate("document.getElementById('capacity').textContent")
        assert_drawn_inside(browser)

        change(browser, "const f = document.getElementById('framework'); f.value = 'pytorch';"
                        "f.dispatchEvent(new Event('change'))")
        for box in ("comparison", "capacity"):
            text = browser.evaluate(f"document.getElementById('{box}').textContent")
            assert "PyTorch" in text and "TensorFlow" not in text, box
        groups = set(browser.evaluate("Array.from(document.querySelectorAll('#comparison-chart-box rect.bar'))"
                                      ".map((b) => b.dataset.group)"))
        assert groups and all(g.startswith("resnet50 single pytorch") for g in groups)
        assert sorted(browser.evaluate("Array.from(document.querySelectorAll('#case option')).map((o) => o.value)")
                      ) == ["resnet50 single pytorch real batch 32", "resnet50 single pytorch synthetic batch 32"]
        shared = browser.evaluate("location.href")
        assert "framework=pytorch" in shared
        drawn = {box: charts(browser, box) for box in ("comparison-chart-box", "trend-chart-box", "capacity-chart-box")}

        open_page(browser, shared)
        assert browser.evaluate("document.getElementById('framework').value") == "pytorch"
        assert {box: charts(browser, box) for box in drawn} == drawn
        assert browser.errors() == []


def test_the_serving_capacity_sizes_the_demand_typed_in_chromium(tmp_path, browser):
    """Issue 41: the serving view's capacity table answers "instances of each platform for R
    requests/s": typing R refreshes the instances, lands in the address, and a fresh page from
    that address shows the same answer."""
    from dlbench.warehouse import db
    from dlbench.warehouse.load import RunInfo, load_documents
    from tests.support.serving import RUN, documents

    engine = db.upgrade(db.engine_for(f"sqlite:///{tmp_path / 'warehouse.db'}"))
    load_documents(engine, documents(), RunInfo(run_id=RUN, profile="smoke", provider="local"))
    rows = "Array.from(document.querySelectorAll('#serving-capacity-table tr')).slice(1).map((r) => " \
           "Array.from(r.cells).map((c) => c.textContent))"
    with serving(engine) as url:
        open_page(browser, url)
        first = browser.evaluate(rows)
        # bare metal 20 requests/s, the container 18: 100 requests/s need 5 and 6 instances
        assert [(r[1], r[-2]) for r in first] == [("bare_metal", "5"), ("container_on_bare_metal", "6")]
        change(browser, "const d = document.getElementById('demand'); d.value = '250';"
                        "d.dispatchEvent(new Event('change'))")
        assert [(r[1], r[-2]) for r in browser.evaluate(rows)] == [("bare_metal", "13"),
                                                                   ("container_on_bare_metal", "14")]
        assert "Instances for 250 requests/s" in browser.evaluate(
            "document.getElementById('serving-capacity').textContent")
        shared = browser.evaluate("location.href")
        assert "demand=250" in shared
        open_page(browser, shared)
        assert browser.evaluate("document.getElementById('demand').value") == "250"
        assert [r[-2] for r in browser.evaluate(rows)] == ["13", "14"]
        assert browser.errors() == []
