"""The model workloads' figures (issue 24): study 003's Fathom figure, and the transformer's.

Study 003 (Siddaramanna and John) drew, per Fathom workload, the native run beside the
containerised one, for training and for inference. :func:`figure_data` builds the same figure
from the comparison table (:func:`dlbench.reports.analysis.compare.statistics`) for every platform of the
run: one panel per workload (the eight, in Fathom's order), in each panel one group of bars per
task (train, infer: the case's name without the workload's), one bar per platform (bare metal,
the native run, first). The transformer's figure is the same drawing with one panel per task
(train, generate), a group per scenario and sizes.

A bar is the platform's mean in the workload's own unit (images/s, sentences/s, tokens/s: the
tables' ``mean``), because the workloads' rates differ by orders of magnitude and a panel each
keeps every one readable; above it stands its ×BM with the comparison's verdict mark and n, and
its error bar is the comparison's ×BM interval stated in the unit (bare metal's mean × the
interval's ends: the tables' ``normalized_ci_*``, one notion of uncertainty in the report, never
a std). Bare metal, the reference, and rows with too few repetitions have no error bar.

As :mod:`dlbench.reports.rendering.figures`, what is drawn is first plain data (tests check it against the
table), then drawn by matplotlib; the PNG also records what matplotlib actually drew (each
panel's title and its bars' heights, read back from the artists) in its ``Description`` text
chunk, so a test can compare the picture with the table without reading pixels.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dlbench.reports.analysis import answer, compare
from dlbench.reports.analysis.formatting import ratio
from dlbench.reports.rendering import palette
from dlbench.reports.sections.base import RunView
from dlbench.reports.sections.suite_tables import suite_html
from dlbench.suites import SUITES
from dlbench.suites.spec import SuiteFigure

METRIC = "throughput"
"""What the figures draw: each workload's headline rate, in its natural unit."""

FIGURES: dict[str, SuiteFigure] = {suite.value: spec.figure for suite, spec in SUITES.items() if spec.figure}
"""Per suite with a figure (:attr:`~dlbench.suites.spec.SuiteSpec.figure`): what a panel is (the
benchmark, or a parameter), the panels in the order a reader knows them, the title; groups within a
panel: training first (:data:`~dlbench.reports.analysis.answer.TASK_ORDER`)."""


def title_of(suite: str) -> str:
    """The suite's figure title and its part of the section's heading (its id when it has no figure)."""
    return FIGURES[suite].title if suite in FIGURES else suite

MARKS = {"better": " +", "worse": " −"}
"""After a bar's ×BM: significantly better / worse than bare metal (the comparison's verdict)."""

CSV = "workloads.csv"
"""The figures' bars as a table, beside comparison.csv (whose rows they are)."""


@dataclass(frozen=True)
class PanelBar:
    """One bar: the platform's mean in the unit, its interval in the unit (NaN: none), its ×BM,
    verdict, n and colour."""

    panel: str
    group: str
    platform: str
    mean: float
    low: float
    high: float
    normalized: float
    verdict: str
    n: int
    color: str

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def label(self) -> str:
        """What stands above the bar: ``×0.970 −`` (or the mean for bare metal, the reference) and n."""
        if self.platform == compare.BASELINE or not math.isfinite(self.normalized):
            return f"{self.mean:.0f}\nn={self.n}" if self.mean >= 100 else f"{self.mean:.3g}\nn={self.n}"
        return f"×{ratio(self.normalized)}{MARKS.get(self.verdict, '')}\nn={self.n}"


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    groups: list[str]
    bars: list[PanelBar]
    ylim: tuple[float, float]


@dataclass(frozen=True)
class WorkloadFigure:
    suite: str
    metric: str
    platforms: list[str]
    panels: list[Panel]


def _index(order: Sequence[str], value: str) -> int:
    return order.index(value) if value in order else len(order)


def _group(cell: str, remove: Sequence[str], scenario: str) -> str:
    """The cell's name without the panel's words (the workload, the task when panels are tasks),
    with its scenario in front when it is not single: ``train synthetic batch 64``."""
    words = cell.split()
    for word in remove:
        if word in words:
            words.remove(word)
    return " ".join(([scenario] if scenario != compare.SINGLE else []) + words) or scenario


def figure_data(stats: pd.DataFrame, frame: pd.DataFrame, suite: str, metric: str = METRIC) -> WorkloadFigure | None:
    """The bars of ``suite``'s figure (module docstring), or None when the run has no such rows."""
    if stats.empty or frame.empty or suite not in FIGURES:
        return None
    rows = stats[(stats["suite"] == suite) & (stats["metric"] == metric)]
    if rows.empty:
        return None
    cells = frame[frame["suite"] == suite].drop_duplicates(["name", "case_key"])
    parameters = {(r.name, r.case_key): dict(r.parameters or {}) for r in cells.itertuples()}
    by = FIGURES[suite].panel_by
    found: dict[str, dict[str, Any]] = {}
    for r in rows.itertuples():
        params = parameters.get((r.name, r.case_key), {})
        panel = str(r.name if by == "name" else params.get(by, r.name))
        task = str(params.get("task", ""))
        remove = [str(r.name)] + ([panel] if by != "name" else [])
        group = _group(str(r.cell), remove, str(r.scenario))
        entry = found.setdefault(panel, {"unit": str(r.unit), "groups": {}, "bars": []})
        entry["groups"].setdefault(group, (_index(compare.SCENARIOS, str(r.scenario)), _index(answer.TASK_ORDER, task)))
        base = float(r.baseline) if r.baseline == r.baseline else math.nan
        low, high = float(r.normalized_ci_low), float(r.normalized_ci_high)
        entry["bars"].append(PanelBar(
            panel=panel, group=group, platform=str(r.platform), mean=float(r.mean),
            low=base * low if math.isfinite(low) else math.nan, high=base * high if math.isfinite(high) else math.nan,
            normalized=float(r.normalized), verdict=str(r.verdict), n=int(r.n),
            color=palette.platform_color(str(r.platform))))
    order = FIGURES[suite].panel_order
    panels = []
    for name in sorted(found, key=lambda p: (_index(order, p), p)):
        entry = found[name]
        groups = sorted(entry["groups"], key=lambda g: (*entry["groups"][g], g))
        bars: list[PanelBar] = entry["bars"]
        top = max([b.mean for b in bars] + [b.high for b in bars if b.has_interval] + [0.0])
        panels.append(Panel(title=name, unit=entry["unit"], groups=groups, bars=bars,
                            ylim=(0.0, top * 1.3 if top > 0 else 1.0)))
    present = set(rows["platform"])
    platforms = [p for p in compare.PLATFORM_ORDER if p in present] + sorted(present - set(compare.PLATFORM_ORDER))
    return WorkloadFigure(suite=suite, metric=metric, platforms=platforms, panels=panels)


def draw(figure: WorkloadFigure) -> bytes:
    """The figure as a PNG: small multiples, one panel per :class:`Panel` (four to a row), the
    legend (only the platforms drawn, in their palette colours) below. Its ``Description`` text
    chunk is :func:`drawn_record` of the drawing."""
    import matplotlib  # heavy: only when a report draws its figures

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the non-interactive backend

    ncols = min(4, len(figure.panels))
    nrows = math.ceil(len(figure.panels) / ncols)
    fig_w, fig_h = 3.3 * ncols + 0.4, 2.9 * nrows + 1.1
    fig, axes = plt.subplots(nrows, ncols, figsize=(fig_w, fig_h), dpi=100, squeeze=False)
    width = 0.8 / max(1, len(figure.platforms))
    for ax, panel in zip(axes.flat, figure.panels, strict=False):
        for i, platform in enumerate(figure.platforms):
            mine = {b.group: b for b in panel.bars if b.platform == platform}
            xs = [g + (i - (len(figure.platforms) - 1) / 2) * width for g, group in enumerate(panel.groups)
                  if group in mine]
            shown = [mine[group] for group in panel.groups if group in mine]
            if not shown:
                continue
            ax.bar(xs, [b.mean for b in shown], width, label=platform, color=palette.platform_color(platform),
                   gid=f"{panel.title}|{platform}")
            for x, b in zip(xs, shown, strict=True):
                if b.has_interval:
                    ax.errorbar([x], [b.mean], yerr=[[max(b.mean - b.low, 0.0)], [max(b.high - b.mean, 0.0)]],
                                fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
                ax.annotate(b.label, xy=(x, b.high if b.has_interval else b.mean), xytext=(0, 2),
                            textcoords="offset points", ha="center", va="bottom", fontsize=5.5)
        ax.set_ylim(*panel.ylim)
        ax.set_xticks(range(len(panel.groups)))
        ax.set_xticklabels([textwrap.fill(g, 16) for g in panel.groups], fontsize=6)
        ax.set_ylabel(panel.unit, fontsize=7)
        ax.tick_params(axis="y", labelsize=6)
        ax.set_title(panel.title, fontsize=9)
    for ax in list(axes.flat)[len(figure.panels):]:
        ax.set_visible(False)
    title = textwrap.fill(title_of(figure.suite) + "; ×BM (95% interval) and n above each bar, "
                          "+ / − = significantly better / worse", int(fig_w * 15))
    fig.suptitle(title, fontsize=8)
    handles, labels = next(((h, lab) for ax in axes.flat for h, lab in [ax.get_legend_handles_labels()]
                            if len(lab) == len(figure.platforms)), axes.flat[0].get_legend_handles_labels())
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.35 / fig_h, 1, 1 - 0.17 * (title.count("\n") + 1) / fig_h))
    record = drawn_record(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Description": json.dumps(record)})
    plt.close(fig)
    return buffer.getvalue()


def drawn_record(fig: Any) -> list[dict[str, Any]]:
    """What matplotlib drew, read back from its artists: per visible panel its title and, per
    platform, the heights of its bars (in the panel's group order)."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        bars: dict[str, list[float]] = {}
        for container in ax.containers:
            if hasattr(container, "patches") and container.patches:
                bars[str(container.get_label())] = [float(p.get_height()) for p in container.patches]
        out.append({"title": ax.get_title(), "bars": bars})
    return out


def table(figure: WorkloadFigure) -> pd.DataFrame:
    """The figure's bars as rows (workloads.csv)."""
    return pd.DataFrame([{"suite": figure.suite, "panel": b.panel, "group": b.group, "platform": b.platform,
                          "metric": figure.metric, "unit": p.unit, "mean": b.mean, "interval_low": b.low,
                          "interval_high": b.high, "normalized": b.normalized, "verdict": b.verdict, "n": b.n}
                         for p in figure.panels for b in p.bars])


def figures(stats: pd.DataFrame, frame: pd.DataFrame) -> list[WorkloadFigure]:
    """The run's workload figures: one per suite of :data:`FIGURES` that has results."""
    return [f for suite in FIGURES if (f := figure_data(stats, frame, suite)) is not None]


def html_section(found: Sequence[WorkloadFigure], out: Path, suite_html: Mapping[str, str]) -> str:
    """The report's "Workloads" section (empty without workload results): per suite its figure
    (written as ``<suite>.png`` beside the report and embedded in it), then ``suite_html[suite]``
    (the suite's tables, without a heading: this section names the suite). Writes :data:`CSV`."""
    if not found and not suite_html:
        return ""
    if found:
        pd.concat([table(f) for f in found]).to_csv(out / CSV, index=False)
    figured = {f.suite: f for f in found}
    suites = list(dict.fromkeys([*figured, *suite_html]))
    parts = [f"<h2 id='workloads'>Workloads: {html.escape(', '.join(suites))}</h2><p class='note'>Each workload's "
             "throughput in its own unit, bare metal (native) beside each platform, for every task; above each bar "
             "its ×BM with the comparison's 95% interval as the error bar, + / − when significantly better / worse, "
             f"and n (the bars: {CSV}). The cases are listed by name in the answer above.</p>"]
    for suite in suites:
        parts.append(f"<h3 id='workload-{html.escape(suite)}'>{html.escape(title_of(suite))}</h3>")
        if suite in figured:
            png = draw(figured[suite])
            (out / f"{suite}.png").write_bytes(png)
            parts.append(f"<img alt='{html.escape(suite)} figure' src='data:image/png;base64,"
                         f"{base64.b64encode(png).decode()}'>")
        parts.append(suite_html.get(suite, ""))
    return "\n".join(p for p in parts if p)


class WorkloadsSection:
    """The model workloads' figures and tables (Fathom, the transformer, dltools)."""

    id = "workloads"
    title: str | None = "Workloads"
    style = ""

    def html(self, run: RunView) -> str:
        if run.out is None:
            raise ValueError("the workloads section writes its figures beside the page: RunView.out is needed")
        tables = {s: suite_html(run, s, heading=False, charted=[METRIC] if s in FIGURES else None)
                  for s in answer.WORKLOAD_SUITES if s in run.suites}
        return html_section(figures(run.stats, run.frame), run.out, tables)

    def text(self, run: RunView) -> list[str]:
        return []  # the answer lists the workloads' cases by name, with their headline metrics
