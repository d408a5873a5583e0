"""The results explorer's queries: read-only, parameterised SQLAlchemy selects over the warehouse.

Each function takes an engine and plain filter values and returns JSON-able data; the FastAPI
app (:mod:`dlbench.ui.app`) only validates inputs and renders. Every value reaches the database
as a bound parameter (SQLAlchemy expressions, ``IN`` lists included): no SQL is built from input.

Every view reads the same selection (:func:`selected_runs`) with the same filters, the suite
and the framework included, so the comparison, the trend and the capacity table never answer
different questions. The framework filter is the warehouse's ``benchmarks.framework`` (lower
case, ``tensorflow`` for a tf_cnn case that names none); what a page shows is the report's name
for it (:func:`dlbench.reports.analysis.answer.framework_of`).
Nothing here computes a statistic: the comparison's intervals, verdicts, n and flags are the
columns of :func:`dlbench.reports.analysis.compare.statistics` (what the report shows), the capacity
rows those of :func:`dlbench.reports.analysis.capacity.capacity`.
"""

from __future__ import annotations

import math
import statistics as pystats
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from dlbench.jobs import BENCHMARK_DAG_ID
from dlbench.providers.base import Tags
from dlbench.reports.analysis import answer, compare, metrics, regression
from dlbench.reports.analysis import capacity as cap
from dlbench.reports.analysis import serving as latency
from dlbench.reports.analysis.changepoints import e_divisive
from dlbench.suites import Suite
from dlbench.warehouse.models import Benchmark, Environment, Execution, Run, Sample

MAX_RUNS = 200
TREND_RUNS = 20
"""The trend's default: the latest runs of the suite, scheduled or not (a fresh ``make run``
history has no scheduled run, and an empty chart answers nothing)."""
CAPACITY_SUITE = answer.TRAINING_SUITE
"""Capacity is planned from training throughput; another suite has no capacity rows (said, not hidden)."""


@dataclass
class Filters:
    runs: list[str] = field(default_factory=list)
    since: datetime | None = None
    until: datetime | None = None
    scheduled_only: bool = False
    suite: str = Suite.TF_CNN.value
    model: str | None = None
    data: str | None = None
    framework: str | None = None
    scenario: str | None = None
    platforms: list[str] = field(default_factory=list)
    metric: str | None = None


def framework_name(framework: str) -> str:
    """How the report writes a ``benchmarks.framework`` value (``pytorch`` -> ``PyTorch``)."""
    return answer.FRAMEWORK_NAMES.get(framework, framework)


def options(engine: Engine) -> dict[str, Any]:
    """What the filters offer: runs (newest first), suites, models and frameworks (per suite: a
    suite with no framework dimension offers none), data kinds, scenarios, platforms, hardware
    types, metrics (with their direction)."""
    with engine.connect() as conn:
        runs = conn.execute(select(Run.run_id, Run.dag_id, Run.started_at, Run.scheduled)
                            .order_by(Run.started_at.desc().nulls_last(), Run.id.desc()).limit(MAX_RUNS)).all()
        benches = conn.execute(select(Benchmark.suite, Benchmark.name, Benchmark.parameters,
                                      Benchmark.framework)).all()
        platforms = [r[0] for r in conn.execute(select(Execution.platform).distinct())]
        hardware = sorted({name for r in conn.execute(
            select(Environment.gpu_model, Environment.cpu_model).distinct()) if (name := r[0] or r[1])})
    suites = sorted({b.suite for b in benches})
    return {
        "runs": [{"run_id": r.run_id, "dag_id": r.dag_id, "scheduled": bool(r.scheduled),
                  "started_at": r.started_at.isoformat() if r.started_at else None} for r in runs],
        "suites": suites,
        "default_suite": Filters.suite,
        "models": {s: sorted({b.name for b in benches if b.suite == s}) for s in suites},
        "frameworks": {s: [{"value": fw, "label": framework_name(fw)} for fw in sorted(
            {b.framework for b in benches if b.suite == s and b.framework})] for s in suites},
        "data": sorted({str(b.parameters.get("data")) for b in benches if (b.parameters or {}).get("data")}),
        "scenarios": sorted({compare.scenario_of(b.parameters) for b in benches},
                            key=lambda s: compare.SCENARIOS.index(s) if s in compare.SCENARIOS else 99),
        "platforms": sorted(platforms, key=lambda p: (compare.platform_rank(p), p)),
        "hardware": hardware,
        "metrics": {s: [{"metric": m, "direction": metrics.direction(m, "").value} for m in metrics.HEADLINE.get(s, [])]
                    for s in suites},
    }


def latest_runs(engine: Engine, n: int = 1, suite: str | None = None) -> list[str]:
    """The ``n`` latest runs (that ran ``suite``, when given), newest first."""
    query = select(Run.run_id, Run.started_at, Run.id)
    if suite is not None:
        query = (query.join(Execution, Execution.run_pk == Run.id)
                 .join(Benchmark, Benchmark.id == Execution.benchmark_id)
                 .where(Benchmark.suite == suite).distinct())
    with engine.connect() as conn:
        return [r.run_id for r in conn.execute(query.order_by(Run.started_at.desc().nulls_last(), Run.id.desc())
                                               .limit(n))]


def runs_between(engine: Engine, since: datetime | None, until: datetime | None, suite: str | None = None
                 ) -> list[str]:
    """The scheduled runs (of ``suite``) started in [since, until], oldest first."""
    query = select(Run.run_id, Run.started_at).where(Run.scheduled.is_(True))
    if suite is not None:
        query = (query.join(Execution, Execution.run_pk == Run.id)
                 .join(Benchmark, Benchmark.id == Execution.benchmark_id)
                 .where(Benchmark.suite == suite).distinct())
    if since is not None:
        query = query.where(Run.started_at >= since)
    if until is not None:
        query = query.where(Run.started_at <= until)
    with engine.connect() as conn:
        return [r.run_id for r in conn.execute(query.order_by(Run.started_at).limit(MAX_RUNS))]


def selected_runs(engine: Engine, f: Filters, *, latest: int = 1) -> list[str]:
    """The runs every view reads: the picked ones; else the scheduled runs of the date range; else
    the ``latest`` runs that ran the chosen suite (the default view)."""
    if f.runs:
        return f.runs[:MAX_RUNS]
    if f.since is not None or f.until is not None:
        return runs_between(engine, f.since, f.until, f.suite)
    return latest_runs(engine, latest, f.suite)


def _metric_filter(f: Filters) -> list[str] | None:
    if f.metric:
        return [f.metric]
    return list(metrics.HEADLINE[f.suite]) if f.suite in metrics.HEADLINE else None


def _num(v: Any) -> Any:
    """NaN and numpy scalars to JSON: None for "not stated", plain Python numbers otherwise."""
    if v is None:
        return None
    if isinstance(v, bool | str):
        return v
    try:
        number = float(v)
    except (TypeError, ValueError):
        return v
    if not math.isfinite(number):
        return None
    return int(number) if isinstance(v, int) or (hasattr(v, "dtype") and "int" in str(v.dtype)) else number


def _benchmarks_of(engine: Engine, framework: str) -> set[tuple[str, str, str]]:
    """The cases (suite, name, parameters hash) that ran with ``framework``."""
    with engine.connect() as conn:
        return {(r.suite, r.name, r.parameters_hash) for r in conn.execute(
            select(Benchmark.suite, Benchmark.name, Benchmark.parameters_hash).where(Benchmark.framework == framework))}


def _frame(engine: Engine, f: Filters, runs: Sequence[str], metrics_wanted: Sequence[str] | None = None
           ) -> pd.DataFrame:
    """The selected runs' case samples (:func:`dlbench.reports.analysis.compare.samples_frame`, what the
    report reads), filtered by suite, model, data, framework, scenario, platforms and metric (or
    ``metrics_wanted``, when given: in place of the metric filter)."""
    parts = [part for run in runs if not (part := compare.samples_frame(engine, run)).empty]
    if not parts:
        return pd.DataFrame()
    frame = pd.concat(parts, ignore_index=True)
    keep = frame["suite"] == f.suite
    wanted = list(metrics_wanted) if metrics_wanted is not None else _metric_filter(f)
    if wanted is not None:
        keep &= frame["metric"].isin(wanted)
    if f.model:
        keep &= frame["name"] == f.model
    if f.platforms:
        keep &= frame["platform"].isin(f.platforms)
    if f.scenario:
        keep &= frame["scenario"] == f.scenario
    if f.data:
        keep &= frame["parameters"].map(lambda p: str((p or {}).get("data")) == f.data)
    if f.framework:
        cases = _benchmarks_of(engine, f.framework)
        keep &= pd.Series([key in cases for key in zip(frame["suite"], frame["name"], frame["parameters_hash"],
                                                       strict=True)], index=frame.index)
    return frame[keep].reset_index(drop=True)


def comparison(engine: Engine, f: Filters) -> list[dict[str, Any]]:
    """Per case, metric and platform over the selected runs: the report's comparison rows (n, mean,
    ×BM with its interval, Diff% with its interval, verdict, flags), with the metric's direction,
    the data kind and the framework."""
    runs = selected_runs(engine, f)
    f.runs = list(runs)
    frame = _frame(engine, f, runs)
    if frame.empty:
        return []
    outliers = compare.step_checks(engine, list(runs))
    stats = compare.statistics(frame, outliers)
    cells = frame.drop_duplicates("case_key")
    kind = {r.case_key: str((r.parameters or {}).get("data") or "") for r in cells.itertuples()}
    framework = {r.case_key: answer.framework_of(r.suite, r.parameters, r.execution_labels) for r in cells.itertuples()}
    fields = ["suite", "scenario", "case", "metric", "unit", "platform", "n", "baseline_n", "mean", "std", "cv",
              "normalized", "normalized_ci_low", "normalized_ci_high", "diff_pct", "diff_pct_ci_low",
              "diff_pct_ci_high", "verdict", "margin", "repetitions_to_decide", "noisy", "outlier_runs",
              "unsteady_runs", "loaded_runs", "flags"]
    out = []
    for row in stats.to_dict("records"):
        item = {k: _num(row.get(k)) for k in fields}
        item.update(noisy=bool(row.get("noisy")), flags=str(row.get("flags") or ""), n_of=str(row.get("n_of") or ""),
                    direction=metrics.direction(str(row["metric"]), str(row["unit"])).value,
                    data=kind.get(row["case_key"], ""), framework=framework.get(row["case_key"], ""))
        out.append(item)
    return out


def _case_rows(engine: Engine, f: Filters, runs: Sequence[str]) -> list[dict[str, Any]]:
    """The trend's rows: one metric's samples of the selected runs, filtered like every view."""
    query = (
        select(Run.run_id, Run.dag_id, Run.started_at, Execution.id.label("execution_id"), Execution.platform,
               Execution.labels.label("execution_labels"), Benchmark.suite, Benchmark.name, Benchmark.parameters,
               Sample.metric, Sample.value, Sample.unit, Sample.labels)
        .join(Execution, Execution.run_pk == Run.id)
        .join(Benchmark, Benchmark.id == Execution.benchmark_id)
        .join(Sample, Sample.execution_id == Execution.id)
        .where(Execution.status == "ok", Benchmark.suite == f.suite, Sample.metric.not_in(compare.PER_STEP),
               Run.run_id.in_(list(runs)))
    )
    wanted = _metric_filter(f)
    if wanted is not None:
        query = query.where(Sample.metric.in_(wanted))
    if f.model:
        query = query.where(Benchmark.name == f.model)
    if f.framework:
        query = query.where(Benchmark.framework == f.framework)
    if f.platforms:
        query = query.where(Execution.platform.in_(f.platforms))
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
        r["scenario"] = compare.scenario_of(params)
        r["framework"] = answer.framework_of(r["suite"], params, r["execution_labels"])
        out.append(r)
    return out


def trend(engine: Engine, f: Filters, case: str | None = None) -> dict[str, Any]:
    """One case's mean per run and platform over time, with the change points per platform
    (:func:`dlbench.reports.analysis.changepoints.e_divisive`, as regression detection finds them): the
    picked runs, else the scheduled runs of the date range, else the latest :data:`TREND_RUNS` runs of the suite.
    ``case_frameworks`` names each case's framework, so a page can say it when several are shown
    (a TensorFlow case's name has no framework word: its documents name none)."""
    if not f.metric:
        f.metric = (metrics.HEADLINE.get(f.suite) or ["throughput"])[0]
    runs = selected_runs(engine, f, latest=TREND_RUNS)
    rows = _case_rows(engine, f, runs) if runs else []
    rank = {s: i for i, s in enumerate(compare.SCENARIOS)}
    ranked = sorted({r["case"]: r["scenario"] for r in rows}.items(),
                    key=lambda c: (rank.get(c[1], len(rank)), c[0]))  # single-instance cases first
    cases = [c for c, _ in ranked]
    case_frameworks = {r["case"]: r["framework"] for r in rows}
    chosen = case if case in cases else (cases[0] if cases else None)
    found: dict[str, tuple] = {}
    series: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        if r["case"] != chosen:
            continue
        found[r["run_id"]] = (r["started_at"].isoformat() if r["started_at"] else "", r["run_id"], r["dag_id"])
        series.setdefault(r["platform"], {}).setdefault(r["run_id"], []).append(float(r["value"]))
    ordered = sorted(found.values())
    index = {run_id: i for i, (_, run_id, _) in enumerate(ordered)}
    out_series, marks = {}, {}
    for platform in sorted(series, key=lambda p: (compare.platform_rank(p), p)):
        points = sorted((index[run_id], pystats.fmean(v)) for run_id, v in series[platform].items())
        out_series[platform] = points
        cps = [c.index for c in e_divisive([y for _, y in points], alpha=regression.ALPHA)]
        marks[platform] = [points[i] for i in cps]
    unit = next((r["unit"] for r in rows if r["case"] == chosen), "")
    return {"case": chosen, "cases": cases, "case_frameworks": case_frameworks,
            "framework": case_frameworks.get(chosen) if chosen else None, "metric": f.metric, "unit": unit,
            "direction": metrics.direction(f.metric, unit).value,
            "runs": [{"run_id": run_id, "started_at": started, "dag_id": dag_id}
                     for started, run_id, dag_id in ordered],
            "series": out_series, "change_points": marks}


def capacity(engine: Engine, hardware: str | None, f: Filters, prices: Any = None) -> dict[str, Any]:
    """Capacity rows of the selected runs (:func:`dlbench.reports.analysis.capacity.capacity`): per model
    ("all models": every one), data kind, framework, platform and density, with n, intervals and
    flags (the framework filter keeps the rows the report names with that framework's name). On
    ``hardware``, else the first hardware type the selection ran on."""
    if f.suite != CAPACITY_SUITE:
        return {"hardware": hardware, "hardware_types": [], "rows": [], "runs": [],
                "note": f"capacity is planned from training ({CAPACITY_SUITE}) throughput; suite {f.suite} has none"}
    runs = selected_runs(engine, f)
    kinds = cap.hardware_types(engine)
    chosen = [hardware] if hardware in kinds else kinds
    rows: list[cap.CapacityRow] = []
    for kind in chosen if runs else []:
        rows = [r for r in cap.capacity(engine, kind, f.model, data=f.data, runs=runs, prices=prices,
                                        platforms=f.platforms or None)
                if not f.framework or r.framework == framework_name(f.framework)]
        if rows:
            hardware = kind
            break
    if not rows:
        hardware = hardware if hardware in kinds else (kinds[0] if kinds else None)
    return {"hardware": hardware, "hardware_types": kinds, "runs": runs, "note": "",
            "rows": [{k: _num(v) for k, v in r.as_dict().items()} for r in rows]}


def dag_runs(engine: Engine, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The Airflow DAG run behind each warehouse run: its DAG id and Airflow's own run id. The
    warehouse's ``run_id`` is file-safe (``manual__2026-03-08T02-00-00-00-00``): Airflow answers 404
    for it. The real one (``manual__2026-03-08T02:00:00+00:00``) is in the run's tags, the
    :class:`~dlbench.providers.base.Tags` the DAG writes on every resource and archives in
    ``run.info.json``, which the load copies into ``runs.tags``."""
    if not run_ids:
        return []
    with engine.connect() as conn:
        rows = {r.run_id: r for r in conn.execute(
            select(Run.run_id, Run.dag_id, Run.tags).where(Run.run_id.in_(list(run_ids)[:MAX_RUNS])))}
    out = []
    for run_id in run_ids:
        row = rows.get(run_id)
        tags = Tags.from_dict(row.tags if row is not None else None)
        out.append({"run_id": run_id, "dag_id": (row.dag_id if row is not None else None) or BENCHMARK_DAG_ID,
                    "dag_run_id": (tags.dag_run_id if tags is not None else "") or run_id})
    return out



CAPACITY_METRICS = ("capacity", "capacity_output_throughput")
"""The serving samples the capacity answer compares (:func:`dlbench.reports.analysis.serving.capacity_lines`)."""


def serving(engine: Engine, f: Filters, demand: float = latency.FLEET_RATE) -> dict[str, Any]:
    """The serving suite over the selected runs (the filters' runs or date range, else the latest
    serving run; their platforms and model): the capacity at the latency target per platform and
    case (the report's answer: mean, ×BM with its interval and verdict over every repetition of
    every selected run) with the instances that serve ``demand`` requests/s; and per latency, per
    platform, each Poisson rate's mean and how many samples that is, and the target. Pooling runs
    is what a planner asks of a series of scheduled runs (how the tail grows with the load on this
    platform, how many instances a demand needs); a single run's answer is its report's."""
    f = replace(f, suite=latency.SUITE, metric=None, scenario=compare.SINGLE, runs=list(f.runs))
    runs = selected_runs(engine, f)
    # the latencies drawn and the capacity's samples, not the suite's headline (what _frame keeps without a metric)
    frame = _frame(engine, f, runs, [*(metric for metric, _, _ in latency.CURVES), *CAPACITY_METRICS])
    answer = frame[frame["metric"].isin(CAPACITY_METRICS)] if not frame.empty else frame
    lines = (latency.capacity_lines(answer, compare.statistics(answer, compare.step_checks(engine, list(runs))))
             if not answer.empty else [])
    return {"runs": list(runs), "target": latency.target_of(frame), "demand": demand,
            "capacity": [{"platform": line.platform, "case": line.case, "capacity": _num(line.capacity), "n": line.n,
                          "normalized": _num(line.normalized), "normalized_ci_low": _num(line.low),
                          "normalized_ci_high": _num(line.high), "ratio": line.ratio_text, "verdict": line.verdict,
                          "answer": line.answer, "tokens": _num(line.tokens), "target": line.target,
                          "instances": line.instances_for(demand)} for line in lines],
            "curves": [{"metric": curve.metric, "title": curve.title, "target_ms": _num(curve.target_ms),
                        "points": {platform: [{"rate": p.rate, "ms": p.ms, "n": p.n} for p in points]
                                   for platform, points in curve.points.items()},
                        "series": curve.series}
                       for curve in latency.curve_series(frame)]}
