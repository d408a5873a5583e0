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

from dlbench.reports.analysis import compare
from dlbench.reports.analysis import serving as latency
from dlbench.reports.analysis.serving import CapacityLine
from dlbench.reports.rendering.charts import line_chart
from dlbench.reports.rendering.tables import verdict_html
from dlbench.reports.sections.base import RunView

SUITE = latency.SUITE
X_LABEL = "offered load (requests/s, Poisson)"
FLEET_RATE = latency.FLEET_RATE


def capacity_lines(run: RunView) -> list[CapacityLine]:
    """One line per platform and case of the run's serving results, bare metal first."""
    return latency.capacity_lines(run.frame, run.stats)


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
            f"<td>{line.capacity:.3g}</td><td>{html.escape(line.ratio_text)}</td>"
            f"<td>{verdict_html(line.row, short=True) if line.platform != compare.BASELINE else ''}</td>"
            f"<td>{html.escape(line.answer)}</td>"
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
            out.append(f"  {line.case} {line.platform}: {line.capacity:.3g} requests/s ({line.answer}), "
                       f"{line.ratio_text} {'' if line.platform == compare.BASELINE else line.verdict}".rstrip()
                       + f"; {fleet if fleet is not None else 'no'} instances per {FLEET_RATE:g} requests/s")
        return out
