"""The serving suite's latency against the offered load, from the warehouse's samples: what the
report's serving section and the explorer's serving view both draw (issue 41).

Each Poisson load point of a serving job is a case of its own in the warehouse (its ``load`` and
``rate`` labels); its TTFT and TPOT 99th percentiles are samples. Here they become, per platform,
one point per offered rate: the mean over every repetition (and, in the explorer, every selected
run) at that rate, with how many samples it averages, and the latency target as a flat line.

The capacity answer too (:func:`capacity_lines`): per platform and case, the capacity at the
target from the comparison's row (mean, ×BM, interval, verdict), what kind of answer the jobs
found, the tokens/s there, and the instances a demand of R requests/s needs
(:meth:`CapacityLine.instances_for`): the report sizes for :data:`FLEET_RATE`, the explorer for
the rate its reader types.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dlbench.reports.analysis import compare
from dlbench.reports.analysis.formatting import ratio
from dlbench.suites import Suite

SUITE = Suite.SERVING.value
CURVES = (("ttft_p99", "ttft_p99_ms", "time to first token, p99"),
          ("tpot_p99", "tpot_p99_ms", "time per output token, p99"))
"""The latencies drawn against the load: (metric, the target's field in the case's parameters, title)."""
TARGET = "target"
"""The series name of the latency target's flat line."""
FLEET_RATE = 100.0
"""The demand (requests/s) the report sizes a fleet for; instances scale linearly with it."""


@dataclass(frozen=True)
class LatencyPoint:
    rate: float
    """The offered load (requests/s, Poisson)."""
    ms: float
    """The mean of the metric's samples at that rate, in milliseconds."""
    n: int
    """How many samples the mean is of (repetitions, times runs)."""


@dataclass(frozen=True)
class Curve:
    metric: str
    title: str
    points: dict[str, list[LatencyPoint]]
    """Per platform (in the report's order), its points."""
    target_ms: float
    """The latency target (NaN when the cases state none)."""

    @property
    def series(self) -> dict[str, list[tuple[float, float]]]:
        """What a line chart draws: (rate, ms) per platform, then :data:`TARGET`'s flat line across
        every rate drawn when there is a target (where a platform's line crosses it is its capacity)."""
        series = {platform: [(p.rate, p.ms) for p in points] for platform, points in self.points.items()}
        if math.isfinite(self.target_ms):
            rates = [p.rate for points in self.points.values() for p in points]
            series[TARGET] = [(min(rates), self.target_ms), (max(rates), self.target_ms)]
        return series


def latency_points(frame: pd.DataFrame, metric: str) -> dict[str, list[LatencyPoint]]:
    """Per platform (the report's order), the single scenario's Poisson points of ``metric``."""
    if frame.empty:
        return {}
    rows = frame[(frame["suite"] == SUITE) & (frame["metric"] == metric) & (frame["scenario"] == compare.SINGLE)]
    found: dict[str, dict[float, list[float]]] = {}
    for r in rows.itertuples():
        labels = r.labels or {}
        if labels.get("load") != "poisson":
            continue
        found.setdefault(str(r.platform), {}).setdefault(float(labels["rate"]), []).append(float(r.value) * 1000)
    return {platform: [LatencyPoint(rate, sum(v) / len(v), len(v)) for rate, v in sorted(points.items())]
            for platform, points in sorted(found.items(), key=lambda kv: compare.platform_rank(kv[0]))}


def target_of(frame: pd.DataFrame) -> dict[str, float]:
    """The latency target the serving cases ran against (their parameters' ``*_ms`` fields), from
    the first case: one profile's cases share it."""
    parameters = frame[frame["suite"] == SUITE]["parameters"] if not frame.empty else pd.Series(dtype=object)
    first = parameters.iloc[0] if not parameters.empty else {}
    return {field: float(first[field]) for _, field, _ in CURVES if (first or {}).get(field) is not None}


def curve_series(frame: pd.DataFrame) -> list[Curve]:
    """Each latency of :data:`CURVES` that has points, with the target it ran against."""
    target = target_of(frame)
    return [Curve(metric, title, points, target.get(field, math.nan))
            for metric, field, title in CURVES if (points := latency_points(frame, metric))]


@dataclass(frozen=True)
class CapacityLine:
    """One platform's capacity at the latency target for one case, over the repetitions compared."""

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

    def instances_for(self, demand: float) -> int | None:
        """Instances of this platform that serve ``demand`` requests/s within the target:
        ``ceil(demand / capacity)`` (capacity is per instance, so a fleet scales by instances); None
        when no rate met the target (a ``below`` answer) or there is no capacity."""
        if "below" in self.bounds or not self.capacity > 0:
            return None
        return math.ceil(demand / self.capacity)

    @property
    def answer(self) -> str:
        """What kind of answer the repetitions found, as a reader reads it (``measured``, ``at
        least``: every swept rate met the target, ``below``: none did)."""
        return ", ".join(b.replace("_", " ") for b in self.bounds) or "?"

    @property
    def ratio_text(self) -> str:
        """×BM with its 95 % interval (``baseline`` for bare metal itself)."""
        if self.platform == compare.BASELINE:
            return "baseline"
        if not math.isfinite(self.normalized):
            return "–"
        interval = (f" [{ratio(self.low)}, {ratio(self.high)}]"
                    if math.isfinite(self.low) and math.isfinite(self.high) else "")
        return f"×{ratio(self.normalized)}{interval}"

    @property
    def instances_per_fleet_rate(self) -> int | None:
        """:meth:`instances_for` the report's :data:`FLEET_RATE`."""
        return self.instances_for(FLEET_RATE)


def target_text(parameters: Mapping[str, Any] | None) -> str:
    """The latency target a case ran against, as a reader reads it."""
    p = parameters or {}
    return f"TTFT p99 ≤ {p.get('ttft_p99_ms', 0):g} ms, TPOT p99 ≤ {p.get('tpot_p99_ms', 0):g} ms"


def capacity_lines(frame: pd.DataFrame, stats: pd.DataFrame) -> list[CapacityLine]:
    """One line per platform and case of the serving results in ``frame`` (one run's or the
    explorer's selected runs') and their comparison ``stats``, bare metal first. One server on its
    own machine: the shared cells' capacities, alone and beside a training job, and their
    degradation are in the suite's tables and the scenarios' figures."""
    if stats.empty or frame.empty:
        return []
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
            verdict=str(r.verdict), bounds=bounds, target=target_text(parameters), row=r,
            tokens=float(served["mean"].iloc[0]) if not served.empty else math.nan))
    return sorted(lines, key=lambda line: (line.case, compare.platform_rank(line.platform), line.platform))
