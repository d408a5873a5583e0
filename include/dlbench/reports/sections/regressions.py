"""The regressions section: each case of this run that got significantly worse than its baseline
(:mod:`dlbench.reports.analysis.regression`: the pinned run, else the runs before it on the same
kind of machine, and the change points of its whole history), with the software that changed.
"""

from __future__ import annotations

import html

from dlbench.reports.analysis import regression
from dlbench.reports.analysis.formatting import fmt
from dlbench.reports.rendering.tables import scroll
from dlbench.reports.sections.base import RunView


def _detect(run: RunView) -> list[regression.Regression] | Exception:
    """The run's regressions, or why detection failed: the rest of the report stands without them."""
    try:
        return regression.detect(run.engine, run.run_id)
    except Exception as exc:  # noqa: BLE001 - the rest of the report stands without it
        return exc


def _regressions_html(found: list[regression.Regression] | Exception, run_id: str) -> str:
    """"Regressions since the baseline", from :mod:`dlbench.reports.analysis.regression`."""
    head = "<h2 id='regressions'>Regressions since the baseline</h2>"
    if isinstance(found, Exception):
        why = html.escape(f"{type(found).__name__}: {found}")
        return head + f"<p class='bad'>Regression detection failed: {why}</p>"
    if not found:
        return head + ("<p class='note'>No case got significantly worse than its baseline (docs/regressions.md: "
                       "the pinned run, else the previous runs holding the same case on the same kind of machine).</p>")
    rows = "".join(
        f"<tr><td>{html.escape(r.platform)}</td><td>{html.escape(r.case)}</td><td>{html.escape(r.metric)}</td>"
        f"<td>{fmt(r.baseline)} {html.escape(r.unit)}</td><td>{fmt(r.current)} {html.escape(r.unit)}</td>"
        f"<td>{r.change_pct:+.1f}</td><td>{fmt(r.p_value, 2)}</td><td>{html.escape(r.method)}"
        + (f" (a new level since run {html.escape(r.level_since)}: alarms until accepted with "
           f"<code>dlbench baseline ack {html.escape(run_id)}</code>)" if r.level_since else "") + "</td>"
        f"<td>{html.escape(', '.join(r.baseline_runs[-3:]))}{' …' if len(r.baseline_runs) > 3 else ''}</td>"
        f"<td>{html.escape('; '.join(r.software_changes)) or '-'}</td></tr>"
        for r in found)
    return head + scroll("<table><tr><th>platform</th><th>case</th><th>metric</th><th>baseline</th>"
                         "<th>this run (a change point: its new level)</th>"
                         "<th>change %</th><th>p</th><th>test</th><th>baseline runs</th>"
                         f"<th>software changed since the baseline</th></tr>{rows}</table>")


class RegressionsSection:
    id = "regressions"
    title: str | None = "Regressions"
    style = ""

    def html(self, run: RunView) -> str:
        return _regressions_html(run.memo("regressions", lambda: _detect(run)), run.run_id)

    def text(self, run: RunView) -> list[str]:
        found = run.memo("regressions", lambda: _detect(run))
        if isinstance(found, Exception):
            return ["", f"REGRESSIONS: detection failed: {type(found).__name__}: {found}"]
        if not found:
            return []
        lines = ["", f"REGRESSIONS: {len(found)} case(s) significantly worse than their baseline (docs/regressions.md)"]
        for r in found:
            level = (f"; a new level since run {r.level_since}: `dlbench baseline ack {run.run_id}` accepts it"
                     if r.level_since else "")
            lines.append(f"  {r.platform} {r.case} {r.metric}: {fmt(r.baseline)} -> {fmt(r.current)} {r.unit} "
                         f"({r.change_pct:+.1f}%, p={fmt(r.p_value, 2)}, {r.method}{level})")
        return lines
