"""The report's HTML building blocks that every section uses alike: a scrolling box for wide
tables, a verdict and a flag as badges, and the comparison table (one row per case, metric and
platform: n, mean, CV, robust mean, Diff % and ×BM with their intervals, verdict, flags).
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from dlbench.reports.analysis import answer
from dlbench.reports.analysis import stats as st
from dlbench.reports.analysis.formatting import ci_text, fmt, ratio


def scroll(table: str) -> str:
    """A wide table in its own horizontally scrolling box: the page itself never scrolls
    sideways in a 1280-px window, whatever the number of columns."""
    return f"<div class='scroll'>{table}</div>"


def verdict_html(row: Any, short: bool = False) -> str:
    verdict = st.Verdict(row.verdict)
    text = st.VERDICT_TEXT[verdict]
    title = text
    if verdict is st.Verdict.TOO_FEW_REPETITIONS:
        title = f"too few repetitions for a verdict: n={row.n}, bare metal {row.baseline_n}; needs {st.MIN_REPETITIONS}"
        text = f"n={min(row.n, row.baseline_n)}: no verdict" if short else title
    elif verdict is st.Verdict.EQUIVALENT:
        title = f"equivalent: the interval lies within ±{row.margin * 100:g}% of bare metal"
        text = f"same ±{row.margin * 100:g}%" if short else title
    elif verdict in (st.Verdict.BETTER, st.Verdict.WORSE):
        title = f"{text}: the whole interval lies beyond ±{row.margin * 100:g}% of bare metal"
    elif verdict in st.UNRESOLVED:
        why = ("the interval excludes 1.0 but reaches into" if verdict is st.Verdict.DIFFERENT_WITHIN_MARGIN
               else "the interval holds 1.0 and reaches past")
        title = (f"{text}: {why} ±{row.margin * 100:g}%; about {row.repetitions_to_decide} repetitions per side "
                 "would resolve it")
        text = f"{text} (n≈{row.repetitions_to_decide} resolves)" if short else title
    return f"<span class='v {verdict.value}' title='{html.escape(title)}'>{html.escape(text)}</span>"


def flags_html(row: Any, short: bool = False) -> str:
    flags = getattr(row, "flags", "")
    if not flags:
        return ""
    if short:
        text = "⚠ " + answer.flag_words(row)
    else:
        text = f"⚠ {flags}"
    return f"<span class='flag' title='{html.escape(flags)}'>{html.escape(text)}</span>"


def table_html(stats: pd.DataFrame) -> str:
    if stats.empty:
        return "<p>No samples.</p>"
    rows = []
    for row in stats.itertuples():
        better = "↑" if row.higher_is_better else "↓"
        rows.append(
            f"<tr><td>{html.escape(row.case)}</td><td>{html.escape(row.metric)} ({html.escape(row.unit)}) {better}</td>"
            f"<td>{html.escape(row.platform)}</td><td>{row.n}</td><td>{fmt(row.mean)}</td>"
            f"<td>{fmt(row.cv * 100 if row.cv == row.cv else None, 3)}</td><td>{fmt(row.robust_mean)}</td>"
            f"<td>{fmt(row.diff_pct, 3)}</td><td class='nw'>{ci_text(row.diff_pct_ci_low, row.diff_pct_ci_high)}</td>"
            f"<td>{ratio(row.normalized)}</td><td class='nw'>{ci_text(row.normalized_ci_low, row.normalized_ci_high)}"
            f"</td><td class='nw'>{verdict_html(row, short=True)}</td><td class='nw'>{flags_html(row, short=True)}"
            "</td></tr>"
        )
    confidence = f"{st.DEFAULT_CONFIDENCE * 100:.0f}%"
    # One notion of uncertainty: the interval (Diff% and ×BM are its two scales); the std stays in
    # comparison.csv, CV % is here because the noise flag is read from it.
    return scroll("<table><tr><th>case</th><th>metric</th><th>platform</th><th>n</th><th>mean</th>"
                  f"<th>CV %</th><th>robust mean</th><th>Diff %</th><th>Diff % {confidence} CI</th><th>normalized</th>"
                  f"<th>normalized {confidence} CI</th><th>verdict</th><th>flags</th></tr>" + "".join(rows)
                  + "</table>")
