"""The gates section: each gate of the request passed, failed or inconclusive, with every row it
was judged on (the judgement is :mod:`dlbench.reports.analysis.gates`', the DAG's gates task's).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from dlbench.reports.analysis.formatting import ci_text, ratio
from dlbench.reports.analysis.gates import STATE_TEXT, GateResult, GateState, percent, summary, text_lines
from dlbench.reports.sections.base import RunView

STYLE = """.gate{padding:0 .35em;border-radius:3px;white-space:nowrap;font-weight:bold}
.gate.passed{background:#d9f2d9;color:#155d15}.gate.failed{background:#f8d7d7;color:#8a1111}
.gate.inconclusive{background:#fff1cc;color:#7a5a00}table.gates td{vertical-align:top}
"""


def _badge(state: GateState) -> str:
    return f"<span class='gate {state.value}'>{STATE_TEXT[state]}</span>"


def html_section(results: Sequence[GateResult]) -> str:
    """The report's gates section: each gate passed, failed or inconclusive, with every row it was
    judged on (×BM, its interval at the gate's confidence, n, why). Empty without gates."""
    if not results:
        return ""
    esc = html.escape
    body = []
    for result in results:
        head = (f"<tr><td rowspan='{max(len(result.rows), 1)}'>{_badge(result.state)} <b>{esc(result.label)}</b>"
                f"<br><span class='note'>at {esc(percent(result.confidence))}: {esc(result.reason)}</span></td>")
        if not result.rows:
            body.append(head + "<td colspan='5'>-</td></tr>")
            continue
        for i, row in enumerate(result.rows):
            flags = f" <span class='flag'>⚠ {esc(row.flags)}</span>" if row.flags else ""
            cells = (f"<td>{esc(row.case)}{flags}</td><td>{esc(ratio(row.normalized))}</td>"
                     f"<td class='nw'>{esc(ci_text(row.ci_low, row.ci_high))}</td>"
                     f"<td>{row.n}/{row.baseline_n}</td><td>{_badge(row.state)} {esc(row.reason)}</td></tr>")
            body.append((head if i == 0 else "<tr>") + cells)
    return (f"<h2 id='gates'>Gates</h2><p class='note'>{esc(summary(results))}. A gate passes when the interval's "
            "end clears its threshold on every matching row, fails when a whole interval is beyond it, and is "
            "inconclusive otherwise (an interval across the threshold, or none: no evidence; docs/gates.md).</p>"
            "<div class='scroll'><table class='gates'><tr><th>gate</th><th>case</th><th>×BM</th><th>interval</th>"
            "<th>n / bare metal n</th><th>result</th></tr>" + "".join(body) + "</table></div>")


class GatesSection:
    id = "gates"
    title: str | None = "Gates"
    style = STYLE

    def html(self, run: RunView) -> str:
        return html_section(run.gate_results)

    def text(self, run: RunView) -> list[str]:
        return ["", *lines] if (lines := text_lines(run.gate_results)) else []
