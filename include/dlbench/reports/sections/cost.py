"""The cost section: cost per 1000 images per platform, model and data kind of the run's
single-instance training, when host prices are set (docs/capacity.md); part of the answer (no
entry of its own in the navigation), and then the answer's heading promises a cost. The page
shows it as a table, the text summary as one line per row.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd
from sqlalchemy import Engine

from dlbench.reports.analysis import capacity, compare
from dlbench.reports.analysis import stats as st
from dlbench.reports.analysis.formatting import ci_text, fmt
from dlbench.reports.rendering.tables import scroll
from dlbench.reports.sections import scenarios
from dlbench.reports.sections.base import RunView


@dataclass(frozen=True)
class CostRow:
    """One cost of the run: a hardware kind, model and data kind, and its capacity row (a platform at
    a measured density, with the cost per 1000 images and its interval)."""

    hardware: str
    model: str
    data: str
    row: capacity.CapacityRow


def cost_rows(engine: Engine, run_id: str, frame: pd.DataFrame, prices: capacity.Prices | None) -> list[CostRow]:
    """Cost per 1000 images per platform, model and data kind of this run's single-instance
    training (:func:`dlbench.reports.analysis.capacity.capacity`, at the measured densities), when host
    prices are set; none otherwise (then the answer's heading promises no cost)."""
    if prices is None or frame.empty:
        return []
    cells = frame[(frame["suite"] == scenarios.SUITE) & (frame["scenario"] == compare.SINGLE)]
    pairs = list(dict.fromkeys((str(r.name), str((r.parameters or {}).get("data") or "")) for r in cells.itertuples()))
    return [CostRow(hardware, model, data, r)
            for hardware in capacity.hardware_types(engine) for model, data in pairs
            for r in capacity.capacity(engine, hardware, model, data=data or None, runs=[run_id], prices=prices)
            if r.cost_per_1000 is not None]


def cost_html(rows: list[CostRow]) -> str:
    """The cost table; "" without costs."""
    if not rows:
        return ""
    body = "".join(f"<tr><td>{html.escape(c.hardware)}</td><td>{html.escape(c.model)}</td>"
                   f"<td>{html.escape(c.data or '-')}</td><td>{html.escape(c.row.platform)}</td>"
                   f"<td>{c.row.instances_per_host}</td><td>{c.row.n}</td><td>{fmt(c.row.per_host)}</td>"
                   f"<td>{fmt(c.row.cost_per_1000)} {html.escape(c.row.currency or '')}</td>"
                   f"<td class='nw'>{ci_text(c.row.cost_ci_low, c.row.cost_ci_high)}</td></tr>" for c in rows)
    return ("<h3 id='cost'>Cost per 1000 images</h3><p class='note'>Host price per hour (Airflow Variable "
            "<code>dlbench_host_prices</code> or prices.yaml, docs/capacity.md) / images per host-hour, from this "
            "run's mean single-instance throughput and, per density, the measured tenant degradation.</p>"
            + scroll("<table><tr><th>hardware</th><th>model</th><th>data</th><th>platform</th><th>instances per "
                     "host</th><th>n</th><th>images/s per host</th><th>cost per 1000 images</th>"
                     f"<th>{st.DEFAULT_CONFIDENCE * 100:.0f}% interval</th></tr>" + body + "</table>"))


def cost_lines(rows: list[CostRow]) -> list[str]:
    """The cost table as the text summary's lines; none without costs."""
    if not rows:
        return []
    confidence = f"{st.DEFAULT_CONFIDENCE * 100:.0f}%"
    return ["", f"COST per 1000 images (host price per hour / images per host-hour; {confidence} interval):",
            *(f"  {c.hardware} {c.model} {c.data or '-'} {c.row.platform} x{c.row.instances_per_host}: "
              f"{fmt(c.row.cost_per_1000)} {c.row.currency or ''} {ci_text(c.row.cost_ci_low, c.row.cost_ci_high)} "
              f"n={c.row.n}" for c in rows)]


class CostSection:
    """The cost table (see the module docstring); nothing without prices."""

    id = "cost"
    title: str | None = None
    style = ""

    def rows(self, run: RunView) -> list[CostRow]:
        """The run's costs, computed once per report (the answer's heading reads them too)."""
        return run.memo("cost", lambda: cost_rows(run.engine, run.run_id, run.frame, capacity.load_prices()))

    def html(self, run: RunView) -> str:
        return cost_html(self.rows(run))

    def text(self, run: RunView) -> list[str]:
        return cost_lines(self.rows(run))


COST = CostSection()
