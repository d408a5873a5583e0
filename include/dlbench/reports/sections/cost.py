"""The cost section: cost per 1000 images per platform, model and data kind of the run's
single-instance training, when host prices are set (docs/capacity.md); part of the answer (no
entry of its own in the navigation), and then the answer's heading promises a cost.
"""

from __future__ import annotations

import html

import pandas as pd
from sqlalchemy import Engine

from dlbench.reports.analysis import capacity, compare
from dlbench.reports.analysis import stats as st
from dlbench.reports.analysis.formatting import ci_text, fmt
from dlbench.reports.rendering.tables import scroll
from dlbench.reports.sections import scenarios
from dlbench.reports.sections.base import RunView


def cost_html(engine: Engine, run_id: str, frame: pd.DataFrame, prices: capacity.Prices | None) -> str:
    """Cost per 1000 images per platform, model and data kind of this run's single-instance
    training (:func:`dlbench.reports.analysis.capacity.capacity`, at the measured densities), when host
    prices are set; "" otherwise (then the page's heading promises no cost)."""
    if prices is None or frame.empty:
        return ""
    cells = frame[(frame["suite"] == scenarios.SUITE) & (frame["scenario"] == compare.SINGLE)]
    pairs = list(dict.fromkeys((str(r.name), str((r.parameters or {}).get("data") or "")) for r in cells.itertuples()))
    rows = []
    for hardware in capacity.hardware_types(engine):
        for model, data in pairs:
            for r in capacity.capacity(engine, hardware, model, data=data or None, runs=[run_id], prices=prices):
                if r.cost_per_1000 is not None:
                    rows.append(f"<tr><td>{html.escape(hardware)}</td><td>{html.escape(model)}</td>"
                                f"<td>{html.escape(data or '-')}</td><td>{html.escape(r.platform)}</td>"
                                f"<td>{r.instances_per_host}</td><td>{r.n}</td><td>{fmt(r.per_host)}</td>"
                                f"<td>{fmt(r.cost_per_1000)} {html.escape(r.currency or '')}</td>"
                                f"<td class='nw'>{ci_text(r.cost_ci_low, r.cost_ci_high)}</td></tr>")
    if not rows:
        return ""
    return ("<h3 id='cost'>Cost per 1000 images</h3><p class='note'>Host price per hour (Airflow Variable "
            "<code>dlbench_host_prices</code> or prices.yaml, docs/capacity.md) / images per host-hour, from this "
            "run's mean single-instance throughput and, per density, the measured tenant degradation.</p>"
            + scroll("<table><tr><th>hardware</th><th>model</th><th>data</th><th>platform</th><th>instances per "
                     "host</th><th>n</th><th>images/s per host</th><th>cost per 1000 images</th>"
                     f"<th>{st.DEFAULT_CONFIDENCE * 100:.0f}% interval</th></tr>" + "".join(rows) + "</table>"))


class CostSection:
    """The cost table (see the module docstring); nothing without prices."""

    id = "cost"
    title: str | None = None
    style = ""

    def html(self, run: RunView) -> str:
        return run.memo("cost", lambda: cost_html(run.engine, run.run_id, run.frame, capacity.load_prices()))

    def text(self, run: RunView) -> list[str]:
        return []


COST = CostSection()
