"""The failures-and-skips section, last: every execution that produced no result, and why (one
line per cause in the text: the same skip on every repetition and platform is one line, not eight
that bury a real failure).
"""

from __future__ import annotations

import html
from typing import Any

from dlbench.reports.analysis.formatting import scenario_note
from dlbench.reports.sections.base import RunView


def _problem_lines(bad: Any) -> list[str]:
    """Failed and skipped executions, one line per cause: the same skip on every repetition and
    platform (no GPU here) is one line naming them, not eight that bury a real failure."""
    if bad.empty:
        return []
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for row in bad.itertuples():
        what = f"{row.suite}/{row.name}{scenario_note(row.scenario)}"
        groups.setdefault((str(row.status), what, str(row.error)), []).append(row)
    lines = []
    for (status, what, error), rows in groups.items():
        platforms = ", ".join(dict.fromkeys(str(r.platform) for r in rows))
        reps = ",".join(f"r{r}" for r in sorted({int(r.repetition) for r in rows}))
        runs = f"{len(rows)} run" + ("s" if len(rows) != 1 else "")
        lines.append(f"{status.upper()}: {what} on {platforms} ({reps}; {runs}): {error}")
    return lines


class ProblemsSection:
    id = "problems"
    title: str | None = "Failures and skips"
    style = ""

    def html(self, run: RunView) -> str:
        bad = run.bad
        if bad.empty:
            return ""
        return "<h2 id='problems' class='bad'>Failed or skipped</h2><ul>" + "".join(
            f"<li class='bad'>{html.escape(r.status)}: {html.escape(r.platform)} {html.escape(r.suite)}/"
            f"{html.escape(r.name)}{html.escape(scenario_note(r.scenario))} repetition {r.repetition}: "
            f"{html.escape(str(r.error))}</li>"
            for r in bad.itertuples()) + "</ul>"

    def text(self, run: RunView) -> list[str]:
        return _problem_lines(run.bad)
