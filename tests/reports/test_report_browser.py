"""The written report.html in a real headless Chromium (Debian's ``chromium`` over the DevTools
protocol) at 1280 px: the page never scrolls sideways, every bar and error bar of the study
figures lies inside its axes, the error bars are the tables' intervals (none where the tables
show none), each platform's colour is the palette's everywhere, and the legends list only the
platforms that ran. The PNG charts cannot be inspected in the browser, so their drawing data is
checked instead (:func:`dlbench.reports.rendering.figures.chart_data`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from dlbench.reports.analysis.compare import samples_frame, statistics
from dlbench.reports.rendering import palette
from dlbench.reports.rendering.figures import chart_data
from dlbench.reports.sections import scenarios
from dlbench.warehouse import db
from tests.reports.demo_run import PLATFORMS, RUN, build
from tests.support.prereqs import require
from tests.ui.cdp import Browser, chromium_binary

WIDTH = 1280


def rgb(color: str) -> str:
    """``#4c72b0`` as the browser computes it: ``rgb(76, 114, 176)``."""
    value = color.lstrip("#")
    return "rgb({}, {}, {})".format(*(int(value[i:i + 2], 16) for i in (0, 2, 4)))


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, Any]:
    """The demo run's report (three platforms ran; container_on_vm was asked for and only skipped)
    and its comparison, computed from the same warehouse."""
    out = tmp_path_factory.mktemp("demo")
    page = build(out)
    engine = db.engine_for(f"sqlite:///{out / 'warehouse.db'}")
    stats = statistics(samples_frame(engine, RUN))
    engine.dispose()
    return page, stats


@pytest.fixture(scope="module")
def browser():
    binary = chromium_binary()
    require(binary is not None, "chromium is not installed (Debian: apt-get install chromium; make prereqs)")
    assert binary is not None
    instance = Browser(binary)
    yield instance
    instance.close()


def open_page(browser: Browser, page: Path) -> None:
    browser.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False)
    browser.call("Page.navigate", url=page.as_uri())
    browser.wait_for("document.readyState === 'complete' && document.querySelectorAll('svg').length > 0")


GEOMETRY = """(() => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const out = {};
  for (const axes of document.querySelectorAll('g[id^="axes-"]')) {
    const svg = axes.ownerSVGElement;
    const figure = axes.id.slice('axes-'.length);
    // An error bar is three elements (the line and two caps) with one id: their union.
    const pick = prefix => { const found = {};
      for (const g of svg.querySelectorAll(`g[id^="${prefix}-${figure}-"]`)) {
        const key = g.id.slice(prefix.length + figure.length + 2), b = box(g), o = found[key];
        found[key] = o ? [Math.min(o[0], b[0]), Math.min(o[1], b[1]), Math.max(o[2], b[2]), Math.max(o[3], b[3])] : b;
      }
      return found; };
    const fill = prefix => Object.fromEntries([...svg.querySelectorAll(`g[id^="${prefix}-${figure}-"]`)].map(
      g => [g.id.slice(prefix.length + figure.length + 2), getComputedStyle(g.querySelector('path')).fill]));
    out[figure] = {axes: box(axes), bars: pick('bar'), errors: pick('err'), legend: fill('legend'),
                   barFill: fill('bar')};
  }
  return out;
})()"""


def test_report_fits_1280_px_and_draws_inside_its_axes(demo, browser):
    page, stats = demo
    open_page(browser, page)
    assert browser.evaluate("document.documentElement.scrollWidth") <= WIDTH
    assert browser.evaluate("document.documentElement.clientWidth") <= WIDTH
    # The first screen names the profile and its sizes, and says why the run is not decision-grade.
    first = browser.evaluate("document.querySelector('#grade').getBoundingClientRect().bottom")
    assert first < 900
    assert browser.evaluate("document.querySelector('#profile').textContent").startswith(
        "profile paper (batch 4-32, images 32-224 px")
    assert "at what cost" not in browser.evaluate("document.querySelector('#answer').textContent")
    figures = browser.evaluate(GEOMETRY)
    assert {"single-throughput", "single-elapsed_time", "distributed-throughput",
            "shared-degradation_elapsed_time"} <= set(figures)
    ran = [p for p in PLATFORMS]
    for figure_id, drawn in figures.items():
        left, top, right, bottom = drawn["axes"]
        assert drawn["bars"], figure_id
        for name, (bl, bt, br, bb) in {**drawn["bars"], **drawn["errors"]}.items():
            assert left - 0.5 <= bl and br <= right + 0.5 and top - 0.5 <= bt and bb <= bottom + 0.5, \
                (figure_id, name, drawn["axes"], (bl, bt, br, bb))
        # Legends: exactly the platforms drawn, each in the palette's colour (and so are the bars).
        drawn_platforms = {name.rsplit("-", 1)[0] for name in drawn["bars"]}
        assert set(drawn["legend"]) == drawn_platforms and drawn_platforms <= set(ran), figure_id
        for platform, fill in drawn["legend"].items():
            assert fill == rgb(palette.platform_color(platform)), (figure_id, platform)
        for name, fill in drawn["barFill"].items():
            assert fill == rgb(palette.platform_color(name.rsplit("-", 1)[0])), (figure_id, name)
    swatches = browser.evaluate("[...document.querySelectorAll('.legend .swatch')].map(s => [s.dataset.platform, "
                                "getComputedStyle(s).backgroundColor])")
    assert [p for p, _ in swatches] == ran  # container_on_vm was asked for, but nothing of it ran
    assert all(color == rgb(palette.platform_color(p)) for p, color in swatches)


def test_error_bars_are_the_tables_intervals(demo, browser):
    """Each normalized bar's error bar spans the row's ×BM interval, measured in pixels against the
    bar's own height (the axis starts at 0); a row without an interval (bare metal, too few
    repetitions) has no error bar at all."""
    page, stats = demo
    open_page(browser, page)
    figures = browser.evaluate(GEOMETRY)
    checked = missing = 0
    for scenario in ("single", "distributed"):
        for metric in ("throughput", "elapsed_time"):
            drawn = figures[f"{scenario}-{metric}"]
            bars = scenarios.normalized_bars(stats, scenario, metric)
            groups = list(dict.fromkeys(b.group for b in bars))
            rows = stats[(stats["suite"] == "tf_cnn") & (stats["scenario"] == scenario) & (stats["metric"] == metric)]
            for bar in bars:
                key = f"{bar.platform}-{groups.index(bar.group)}"
                row = rows[(rows["platform"] == bar.platform) & (rows["cell"] == bar.group)].iloc[0]
                _, top, _, base = drawn["bars"][key]
                if math.isnan(row["normalized_ci_low"]):
                    assert key not in drawn["errors"], (scenario, metric, key)
                    missing += 1
                    continue
                _, err_top, _, err_bottom = drawn["errors"][key]
                per_unit = (base - top) / row["normalized"]  # pixels per 1.0 of ×BM
                assert (base - err_top) / per_unit == pytest.approx(row["normalized_ci_high"], rel=0.02, abs=0.01)
                assert (base - err_bottom) / per_unit == pytest.approx(row["normalized_ci_low"], rel=0.02, abs=0.01)
                checked += 1
    assert checked >= 10 and missing >= 2  # alexnet on real data has 2 repetitions: no interval, no error bar


def test_png_charts_draw_the_intervals_inside_their_axes(demo):
    _, stats = demo
    micro = stats[stats["suite"].isin(["cpu", "disk"])]
    for metric in dict.fromkeys(micro["metric"]):
        data = chart_data(micro, metric)
        assert data is not None
        low, high = data.ylim
        for bar in data.bars:
            assert low <= min(0.0, bar.height) and bar.height < high, (metric, bar)
            assert bar.color == palette.platform_color(bar.platform)
            row = micro[(micro["metric"] == metric) & (micro["platform"] == bar.platform) & (micro["case"] == bar.case)]
            assert (bar.low, bar.high) == pytest.approx((row["normalized_ci_low"].iloc[0],
                                                         row["normalized_ci_high"].iloc[0]), nan_ok=True)
            if bar.has_interval:
                assert low <= bar.low and bar.high < high, (metric, bar)
        assert set(data.platforms) == set(micro[micro["metric"] == metric]["platform"])
