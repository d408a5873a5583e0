"""The report's PNG charts (matplotlib): a metric of each case normalized to bare metal."""

from __future__ import annotations

import base64
import io
import math
import textwrap

import pandas as pd

from dlbench.reports import compare, scenarios


def normalized_chart(stats: pd.DataFrame, metric: str, title: str) -> str | None:
    """Grouped bars of a metric normalized to bare metal, error bars = std / bare-metal mean, the
    normalized value above each bar and the legend inside the image, above the plot."""
    import matplotlib  # heavy: only when a report draws its charts

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the non-interactive backend

    data = stats[(stats["metric"] == metric) & stats["normalized"].notna()]
    if data.empty:
        return None
    cases = list(dict.fromkeys(data["case"]))
    platforms = [p for p in compare.PLATFORM_ORDER if p in set(data["platform"])] + sorted(
        set(data["platform"]) - set(compare.PLATFORM_ORDER))
    width = 0.8 / max(1, len(platforms))
    fig_width = max(5.0, 1.3 * len(cases) + 2.5)
    fig, ax = plt.subplots(figsize=(fig_width, 4.2), dpi=100)
    top = 1.0
    for i, platform in enumerate(platforms):
        rows = data[data["platform"] == platform].set_index("case")
        xs = [c + (i - (len(platforms) - 1) / 2) * width for c in range(len(cases))]
        heights = [rows["normalized"].get(case, float("nan")) for case in cases]
        errors = [(rows["std"] / rows["baseline"]).fillna(0.0).get(case, 0.0) for case in cases]
        verdicts = [rows["verdict"].get(case, "") for case in cases]
        rects = ax.bar(xs, heights, width, yerr=errors, capsize=3, label=platform,
                       color=scenarios.PLATFORM_COLORS.get(platform, "#8c8c8c"), error_kw={"elinewidth": 0.8})
        marks = {"better": " +", "worse": " −"}
        ax.bar_label(rects, labels=["" if h != h else f"{h:.2f}{marks.get(v, '')}" for h, v in
                                    zip(heights, verdicts, strict=True)], fontsize=7, padding=2)
        top = max([top, *(h + e for h, e in zip(heights, errors, strict=True) if h == h)])
    ax.set_ylim(0, top * 1.18)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([textwrap.fill(c, 18) for c in cases], fontsize=7)
    ax.set_ylabel("normalized to bare metal", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(textwrap.fill(title, int(fig_width * 13)), fontsize=9)
    # One row of legend entries when they fit (about 1.6 in each), else two per row; inside the image.
    ncol = len(platforms) if fig_width >= 1.6 * len(platforms) else 2
    rows = math.ceil(len(platforms) / ncol)
    fig.legend(loc="lower center", ncol=ncol, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05 + 0.04 * rows, 1, 1))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()
