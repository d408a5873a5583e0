"""The serving suite's latency against the offered load, from the warehouse's samples: what the
report's serving section and the explorer's serving view both draw (issue 41).

Each Poisson load point of a serving job is a case of its own in the warehouse (its ``load`` and
``rate`` labels); its TTFT and TPOT 99th percentiles are samples. Here they become, per platform,
one point per offered rate: the mean over every repetition (and, in the explorer, every selected
run) at that rate, with how many samples it averages, and the latency target as a flat line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from dlbench.reports.analysis import compare
from dlbench.suites import Suite

SUITE = Suite.SERVING.value
CURVES = (("ttft_p99", "ttft_p99_ms", "time to first token, p99"),
          ("tpot_p99", "tpot_p99_ms", "time per output token, p99"))
"""The latencies drawn against the load: (metric, the target's field in the case's parameters, title)."""
TARGET = "target"
"""The series name of the latency target's flat line."""


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
