"""The report's PNG charts (matplotlib): a metric of each case normalized to bare metal.

What a chart draws is first computed as plain data (:func:`chart_data`: bars, their intervals,
the axis range), then drawn: a PNG cannot be inspected after the fact, so tests check the data
that was drawn (every bar and interval inside the axis, the colours from the palette)."""

from __future__ import annotations

import base64
import io
import math
import textwrap
from dataclasses import dataclass

import pandas as pd

from dlbench.reports.analysis import compare
from dlbench.reports.rendering import palette


@dataclass(frozen=True)
class ChartBar:
    """One bar: its case, platform, ×BM, the ends of its interval (NaN: none, no error bar: bare
    metal, too few repetitions), its verdict, n and colour."""

    case: str
    platform: str
    height: float
    low: float
    high: float
    verdict: str
    n: int
    color: str

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)


@dataclass(frozen=True)
class ChartData:
    cases: list[str]
    platforms: list[str]
    bars: list[ChartBar]
    ylim: tuple[float, float]


def chart_data(stats: pd.DataFrame, metric: str) -> ChartData | None:
    """The bars of ``metric``'s chart: one per case and platform at ×BM, the error bar the
    comparison's ×BM interval (the tables' ``normalized_ci_low``/``high``, never a std), and a
    value axis from 0 that contains every bar and interval with room for the labels."""
    data = stats[(stats["metric"] == metric) & stats["normalized"].notna()]
    if data.empty:
        return None
    cases = list(dict.fromkeys(data["case"]))
    platforms = [p for p in compare.PLATFORM_ORDER if p in set(data["platform"])] + sorted(
        set(data["platform"]) - set(compare.PLATFORM_ORDER))
    bars = [ChartBar(case=str(r.case), platform=str(r.platform), height=float(r.normalized),
                     low=float(r.normalized_ci_low), high=float(r.normalized_ci_high), verdict=str(r.verdict),
                     n=int(r.n), color=palette.platform_color(str(r.platform))) for r in data.itertuples()]
    top = max([1.0, *(b.height for b in bars), *(b.high for b in bars if b.has_interval)])
    bottom = min([0.0, *(b.height for b in bars), *(b.low for b in bars if b.has_interval)])
    return ChartData(cases=cases, platforms=platforms, bars=bars, ylim=(bottom, top * 1.22))


def normalized_chart(stats: pd.DataFrame, metric: str, title: str) -> str | None:
    """Grouped bars of a metric normalized to bare metal (:func:`chart_data`), the value and n
    above each bar and the legend (only the platforms drawn) inside the image, above the plot."""
    data = chart_data(stats, metric)
    if data is None:
        return None
    import matplotlib  # heavy: only when a report draws its charts

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the non-interactive backend

    width = 0.8 / max(1, len(data.platforms))
    fig_width = max(5.0, 1.3 * len(data.cases) + 2.5)
    fig, ax = plt.subplots(figsize=(fig_width, 4.2), dpi=100)
    marks = {"better": " +", "worse": " −"}
    for i, platform in enumerate(data.platforms):
        mine = {b.case: b for b in data.bars if b.platform == platform}
        xs = [c + (i - (len(data.platforms) - 1) / 2) * width for c, case in enumerate(data.cases) if case in mine]
        shown = [mine[case] for case in data.cases if case in mine]
        ax.bar(xs, [b.height for b in shown], width, label=platform, color=palette.platform_color(platform))
        for x, b in zip(xs, shown, strict=True):
            if b.has_interval:
                ax.errorbar([x], [b.height], yerr=[[b.height - b.low], [b.high - b.height]], fmt="none",
                            ecolor="black", elinewidth=0.8, capsize=3)
        for x, b in zip(xs, shown, strict=True):
            ax.annotate(f"{b.height:.2f}{marks.get(b.verdict, '')}\nn={b.n}", xy=(x, b.high if b.has_interval
                                                                               else b.height),
                        xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=6.5)
    ax.set_ylim(*data.ylim)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(data.cases)))
    ax.set_xticklabels([textwrap.fill(c, 18) for c in data.cases], fontsize=7)
    ax.set_ylabel("normalized to bare metal (95% interval)", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(textwrap.fill(title, int(fig_width * 13)), fontsize=9)
    # One row of legend entries when they fit (about 1.6 in each), else two per row; inside the image.
    ncol = len(data.platforms) if fig_width >= 1.6 * len(data.platforms) else 2
    rows = math.ceil(len(data.platforms) / ncol)
    fig.legend(loc="lower center", ncol=ncol, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05 + 0.04 * rows, 1, 1))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()
