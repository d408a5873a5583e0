"""The report as one self-contained HTML page, and :func:`build_report`, which writes it with the
comparison's data files.

The page is the report's outline (:data:`dlbench.reports.outline.SECTIONS`) rendered in order:
the navigation lists each section that has something to show, the body holds them (the answer
first, failures and skips last; docs/reports.md). Every statistic comes from
:mod:`dlbench.reports.analysis.stats`; the same rows are written as comparison.csv and
comparison.json (:mod:`dlbench.reports.rendering.exports`).
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine

from dlbench.reports.analysis import stats as st
from dlbench.reports.analysis.run_data import resolve_run
from dlbench.reports.outline import SECTIONS
from dlbench.reports.rendering.exports import write_comparison
from dlbench.reports.sections.base import RunView

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1500px;overflow-wrap:break-word}
table{border-collapse:collapse;margin:1em 0}.scroll{max-width:100%;overflow-x:auto}
.grade{padding:.5em .8em;border-radius:4px;margin:.5em 0}.grade.yes{background:#d9f2d9}.grade.no{background:#fff1cc}
td,th{border:1px solid #ccc;padding:.25em .6em;font-size:.9em;text-align:right}td:first-child,th{text-align:left}
h2{margin-top:2em;border-bottom:2px solid #ddd}.note{color:#555;font-size:.9em}.bad{color:#a00}
.v{padding:0 .35em;border-radius:3px;white-space:nowrap}.v.better{background:#d9f2d9;color:#155d15}
.v.worse{background:#f8d7d7;color:#8a1111}.v.equivalent{background:#e3effa;color:#1d4f7a}
.v.inconclusive,.v.different_within_margin{background:#eee;color:#444}
.v.too_few_repetitions{background:#fff1cc;color:#7a5a00}.v.baseline{color:#555}.flag{color:#b35c00;font-size:.85em}
.answer td{vertical-align:top}.answer .ci,.answer b{white-space:nowrap}
.answer td:first-child{white-space:normal;min-width:12em}.answer .ci{color:#555;font-size:.85em}
.summary li{margin:.2em 0}
table.env td{text-align:left;font-size:.85em}td.nw{white-space:nowrap}img{max-width:100%}
nav a{margin-right:1em}
"""
"""The page's own rules; each section adds its own (:attr:`~dlbench.reports.sections.base.Section.style`)."""


def build_report(engine: Engine, run_id: str | None, out_dir: str | Path) -> Path:
    """Write ``report.html`` (self-contained: charts embedded), ``comparison.csv`` and
    ``comparison.json`` for the run, and each section's data files; return the HTML path."""
    run_id = resolve_run(engine, run_id)
    if run_id is None:
        raise LookupError("the warehouse holds no run yet: trigger dlbench_benchmark first")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run = RunView(engine, run_id, out)
    write_comparison(run.stats, out)
    shown = [(section, body) for section in SECTIONS if (body := section.html(run))]
    style = STYLE + "".join(dict.fromkeys(section.style for section in SECTIONS))
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>dlbench report {html.escape(run_id)}</title>"
        f"<style>{style}</style></head><body><h1>Benchmark report: {html.escape(run_id)}</h1>",
        "<nav>" + "".join(f"<a href='#{section.id}'>{html.escape(section.title)}</a>"
                          for section, _ in shown if section.title) + "</nav>",
        *(body for _, body in shown),
    ]
    parts.append(f"<p class='note'>Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC from the warehouse. Values are "
                 "means over repetitions (n); the uncertainty shown is the 95% interval of each comparison, in the "
                 "tables and as the charts' error bars (the std is in comparison.csv); CV = std / mean; robust "
                 "mean = the mean without the minimum and "
                 f"the maximum (from {st.ROBUST_MIN_N} repetitions, as MLPerf). <b>Diff% = (H − D) / H × 100</b> "
                 "with H = bare metal and D = the platform (study 001): for higher-is-better metrics (↑, e.g. "
                 "images/s) a positive Diff% means the platform is slower; for lower-is-better metrics (↓, e.g. "
                 "elapsed seconds) a negative Diff% means it takes longer. <b>normalized = D / H</b> (bare metal = "
                 "1.0), as in the core study's figures. The same rows: comparison.csv and comparison.json.</p>")
    parts.append("</body></html>")
    page = out / "report.html"
    page.write_text("\n".join(p for p in parts if p))
    return page
