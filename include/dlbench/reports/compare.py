"""Platform comparisons computed from the warehouse (never from memory).

For every case (suite, benchmark, requested parameters, metric, labels) and platform:
n, mean, std and coefficient of variation over repetitions; then, against bare metal,
``diff_pct = (H - D) / H * 100`` (study 001's Diff%, H = bare metal, D = the other platform)
and ``normalized = D / H`` (the core study's figures: bare metal = 1.0).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from dlbench.reports import metrics
from dlbench.warehouse.models import Benchmark, Execution, Run, Sample

BASELINE = "bare_metal"
PLATFORM_ORDER = ["bare_metal", "container_on_bare_metal", "virtual_machine", "container_on_vm"]

PER_STEP = metrics.EXCLUDED
"""Excluded in SQL already: the bulk of the rows (one per training step)."""

CASE_PARAMETERS = {"tf_cnn": {"data": "{}", "batch_size_per_device": "batch {}", "image_size": "{}px"}}
"""Which requested parameters name a case in the report, and how (the rest are in the warehouse)."""


# The metric table lives in dlbench.reports.metrics; these names stay importable from here.
HEADLINE = metrics.HEADLINE
DIAGNOSTIC = metrics.DIAGNOSTIC
is_diagnostic = metrics.is_diagnostic
higher_is_better = metrics.higher_is_better


def latest_run_id(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return conn.scalar(select(Run.run_id).order_by(Run.started_at.desc().nulls_last(), Run.id.desc()).limit(1))


def samples_frame(engine: Engine, run_id: str | None) -> pd.DataFrame:
    """One row per sample of the run's successful executions (per-step samples excluded)."""
    query = (
        select(Run.run_id, Execution.job_id, Execution.platform, Execution.repetition, Execution.status,
               Benchmark.suite, Benchmark.name, Benchmark.parameters, Benchmark.parameters_hash,
               Sample.metric, Sample.value, Sample.unit, Sample.labels)
        .join(Execution, Execution.run_pk == Run.id)
        .join(Benchmark, Benchmark.id == Execution.benchmark_id)
        .join(Sample, Sample.execution_id == Execution.id)
        .where(Execution.status == "ok", Sample.metric.not_in(PER_STEP))
    )
    if run_id is not None:
        query = query.where(Run.run_id == run_id)
    with engine.connect() as conn:
        frame = pd.DataFrame(conn.execute(query).mappings().all())
    if frame.empty:
        return frame
    frame = frame[[metrics.is_tabled(m, lab) for m, lab in zip(frame["metric"], frame["labels"], strict=True)]]
    if frame.empty:
        return frame.reset_index(drop=True)
    frame = frame.reset_index(drop=True)
    frame["labels_key"] = frame["labels"].map(lambda d: json.dumps(d or {}, sort_keys=True))
    frame["case"] = [case_name(s, n, p, lab) for s, n, p, lab in
                     zip(frame["suite"], frame["name"], frame["parameters"], frame["labels"], strict=True)]
    return frame


def case_name(suite: str, name: str, parameters: dict[str, Any], labels: dict[str, Any]) -> str:
    """A readable name for a case: the benchmark, its distinguishing parameters and labels."""
    formats = CASE_PARAMETERS.get(suite, {})
    parts = [name] if name != suite else []
    parts += [fmt.format(parameters[k]) for k, fmt in formats.items() if k in parameters]
    shown = {k: v for k, v in sorted((labels or {}).items())
             if k not in ("model", "data", "batch_size", "source", "tool")
             and not (k == "scope" and v in ("process", "process_start_to_end"))}
    parts += [f"{k}={v}" for k, v in shown.items()]
    return " ".join(str(p) for p in parts) or name


def statistics(frame: pd.DataFrame) -> pd.DataFrame:
    """n, mean, std, cv per case x metric x platform, with Diff% and normalized vs bare metal."""
    if frame.empty:
        return pd.DataFrame(columns=["suite", "case", "metric", "unit", "platform", "n", "mean", "std", "cv",
                                     "diff_pct", "normalized", "higher_is_better"])
    keys = ["suite", "name", "parameters_hash", "case", "metric", "unit", "labels_key"]
    stats = (frame.groupby(keys + ["platform"], sort=False)["value"]
             .agg(n="count", mean="mean", std="std").reset_index())
    # Two distinct cases (other parameters or labels) must never share a display name: charts and
    # tables index by it. Suffix the ambiguous ones with a short id of what distinguishes them.
    ambiguous = stats.duplicated(["suite", "case", "metric", "platform"], keep=False)
    if ambiguous.any():
        ids = stats["parameters_hash"].str[:6] + stats["labels_key"].map(
            lambda k: hashlib.sha256(k.encode()).hexdigest()[:4])
        stats.loc[ambiguous, "case"] = stats.loc[ambiguous, "case"] + " #" + ids[ambiguous]
    # One repetition has no spread: std and CV stay NaN (shown as "-"), never a misleading 0.
    stats["cv"] = stats["std"] / stats["mean"].where(stats["mean"] != 0)
    base = stats[stats["platform"] == BASELINE][keys + ["mean"]].rename(columns={"mean": "baseline"})
    stats = stats.merge(base, on=keys, how="left")
    stats["diff_pct"] = (stats["baseline"] - stats["mean"]) / stats["baseline"].where(stats["baseline"] != 0) * 100
    stats["normalized"] = stats["mean"] / stats["baseline"].where(stats["baseline"] != 0)
    stats["higher_is_better"] = [higher_is_better(m, u) for m, u in zip(stats["metric"], stats["unit"], strict=True)]
    order = {p: i for i, p in enumerate(PLATFORM_ORDER)}
    stats["_p"] = stats["platform"].map(lambda p: order.get(p, len(order)))
    # Headline metrics first, in their declared order, then the rest alphabetically.
    stats["_m"] = [HEADLINE.get(s, []).index(m) if m in HEADLINE.get(s, []) else len(HEADLINE.get(s, []))
                   for s, m in zip(stats["suite"], stats["metric"], strict=True)]
    return stats.sort_values(["suite", "_m", "metric", "case", "_p"]).drop(columns=["_p", "_m", "labels_key"])


def headline(stats: pd.DataFrame) -> pd.DataFrame:
    """The rows a reader looks at first: headline metrics per suite."""
    if stats.empty:
        return stats
    keep = [metrics.is_headline(s, m) for s, m in zip(stats["suite"], stats["metric"], strict=True)]
    return stats[keep]


def problems(engine: Engine, run_id: str | None) -> pd.DataFrame:
    """Failed and skipped executions, with their reasons."""
    query = (
        select(Execution.platform, Benchmark.suite, Benchmark.name, Execution.repetition, Execution.status,
               Execution.error)
        .join(Run, Execution.run_pk == Run.id)
        .join(Benchmark, Benchmark.id == Execution.benchmark_id)
        .where(Execution.status != "ok")
    )
    if run_id is not None:
        query = query.where(Run.run_id == run_id)
    with engine.connect() as conn:
        return pd.DataFrame(conn.execute(query.order_by(Execution.platform, Benchmark.name)).mappings().all())
