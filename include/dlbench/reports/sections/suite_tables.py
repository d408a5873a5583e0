"""One suite's charts and tables, as the sections that show suites render them (the training
numbers, the workloads, the micro-benchmarks): its headline metrics charted normalized to bare
metal, its headline table, and every other metric one click away.
"""

from __future__ import annotations

import html
from collections.abc import Collection

from dlbench.reports.analysis.run_data import network_paths
from dlbench.reports.rendering.figures import normalized_chart
from dlbench.reports.rendering.tables import table_html
from dlbench.reports.sections.base import RunView
from dlbench.suites import Suite


def _network_note(run: RunView) -> str:
    """Says so when the platforms' network numbers went through different paths (e.g. loopback on
    this host vs host <-> container over the Docker bridge): then they are not like for like."""
    found = network_paths(run.engine, run.run_id)
    kinds = {path.split(" (")[0] for paths in found.values() for path in paths}
    if len(kinds) <= 1:
        return ""
    items = "".join(f"<li>{html.escape(platform)}: {html.escape('; '.join(paths))}</li>"
                    for platform, paths in sorted(found.items()))
    return ("<p class='note bad'><b>The platforms' network paths differ</b>, so their network numbers are not a "
            f"like-for-like comparison:</p><ul class='note'>{items}</ul>")


def suite_html(run: RunView, suite: str, *, heading: bool = True, charted: Collection[str] | None = None,
               collapsed: bool = False) -> str:
    """A suite's charts and tables. ``heading=False`` when its section names it already (a
    workload's); ``charted``: the headline metrics another figure draws already (each chart once;
    None: none), left out of the charts here; ``collapsed``: the headline table behind one click
    (the training numbers, which the answer and the study figures show)."""
    stats, head = run.stats, run.head
    suite_head = head[head["suite"] == suite]
    parts = [f"<h2>{html.escape(suite)}</h2>"] if heading else []
    if suite == Suite.NETWORK.value:
        parts.append(_network_note(run))
    drawn = suite_head[~suite_head["metric"].isin(list(charted or ()))]
    for metric in list(dict.fromkeys(drawn["metric"]))[:6]:
        rows = drawn[drawn["metric"] == metric]
        better = "higher" if bool(rows["higher_is_better"].iloc[0]) else "lower"
        png = normalized_chart(drawn, metric, f"{suite}: {metric} ({rows['unit'].iloc[0]}, {better} is better), "
                               "normalized to bare metal, 95% interval; + / − = significantly better / worse")
        if png:
            parts.append(f"<img alt='{html.escape(metric)}' src='data:image/png;base64,{png}'>")
    if collapsed:
        parts.append(f"<details><summary>Every training headline number ({len(suite_head)} rows: all scenarios, "
                     f"intervals, verdicts, flags)</summary>{table_html(suite_head)}</details>")
    else:
        parts.append(table_html(suite_head))
    details = stats[(stats["suite"] == suite) & ~stats.index.isin(suite_head.index)]
    if not details.empty:
        parts.append(f"<details><summary>All other metrics ({len(details)} rows: counters, step statistics)"
                     f"</summary>{table_html(details)}</details>")
    return "\n".join(parts)
