"""The serving suite's answer (issue 41): the request rate one instance of each platform sustains
at the latency target, what that means for a fleet, and how its tail latencies grow with the load.

- **Capacity table**: per platform and case, the capacity (the highest Poisson rate whose TTFT and
  TPOT 99th percentiles met the target: :mod:`dlbench.workloads.serving.capacity`) as the mean over
  the repetitions, its ×BM with the comparison's 95 % interval and verdict (the same statistics as
  every other row of the report), what kind of answer the jobs found (``measured`` between a rate
  that met the target and one that did not; ``at least`` the highest rate swept; ``below`` the
  lowest), the tokens/s served at that rate, and the instances needed per 100 requests/s
  (``ceil(100 / capacity)``: capacity is per instance, so a fleet scales by instances; a ``below``
  answer gives none).
- **Latency against load**: TTFT p99 and TPOT p99 against the offered Poisson rate, one line per
  platform (the mean over the repetitions at each rate), the target drawn as a flat line: where a
  platform's line crosses it is its capacity.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlbench.reports.analysis import compare
from dlbench.reports.analysis import serving as latency
from dlbench.reports.analysis.formatting import ratio
from dlbench.reports.rendering.charts import line_chart
from dlbench.reports.rendering.tables import verdict_html
from dlbench.reports.sections.base import RunView

SUITE = latency.SUITE
X_LABEL = "offered load (requests/s, Poisson)"
FLEET_RATE = 100.0
"""The demand the fleet column sizes for (requests/s): instances scale linearly with it."""


@dataclass(frozen=True)
class CapacityLine:
    platform: str
    case: str
    capacity: float
    """requests/s: the mean over the repetitions."""
    n: int
    normalized: float
    low: float
    high: float
    verdict: str
    bounds: tuple[str, ...]
    """What the repetitions found (``measured``, ``at_least``, ``below``), each once."""
    tokens: float
    """tokens/s served at the capacity (NaN: none measured)."""
    target: str
    row: Any
    """The comparison's row of the capacity (its verdict's details)."""

    @property
    def instances_per_fleet_rate(self) -> int | None:
        if "below" in self.bounds or not self.capacity > 0:
            return None
        return math.ceil(FLEET_RATE / self.capacity)


def _target(parameters: Mapping[str, Any] | None) -> str:
    p = parameters or {}
    return f"TTFT p99 ≤ {p.get('ttft_p99_ms', 0):g} ms, TPOT p99 ≤ {p.get('tpot_p99_ms', 0):g} ms"


def capacity_lines(run: RunView) -> list[CapacityLine]:
    """One line per platform and case of the run's serving results, bare metal first."""
    stats, frame = run.stats, run.frame
    if stats.empty or frame.empty:
        return []
    # One server on its own machine (the shared cells' capacities, alone and beside a training job,
    # and their degradation are in the suite's tables and the scenarios' figures).
    rows = stats[(stats["suite"] == SUITE) & (stats["metric"] == "capacity") & (stats["scenario"] == compare.SINGLE)]
    mine = frame[(frame["suite"] == SUITE) & (frame["metric"] == "capacity")]
    tokens = stats[(stats["suite"] == SUITE) & (stats["metric"] == "capacity_output_throughput")
                   & (stats["scenario"] == compare.SINGLE)]
    lines = []
    for r in rows.itertuples():
        docs = mine[(mine["platform"] == r.platform) & (mine["case_key"] == r.case_key)]
        bounds = tuple(sorted({str((ex or {}).get("capacity_bound", "")) for ex in docs["execution_labels"]} - {""}))
        served = tokens[(tokens["platform"] == r.platform) & (tokens["case_key"] == r.case_key)]
        parameters = docs["parameters"].iloc[0] if not docs.empty else {}
        lines.append(CapacityLine(
            platform=str(r.platform), case=str(r.cell), capacity=float(r.mean), n=int(r.n),
            normalized=float(r.normalized), low=float(r.normalized_ci_low), high=float(r.normalized_ci_high),
            verdict=str(r.verdict), bounds=bounds, target=_target(parameters), row=r,
            tokens=float(served["mean"].iloc[0]) if not served.empty else math.nan))
    return sorted(lines, key=lambda line: (line.case, compare.platform_rank(line.platform), line.platform))


def _bound_text(bounds: tuple[str, ...]) -> str:
    return ", ".join(b.replace("_", " ") for b in bounds) or "?"


def _ratio_text(line: CapacityLine) -> str:
    if line.platform == compare.BASELINE:
        return "baseline"
    if not math.isfinite(line.normalized):
        return "–"
    interval = (f" [{ratio(line.low)}, {ratio(line.high)}]" if math.isfinite(line.low) and math.isfinite(line.high)
                else "")
    return f"×{ratio(line.normalized)}{interval}"


class ServingSection:
    """Capacity at the latency target, per platform, and the latency-against-load curves."""

    id = "serving"
    title: str | None = "Serving capacity"
    style = ""

    def lines(self, run: RunView) -> list[CapacityLine]:
        return run.memo("serving", lambda: capacity_lines(run))

    def html(self, run: RunView) -> str:
        lines = self.lines(run)
        if not lines:
            return ""
        rows = "".join(
            f"<tr><td>{html.escape(line.case)}</td><td>{html.escape(line.platform)}</td>"
            f"<td>{line.capacity:.3g}</td><td>{html.escape(_ratio_text(line))}</td>"
            f"<td>{verdict_html(line.row, short=True) if line.platform != compare.BASELINE else ''}</td>"
            f"<td>{html.escape(_bound_text(line.bounds))}</td>"
            f"<td>{'' if math.isnan(line.tokens) else f'{line.tokens:.4g}'}</td>"
            f"<td>{line.instances_per_fleet_rate if line.instances_per_fleet_rate is not None else '–'}</td>"
            f"<td>{line.n}</td></tr>" for line in lines)
        charts = [line_chart(curve.series, x_label=X_LABEL, y_label="ms", title=f"{curve.title} against the load",
                             chart_id=f"serving-{curve.metric}") for curve in latency.curve_series(run.frame)]
        return (f"<h2 id='serving'>Serving capacity at the latency target</h2>"
                f"<p class='note'>Requests per second one instance sustains with {html.escape(lines[0].target)} "
                "(vLLM under Poisson arrivals; the highest rate that met the target, swept then bisected), the "
                f"mean over n repetitions with its ×BM and 95% interval; instances needed per {FLEET_RATE:g} "
                "requests/s = ⌈100 / capacity⌉. <em>at least</em>: every swept rate met the target (sweep higher); "
                "<em>below</em>: none did.</p>"
                "<table><tr><th>case</th><th>platform</th><th>capacity (requests/s)</th><th>×BM</th>"
                "<th>verdict</th><th>answer</th><th>tokens/s at capacity</th>"
                f"<th>instances per {FLEET_RATE:g} requests/s</th><th>n</th></tr>{rows}</table>" + "".join(charts))

    def text(self, run: RunView) -> list[str]:
        lines = self.lines(run)
        if not lines:
            return []
        out = [f"Serving capacity ({lines[0].target}; instances per {FLEET_RATE:g} requests/s):"]
        for line in lines:
            fleet = line.instances_per_fleet_rate
            out.append(f"  {line.case} {line.platform}: {line.capacity:.3g} requests/s ({_bound_text(line.bounds)}), "
                       f"{_ratio_text(line)} {'' if line.platform == compare.BASELINE else line.verdict}".rstrip()
                       + f"; {fleet if fleet is not None else 'no'} instances per {FLEET_RATE:g} requests/s")
        return out
