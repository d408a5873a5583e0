"""The report as text: what ``dlbench report`` (and so ``make run``) prints at the end of a run.

The same outline as the HTML page (:data:`dlbench.reports.outline.SECTIONS`), each section's
lines in the page's order: the answer first (the run, how to read it, per scenario, data kind and
framework each platform against bare metal, the model workloads case by case, and whether the run
is decision-grade, the same judgement as the page), the frameworks, the gates, regressions, the
scenarios, the micro-benchmarks one line per suite and platform, failures and skips last. Every
metric's row (n, mean, std, intervals, verdicts, flags) is in comparison.csv and report.html,
whose paths are printed.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from dlbench import paths
from dlbench.reports.analysis.answer import VERDICT_SHORT
from dlbench.reports.analysis.run_data import resolve_run
from dlbench.reports.outline import SECTIONS
from dlbench.reports.sections.base import RunView

__all__ = ["VERDICT_SHORT", "text_table"]


def text_table(engine: Engine, run_id: str | None = None, report_dir: Path | None = None) -> str:
    """The run's sections as text (see the module docstring). ``report_dir``: where report.html and
    comparison.csv were written (default: ``$DLBENCH_HOME/reports/<run_id>``, where ``dlbench
    report`` writes them)."""
    run_id = resolve_run(engine, run_id)
    if run_id is None:
        return "no run in the warehouse yet"
    run = RunView(engine, run_id)
    lines = [line for section in SECTIONS for line in section.text(run)]
    out = report_dir or paths.reports_dir() / run_id
    if not run.stats.empty:
        lines.append(f"Every metric (n, mean, std, intervals, verdicts, flags): {out / 'comparison.csv'}; "
                     f"report: {out / 'report.html'}")
    if run.stats.empty and run.bad.empty:
        lines.append("(no samples)")
    return "\n".join(lines)
