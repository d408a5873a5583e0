"""The results explorer's queries: read-only, parameterised SQLAlchemy selects over the warehouse.

Each function takes an engine and plain filter values and returns JSON-able data; the FastAPI
app (:mod:`dlbench.ui.app`) only validates inputs and renders. Every value reaches the database
as a bound parameter (SQLAlchemy expressions, ``IN`` lists included): no SQL is built from input.
"""

from __future__ import annotations

import json
import math
import statistics as pystats
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select

from dlbench.reports import capacity as cap
from dlbench.reports import compare, metrics, stats
from dlbench.reports.regression import change_points
from dlbench.warehouse.models import Benchmark, Environment, Execution, Run, Sample

MAX_RUNS = 200


@dataclass
class Filters:
    runs: list[str] = field(default_factory=list)
    since: datetime | None = None
    until: datetime | None = None
    scheduled_only: bool = False
    suite: str = "tf_cnn"
    model: str | None = None
    data: str | None = None
    scenario: str | None = None
    platforms: list[str] = field(default_factory=list)
    metric: str | None = None


def options(engine: Engine) -> dict[str, Any]:
    """What the filters offer: runs (newest first), suites, models, data kinds, scenarios, platforms,
    hardware types, metrics."""
    with engine.connect() as conn:
        runs = conn.execute(select(Run.run_id, Run.dag_id, Run.started_at, Run.scheduled)
                            .order_by(Run.started_at.desc().nulls_last(), Run.id.desc()).limit(MAX_RUNS)).all()
        benches = conn.execute(select(Benchmark.suite, Benchmark.name, Benchmark.parameters)).all()
        platforms = [r[0] for r in conn.execute(select(Execution.platform).distinct())]
        hardware = sorted({name for r in conn.execute(
            select(Environment.gpu_model, Environment.cpu_model).distinct()) if (name := r[0] or r[1])})
    order = {p: i for i, p in enumerate(compare.PLATFORM_ORDER)}
    suites = sorted({b.suite for b in benches})
    return {
        "runs": [{"run_id": r.run_id, "dag_id": r.dag_id, "scheduled": bool(r.scheduled),
                  "started_at": r.started_at.isoformat() if r.started_at else None} for r in runs],
        "suites": suites,
        "models": {s: sorted({b.name for b in benches if b.suite == s}) for s in suites},
        "data": sorted({str(b.parameters.get("data")) for b in benches if (b.parameters or {}).get("data")}),
        "scenarios": sorted({compare.scenario_of(b.parameters) for b in benches},
                            key=lambda s: compare.SCENARIOS.index(s) if s in compare.SCENARIOS else 99),
        "platforms": sorted(platforms, key=lambda p: (order.get(p, len(order)), p)),
        "hardware": hardware,
        "metrics": {s: list(metrics.HEADLINE.get(s, [])) for s in suites},
    }


def _metric_filter(f: Filters) -> list[str] | None:
    if f.metric:
        return [f.metric]
    return list(metrics.HEADLINE[f.suite]) if f.suite in metrics.HEADLINE else None


def _case_rows(engine: Engine, f: Filters, *, run_filter: bool) -> list[dict[str, Any]]:
    query = (
        select(Run.run_id, Run.dag_id, Run.started_at, Execution.id.label("execution_id"), Execution.platform,
               Execution.labels.label("execution_labels"), Benchmark.suite, Benchmark.name, Benchmark.parameters,
               Sample.metric, Sample.value, Sample.unit, Sample.labels)
        .join(Execution, Execution.run_pk == Run.id)
        .join(Benchmark, Benchmark.id == Execution.benchmark_id)
        .join(Sample, Sample.execution_id == Execution.id)
        .where(Execution.status == "ok", Benchmark.suite == f.suite, Sample.metric.not_in(compare.PER_STEP))
    )
    wanted = _metric_filter(f)
    if wanted is not None:
        query = query.where(Sample.metric.in_(wanted))
    if f.model:
        query = query.where(Benchmark.name == f.model)
    if f.platforms:
        query = query.where(Execution.platform.in_(f.platforms))
    if run_filter and f.runs:
        query = query.where(Run.run_id.in_(f.runs[:MAX_RUNS]))
    if f.since is not None:
        query = query.where(Run.started_at >= f.since)
    if f.until is not None:
        query = query.where(Run.started_at <= f.until)
    if f.scheduled_only:
        query = query.where(Run.scheduled.is_(True))
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(query).mappings()]
    out = []
    for r in rows:
        params = r["parameters"] or {}
        if f.data and str(params.get("data")) != f.data:
            continue
        if f.scenario and compare.scenario_of(params) != f.scenario:
            continue
        if not metrics.is_tabled(r["metric"], r["labels"]) or not compare.is_case_document(r["execution_labels"]):
            continue
        r["case"] = compare.case_name(r["suite"], r["name"], params, r["labels"], r["execution_labels"])
        r["case_id"] = json.dumps([compare.case_key(params), r["labels"] or {}], sort_keys=True)
        out.append(r)
    return out


def latest_runs(engine: Engine, n: int = 1) -> list[str]:
    with engine.connect() as conn:
        return list(conn.scalars(select(Run.run_id).order_by(Run.started_at.desc().nulls_last(), Run.id.desc())
                                 .limit(n)))


def _num(v: float | None) -> float | None:
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def comparison(engine: Engine, f: Filters) -> list[dict[str, Any]]:
    """Per case, metric and platform over the selected runs: n (executions), mean, std, normalized to
    bare metal, its confidence interval and the verdict (dlbench.reports.stats: Welch's t)."""
    if not f.runs and f.since is None and f.until is None:
        f.runs = latest_runs(engine)
    rows = _case_rows(engine, f, run_filter=True)
    per_exec: dict[tuple, dict[int, list[float]]] = {}
    for r in rows:
        key = (r["case_id"], r["case"], r["metric"], r["unit"], r["platform"])
        per_exec.setdefault(key, {}).setdefault(r["execution_id"], []).append(float(r["value"]))
    values = {k: [pystats.fmean(v) for v in by_exec.values()] for k, by_exec in per_exec.items()}
    order = {p: i for i, p in enumerate(compare.PLATFORM_ORDER)}
    out = []
    for (case_id, case, metric, unit, platform), vals in values.items():
        base = values.get((case_id, case, metric, unit, compare.BASELINE))
        mean = pystats.fmean(vals)
        row: dict[str, Any] = {"case": case, "metric": metric, "unit": unit, "platform": platform, "n": len(vals),
                               "mean": mean, "std": pystats.stdev(vals) if len(vals) > 1 else None,
                               "normalized": None, "ci_low": None, "ci_high": None, "verdict": "not_compared"}
        higher = metrics.higher_is_better(metric, unit)
        if platform == compare.BASELINE:
            row.update(normalized=1.0, verdict=stats.Verdict.BASELINE.value)
        elif base and metric not in metrics.RELATIVE and pystats.fmean(base) != 0:
            base_mean = pystats.fmean(base)
            result = stats.compare(vals, base, higher)
            scaled = result.scaled(base_mean)
            row.update(normalized=mean / base_mean, ci_low=_num(scaled["normalized_ci_low"]),
                       ci_high=_num(scaled["normalized_ci_high"]), verdict=result.verdict.value)
        out.append(row)
    return sorted(out, key=lambda r: (r["case"], r["metric"], order.get(r["platform"], 99), r["platform"]))


def trend(engine: Engine, f: Filters, case: str | None = None) -> dict[str, Any]:
    """One case's mean per run and platform over time (scheduled runs unless runs are picked),
    with the change points (:func:`dlbench.reports.regression.change_points`) per platform."""
    if not f.metric:
        f.metric = (metrics.HEADLINE.get(f.suite) or ["throughput"])[0]
    if not f.runs:
        f.scheduled_only = True
    rows = _case_rows(engine, f, run_filter=True)
    cases = sorted({r["case"] for r in rows})
    chosen = case if case in cases else (cases[0] if cases else None)
    runs: dict[str, tuple] = {}
    series: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        if r["case"] != chosen:
            continue
        runs[r["run_id"]] = (r["started_at"].isoformat() if r["started_at"] else "", r["run_id"], r["dag_id"])
        series.setdefault(r["platform"], {}).setdefault(r["run_id"], []).append(float(r["value"]))
    ordered = sorted(runs.values())
    index = {run_id: i for i, (_, run_id, _) in enumerate(ordered)}
    out_series, marks = {}, {}
    for platform, by_run in series.items():
        points = sorted((index[run_id], pystats.fmean(v)) for run_id, v in by_run.items())
        out_series[platform] = points
        cps = change_points([y for _, y in points])
        marks[platform] = [points[i] for i in cps]
    return {"case": chosen, "cases": cases, "metric": f.metric,
            "unit": next((r["unit"] for r in rows if r["case"] == chosen), ""),
            "runs": [{"run_id": run_id, "started_at": started, "dag_id": dag_id}
                     for started, run_id, dag_id in ordered],
            "series": out_series, "change_points": marks}


def capacity(engine: Engine, hardware: str | None, f: Filters, prices: Any = None) -> dict[str, Any]:
    kinds = cap.hardware_types(engine)
    hardware = hardware if hardware in kinds else (kinds[0] if kinds else None)
    model = f.model
    if model is None:
        with engine.connect() as conn:
            model = conn.scalar(select(Benchmark.name).where(Benchmark.suite == "tf_cnn").order_by(Benchmark.name)
                                .limit(1))
    if hardware is None or model is None:
        return {"hardware": hardware, "model": model, "rows": []}
    rows = cap.capacity(engine, hardware, model, data=f.data, runs=f.runs or None, prices=prices)
    return {"hardware": hardware, "hardware_types": kinds, "model": model, "rows": [r.as_dict() for r in rows]}


def dag_runs(engine: Engine, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The Airflow DAG run behind each warehouse run: its DAG id and real run id (the warehouse
    keeps a file-safe run id; the run's tags hold Airflow's own, with its ':' and '+')."""
    if not run_ids:
        return []
    with engine.connect() as conn:
        rows = {r.run_id: r for r in conn.execute(
            select(Run.run_id, Run.dag_id, Run.tags).where(Run.run_id.in_(list(run_ids)[:MAX_RUNS])))}
    out = []
    for run_id in run_ids:
        row = rows.get(run_id)
        tags = (row.tags if row is not None else None) or {}
        out.append({"run_id": run_id, "dag_id": (row.dag_id if row is not None else None) or "dlbench_benchmark",
                    "dag_run_id": tags.get("dag_run_id") or run_id})
    return out


def runs_between(engine: Engine, since: datetime | None, until: datetime | None) -> Sequence[str]:
    query = select(Run.run_id).where(Run.scheduled.is_(True))
    if since is not None:
        query = query.where(Run.started_at >= since)
    if until is not None:
        query = query.where(Run.started_at <= until)
    with engine.connect() as conn:
        return list(conn.scalars(query.order_by(Run.started_at)))
