"""The frameworks compared on the same platform and machine: PyTorch and JAX against TensorFlow.

The answer compares platforms within one framework (a case's parameters include its framework,
so bare metal's PyTorch cell is PyTorch's baseline). This section answers the other question a
planner asks: on this platform, what does the framework itself cost? Each row puts one
framework's values of a cell (model, data, sizes, scenario: every parameter but the framework)
against TensorFlow's on the same platform in the same run, with the same statistics as the
platform comparison (:func:`dlbench.reports.analysis.stats.compare`: the delta-method interval of the
ratio of the means on the log scale, df by Welch-Satterthwaite, n >= 3 per side for a verdict).
TensorFlow is the baseline because it is the study's; a run without TensorFlow compares against
the first framework it ran, in :data:`ORDER`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dlbench.reports.analysis import answer, compare
from dlbench.reports.analysis import stats as st
from dlbench.reports.sections.base import RunView
from dlbench.warehouse.load import benchmark_framework
from dlbench.workloads.profiles import Framework

ORDER = tuple(f.value for f in Framework)
"""The frameworks in the order a reader meets them (the enum's: the study's first)."""

NAMES = answer.FRAMEWORK_NAMES

METRICS = answer.ANSWER_METRICS
"""Compared metrics: the answer's (throughput, elapsed time)."""


def framework_key(parameters: Mapping[str, Any] | None) -> str:
    """The framework a training document trained with, as the warehouse's ``benchmarks.framework``
    says it (:func:`dlbench.warehouse.load.benchmark_framework`: tensorflow when absent)."""
    return benchmark_framework(answer.TRAINING_SUITE, dict(parameters or {})) or ""


def cell_key(parameters: Mapping[str, Any] | None) -> str:
    """A case key without the framework: the same cell in every framework."""
    return compare.case_key({k: v for k, v in (parameters or {}).items() if k != "framework"})


@dataclass(frozen=True)
class FrameworkRow:
    """One framework against the baseline framework in one cell on one platform, for one metric."""

    platform: str
    scenario: str
    data: str
    cell: str
    metric: str
    unit: str
    framework: str
    baseline: str
    mean: float
    baseline_mean: float
    comparison: st.Comparison

    @property
    def higher_is_better(self) -> bool:
        return compare.higher_is_better(self.metric, self.unit)


def framework_rows(frame: pd.DataFrame, confidence: float = st.DEFAULT_CONFIDENCE) -> list[FrameworkRow]:
    """Every non-baseline framework's comparison per platform, scenario, cell and metric; empty
    when the run trained with one framework only."""
    if frame.empty:
        return []
    training = frame[(frame["suite"] == answer.TRAINING_SUITE) & frame["metric"].isin([m for m, _ in METRICS])]
    if training.empty:
        return []
    training = training.assign(_fw=training["parameters"].map(framework_key),
                               _cell=training["parameters"].map(cell_key))
    if training["_fw"].nunique() < 2:
        return []
    rows: list[FrameworkRow] = []
    # A series is a metric with its sample labels (labels_key), as in the platform comparison: one
    # value per execution of the cell.
    for (platform, scenario, name, _, metric, unit, _), group in training.groupby(
            ["platform", "scenario", "name", "_cell", "metric", "unit", "labels_key"], sort=False):
        values = {fw: list(g["value"]) for fw, g in group.groupby("_fw")}
        present = [fw for fw in ORDER if fw in values] + sorted(set(values) - set(ORDER))
        if len(present) < 2:
            continue
        baseline = present[0]
        first = group[group["_fw"] == baseline].iloc[0]
        label = compare.cell_name(str(first["suite"]), str(name), first["parameters"], first["execution_labels"])
        higher = compare.higher_is_better(str(metric), str(unit))
        for fw in present[1:]:
            rows.append(FrameworkRow(
                platform=str(platform), scenario=str(scenario), data=str((first["parameters"] or {}).get("data", "")),
                cell=label, metric=str(metric), unit=str(unit),
                framework=fw, baseline=baseline, mean=st.mean(values[fw]), baseline_mean=st.mean(values[baseline]),
                comparison=st.compare(values[fw], values[baseline], higher, confidence)))
    data_order = answer.DATA_ORDER
    return sorted(rows, key=lambda r: (compare.SCENARIOS.index(r.scenario) if r.scenario in compare.SCENARIOS else 9,
                                       data_order.index(r.data) if r.data in data_order else 9, r.cell,
                                       compare.platform_rank(r.platform),
                                       ORDER.index(r.framework) if r.framework in ORDER else 9,
                                       [m for m, _ in METRICS].index(r.metric)))


def describe(row: FrameworkRow) -> str:
    """``throughput ↑ 1.23× [1.10, 1.37] better n=4/4`` (× the baseline framework, same platform)."""
    c = row.comparison
    arrow = "↑" if row.higher_is_better else "↓"
    interval = f" [{c.ratio_low:.3g}, {c.ratio_high:.3g}]" if c.ratio_low == c.ratio_low else ""
    name = dict(METRICS).get(row.metric, row.metric)
    return f"{name} {arrow} {c.ratio:.3g}×{interval} {answer.VERDICT_SHORT.get(c.verdict, c.verdict.value)} " \
           f"n={c.n}/{c.baseline_n}"


def text_lines(rows: list[FrameworkRow]) -> list[str]:
    """The console's section: per scenario and cell, a line per platform and framework with each
    metric against the baseline framework."""
    if not rows:
        return []
    baseline = NAMES.get(rows[0].baseline, rows[0].baseline)
    lines = ["", f"FRAMEWORKS: each against {baseline} on the same platform and machine (× {baseline})"]
    seen: set[tuple[str, str, str, str]] = set()
    last: tuple[str, str] | None = None
    for row in rows:
        if (row.scenario, row.cell) != last:
            last = (row.scenario, row.cell)
            lines.append(f"  {row.scenario} · {row.cell}")
        key = (row.scenario, row.cell, row.platform, row.framework)
        if key in seen:
            continue
        seen.add(key)
        same = [r for r in rows if (r.scenario, r.cell, r.platform, r.framework) == key]
        lines.append(f"    {row.platform:24} {NAMES.get(row.framework, row.framework):10} "
                     + "   ".join(describe(r) for r in same))
    return lines


def table(rows: list[FrameworkRow]) -> pd.DataFrame:
    """The section as a table (the HTML report's and frameworks.csv's rows)."""
    return pd.DataFrame([{
        "scenario": r.scenario, "cell": r.cell, "platform": r.platform, "metric": r.metric, "unit": r.unit,
        "framework": r.framework, "baseline_framework": r.baseline, "mean": r.mean, "baseline_mean": r.baseline_mean,
        "ratio": r.comparison.ratio, "ratio_ci_low": r.comparison.ratio_low, "ratio_ci_high": r.comparison.ratio_high,
        "n": r.comparison.n, "baseline_n": r.comparison.baseline_n, "verdict": r.comparison.verdict.value,
    } for r in rows])


def html_section(rows: list[FrameworkRow]) -> str:
    """The report's section (empty without a second framework): one table, a row per cell,
    platform and framework, each metric's ratio to the baseline framework with its interval."""
    if not rows:
        return ""
    baseline = NAMES.get(rows[0].baseline, rows[0].baseline)
    body = []
    for row in rows:
        c = row.comparison
        interval = f"[{c.ratio_low:.3g}, {c.ratio_high:.3g}]" if c.ratio_low == c.ratio_low else "-"
        verdict = answer.VERDICT_SHORT.get(c.verdict, c.verdict.value)
        body.append(
            f"<tr><td>{html.escape(row.scenario)}</td><td>{html.escape(row.cell)}</td><td>{html.escape(row.platform)}"
            f"</td><td>{html.escape(NAMES.get(row.framework, row.framework))}</td>"
            f"<td>{html.escape(dict(METRICS).get(row.metric, row.metric))} {'↑' if row.higher_is_better else '↓'}</td>"
            f"<td>{row.mean:.4g} {html.escape(row.unit)}</td><td>{row.baseline_mean:.4g}</td>"
            f"<td><b>{c.ratio:.3g}×</b> {interval}</td><td>{html.escape(verdict)} n={c.n}/{c.baseline_n}</td></tr>")
    return (f"<h2 id='frameworks'>Frameworks on the same platform: each against {html.escape(baseline)}</h2>"
            f"<p class='note'>The same cell (model, data, sizes, scenario) trained by each framework on the same "
            f"platform and machine in this run; ratio = framework / {html.escape(baseline)} with its 95% interval "
            f"(the statistics of the platform comparison). The platform answer above compares platforms within "
            f"one framework.</p><div class='scroll'><table><tr><th>scenario</th><th>cell</th><th>platform</th>"
            f"<th>framework</th><th>metric</th><th>mean</th><th>{html.escape(baseline)}</th><th>× "
            f"{html.escape(baseline)}</th><th>verdict</th></tr>{''.join(body)}</table></div>")


class FrameworksSection:
    """Each framework against the baseline framework on the same platform (module docstring)."""

    id = "frameworks"
    title: str | None = "Frameworks"
    style = ""

    def _rows(self, run: RunView) -> list[FrameworkRow]:
        return run.memo("framework_rows", lambda: framework_rows(run.frame))

    def html(self, run: RunView) -> str:
        rows = self._rows(run)
        if rows and run.out is not None:
            table(rows).to_csv(run.out / "frameworks.csv", index=False)
        return html_section(rows)

    def text(self, run: RunView) -> list[str]:
        return text_lines(self._rows(run))
