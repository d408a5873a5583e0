"""Platform comparisons computed from the warehouse (never from memory).

For every case (suite, benchmark, scenario, requested parameters, metric, labels) and platform:
n, mean, std and coefficient of variation over repetitions; then, against bare metal,
``diff_pct = (H - D) / H * 100`` (study 001's Diff%, H = bare metal, D = the other platform)
and ``normalized = D / H`` (the core study's figures: bare metal = 1.0), each with its confidence
interval and a verdict (equivalent / better / worse / different within margin / inconclusive / too few
repetitions, against the run's equivalence margin), and the
noise flags: every statistic is computed by :mod:`dlbench.reports.analysis.stats` (docs/statistics.md).

Scenarios (the core study's section 3.3): a distributed or shared-resource cell writes one
document per *role* (parameter server, worker, the job alone, with a background job, a tenant...)
plus one *cell* document (``labels["role"] == "aggregate"``) that already combines them. Only the
cell document is a case: a role's numbers counted on their own would average a parameter server
with a single-instance job. Every frame carries a ``scenario`` column (documents written before
scenarios existed are ``single``), it is part of every case's key, and the case's name says it, so
single and distributed numbers are never averaged together nor normalized against each other.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Collection, Mapping
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from dlbench.reports.analysis import machine_load, metrics
from dlbench.reports.analysis import stats as st
from dlbench.suites import SUITES, Suite
from dlbench.warehouse.load import FRAMEWORK_SUITES
from dlbench.warehouse.models import Benchmark, Execution, Run, Sample

BASELINE = "bare_metal"
PLATFORM_ORDER = ["bare_metal", "container_on_bare_metal", "virtual_machine", "container_on_vm"]


def platform_rank(platform: str) -> int:
    """Where ``platform`` stands in :data:`PLATFORM_ORDER` (one past the end for any other): the
    sort key of every table, chart and legend that lists platforms."""
    return PLATFORM_ORDER.index(platform) if platform in PLATFORM_ORDER else len(PLATFORM_ORDER)

SINGLE, DISTRIBUTED, SHARED = "single", "distributed", "shared"
SCENARIOS = [SINGLE, DISTRIBUTED, SHARED]
"""The core study's scenarios, in its order (single instance, distributed multi-instance, shared)."""

ROLE_LABEL = "role"
AGGREGATE = "aggregate"
"""A scenario's role documents carry ``labels[ROLE_LABEL]``; the cell's own document has the value
AGGREGATE (the same names as :mod:`dlbench.pipeline.aggregate`, repeated here so the report reads
any warehouse without importing the pipeline)."""

PER_STEP = metrics.EXCLUDED
"""Excluded in SQL already: the bulk of the rows (one per training step)."""

CASE_PARAMETERS = {suite.value: spec.case_parameters for suite, spec in SUITES.items() if spec.case_parameters}
"""Which requested parameters name a case in the report, and how (each suite's
:attr:`~dlbench.suites.spec.SuiteSpec.case_parameters`; the rest are in the warehouse):
``seq2seq train synthetic batch 128``, ``gpt generate bf16 batch 8 ctx 1024 prompt 128 +128 tokens``."""

DATA_AS_RUN = frozenset(suite.value for suite, spec in SUITES.items() if spec.data_as_run)
"""Suites whose ``data`` parameter may be the request's ``auto`` (real data when the data directory
holds it, else generated): their case names say the data the job ran on (its ``data`` label)."""


def _implied_framework(suite: str, value: Any) -> bool:
    """Whether ``value`` is the framework ``suite`` trains with by default (the warehouse's
    :data:`~dlbench.warehouse.load.FRAMEWORK_SUITES`): a case name leaves it out (the answer's
    heading says it) and names any other (tf_cnn records the parameter only for the others)."""
    default = FRAMEWORK_SUITES.get(suite)
    return default is not None and str(value).lower() == default.value


PLACEMENT_PARAMETERS = frozenset({"cluster", "role", "task_index", "condition", "loop"})
"""Parameters that say where or as which role a workload ran, not what ran (a cluster's addresses
differ on every platform): ignored when matching a case across platforms, so bare metal stays
every platform's baseline."""

HIDDEN_LABELS = frozenset({"model", "data", "batch_size", "source", "tool", "condition", "clock", "workers"})
HIDDEN_SCOPES = frozenset({"process", "process_start_to_end", "cluster", "first_launch_to_last_exit", "workers"})
"""Sample labels a case's name leaves out: they repeat the benchmark's parameters or hold one
value for a metric everywhere (the cell's throughput is always the cluster's)."""


# The metric table lives in dlbench.reports.analysis.metrics; these names stay importable from here.
HEADLINE = metrics.HEADLINE
DIAGNOSTIC = metrics.DIAGNOSTIC
is_diagnostic = metrics.is_diagnostic
higher_is_better = metrics.higher_is_better


def latest_run_id(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return conn.scalar(select(Run.run_id).order_by(Run.started_at.desc().nulls_last(), Run.id.desc()).limit(1))


def scenario_of(parameters: Mapping[str, Any] | None) -> str:
    """The scenario a benchmark ran in; documents from before scenarios existed are single."""
    return str((parameters or {}).get("scenario") or SINGLE)


def is_case_document(execution_labels: Mapping[str, Any] | None) -> bool:
    """Whether an execution is compared on its own: any document without a role, and a scenario
    cell's aggregate document; never a role's document (its cell's document counts it)."""
    role = (execution_labels or {}).get(ROLE_LABEL)
    return role is None or role == AGGREGATE


def case_key(parameters: Mapping[str, Any] | None) -> str:
    """What identifies a case across platforms: its parameters without placement details."""
    kept = {k: v for k, v in (parameters or {}).items() if k not in PLACEMENT_PARAMETERS}
    kept["scenario"] = scenario_of(parameters)  # a missing scenario and "single" are one case
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()


def samples_frame(engine: Engine, run_id: str | None) -> pd.DataFrame:
    """One row per sample of the run's successful case executions (per-step samples and scenario
    roles excluded), with its ``scenario`` and the execution's labels (``execution_labels``)."""
    query = (
        select(Run.run_id, Execution.job_id, Execution.platform, Execution.repetition, Execution.status,
               Execution.labels.label("execution_labels"),
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
    keep = [metrics.is_tabled(m, lab) and is_case_document(ex) for m, lab, ex in
            zip(frame["metric"], frame["labels"], frame["execution_labels"], strict=True)]
    frame = frame[keep].reset_index(drop=True)
    if frame.empty:
        return frame
    frame["scenario"] = frame["parameters"].map(scenario_of)
    frame["case_key"] = frame["parameters"].map(case_key)
    frame["labels_key"] = frame["labels"].map(lambda d: json.dumps(d or {}, sort_keys=True))
    frame["cell"] = [cell_name(s, n, p, ex) for s, n, p, ex in
                     zip(frame["suite"], frame["name"], frame["parameters"], frame["execution_labels"], strict=True)]
    frame["case"] = [case_name(s, n, p, lab, ex) for s, n, p, lab, ex in
                     zip(frame["suite"], frame["name"], frame["parameters"], frame["labels"],
                         frame["execution_labels"], strict=True)]
    return frame


def _scenario_parts(parameters: Mapping[str, Any], execution_labels: Mapping[str, Any] | None) -> list[str]:
    """What distinguishes cells of one scenario: the distributed mode; the interference (a
    background job, or N tenants)."""
    scenario = scenario_of(parameters)
    labels = execution_labels or {}
    if scenario == DISTRIBUTED:
        mode = parameters.get("mode") or labels.get("mode")
        return [str(mode)] if mode else []
    if scenario == SHARED:
        interference = parameters.get("interference") or labels.get("interference")
        if interference == "tenants":
            return [f"{parameters.get('tenants', '?')} tenants"]
        return ["with background"] if interference == "background" else [str(interference)] if interference else []
    return []


def _parameter_parts(suite: str, parameters: Mapping[str, Any], execution_labels: Mapping[str, Any] | None
                     ) -> list[str]:
    formats = CASE_PARAMETERS.get(suite, {})
    parts = _scenario_parts(parameters, execution_labels)
    batch = parameters.get("batch_size")  # an explicit batch (the shared scenario's control) wins
    for key, fmt in formats.items():
        if key == "batch_size_per_device" and batch is not None:
            parts.append(fmt.format(batch))
        elif key == "data" and suite in DATA_AS_RUN and (execution_labels or {}).get("data"):
            parts.append(fmt.format((execution_labels or {})["data"]))
        elif key == "framework" and _implied_framework(suite, parameters.get(key)):
            continue
        elif key in parameters:
            parts.append(fmt.format(parameters[key]))
    return parts


def cell_name(suite: str, name: str, parameters: Mapping[str, Any] | None,
              execution_labels: Mapping[str, Any] | None = None) -> str:
    """A case's name within its scenario (no scenario word, no sample labels): the x-axis group of
    the scenario figures, e.g. ``alexnet synthetic batch 32 227px`` or ``resnet50 2 tenants ...``."""
    parameters = parameters or {}
    parts = ([name] if name != suite else []) + _parameter_parts(suite, parameters, execution_labels)
    return " ".join(str(p) for p in parts) or name


def case_name(suite: str, name: str, parameters: Mapping[str, Any] | None, labels: Mapping[str, Any] | None,
              execution_labels: Mapping[str, Any] | None = None) -> str:
    """A readable name for a case: the benchmark, its scenario (always for training, where there
    are three; for other suites only if not single), its distinguishing parameters and labels."""
    parameters = parameters or {}
    scenario = scenario_of(parameters)
    parts = [name] if name != suite else []
    if suite == Suite.TF_CNN.value or scenario != SINGLE:
        parts.append(scenario)
    parts += _parameter_parts(suite, parameters, execution_labels)
    parts += [f"{k}={v}" for k, v in sorted((labels or {}).items())
              if k not in HIDDEN_LABELS and not (k == "scope" and v in HIDDEN_SCOPES)]
    return " ".join(str(p) for p in parts) or name


COLUMNS = ["suite", "scenario", "case", "cell", "metric", "unit", "platform", "n", "n_of", "mean", "std", "cv",
           "robust_mean", "baseline", "baseline_n", "diff_pct", "diff_pct_ci_low", "diff_pct_ci_high", "normalized",
           "normalized_ci_low", "normalized_ci_high", "ci_low", "ci_high", "df", "confidence", "verdict",
           "margin", "p_difference", "p_equivalence", "p_beyond", "comparisons", "repetitions_to_decide",
           "higher_is_better", "noisy", "outlier_runs", "unsteady_runs", "loaded_runs", "flags"]
"""The comparison's fields, in the order of comparison.csv and comparison.json. One interval per
row, stated on three scales (:func:`dlbench.reports.analysis.stats.ratio_interval`: a delta-method interval
on the log of mean / bare metal's mean, df by Welch-Satterthwaite): ``normalized_ci_*`` is the
interval of the ratio itself (always positive), ``diff_pct_ci_*`` = (1 - that interval) x 100,
``ci_low``/``ci_high`` = bare metal's mean x (that interval - 1), the difference of the means in
the metric's unit; ``df`` is its Welch-Satterthwaite degrees of freedom. All are empty (NaN) for
bare metal, rows not compared and rows with too few repetitions: ``verdict`` says which.
``verdict`` is equivalent (the interval within ``margin``, a fraction: 0.03 = ±3 %) / better /
worse (wholly beyond it) / different within margin / inconclusive, from ``p_difference``,
``p_equivalence`` and ``p_beyond`` Holm-adjusted within the row's family of ``comparisons`` rows
(the headline metrics' rows, or the other metrics')
(docs/statistics.md); an unresolved row says about how many repetitions per side would resolve
it (``repetitions_to_decide``). ``n_of`` says what ``n`` counts: ``repetitions`` of one run, or
``runs`` (a case seen in several runs is compared on its run means: :func:`_run_means`)."""


def step_checks(engine: Engine, run_id: str | Collection[str] | None) -> dict[str, st.StepCheck]:
    """job_id -> what its measured steps (warm-up excluded, in step order) say
    (:func:`dlbench.reports.analysis.stats.check_steps`): how many lie beyond Tukey's outer fences, and
    whether the window drifts (still warming up, or slowing down); only jobs that recorded
    per-step times. ``run_id``: one run, several (one query: the explorer's runs), or None for all.

    Per-step samples are the bulk of a warehouse and the explorer flags every run it shows, so the
    database extracts the one label needed, ``warmup``, instead of handing every sample's labels
    to Python to decode, and several runs are read in one query rather than one scan each
    (bench/warehouse_scale.py). SQLite's JSON_EXTRACT gives a JSON true as 1, PostgreSQL's ``->>``
    as 'true'; both, and the string labels of older documents, read as warm-up. (Quartiles by
    window functions in the database measured slower on SQLite: 4.5 s against 1.7 s.)"""
    warmup = Sample.labels["warmup"].as_string()
    query = (select(Execution.job_id, Sample.value, warmup)
             .join(Run, Execution.run_pk == Run.id).join(Sample, Sample.execution_id == Execution.id)
             .where(Execution.status == "ok", Sample.metric == "step_time")
             .order_by(Sample.execution_id, Sample.ordinal))
    if isinstance(run_id, str):
        query = query.where(Run.run_id == run_id)
    elif run_id is not None:
        query = query.where(Run.run_id.in_(sorted(run_id)))
    steps: dict[str, list[float]] = {}
    with engine.connect() as conn:
        for job_id, value, warm in conn.execute(query):
            if str(warm).lower() not in ("true", "1"):
                steps.setdefault(job_id, []).append(float(value))
    return {job: st.check_steps(values) for job, values in steps.items()}


REPETITIONS, RUNS = "repetitions", "runs"
"""What a comparison row's n counts (``n_of``): the repetitions of one run, or runs."""


def _run_means(frame: pd.DataFrame, keys: list[str]) -> dict[tuple[Any, ...], list[float]]:
    """A case measured in several runs (the explorer's runs, scheduled runs) is compared on its
    **run means**: each run's repetitions are averaged into one value, and n counts runs. Pooling
    the repetitions of several runs as if independent would leave out the run-to-run (and
    machine-to-machine) variance, the larger part of what separates two scheduled runs, and give
    intervals too narrow. Decided per case, for every platform of it alike (bare metal and the
    platform counted the same way); a case seen in one run keeps its repetitions. Returns
    (case keys..., platform) -> the run means, for the cases seen in several runs."""
    if "run_id" not in frame or frame["run_id"].nunique() < 2:
        return {}
    spans = frame.groupby(keys, sort=False)["run_id"].nunique()
    multi = {k for k, n in spans.items() if n > 1}
    if not multi:
        return {}
    means = frame.groupby([*keys, "platform", "run_id"], sort=False)["value"].mean()
    found: dict[tuple[Any, ...], list[float]] = {}
    for key, value in means.items():
        if key[:len(keys)] in multi:
            found.setdefault(key[:-1], []).append(float(value))
    return found


def statistics(frame: pd.DataFrame, outliers: Mapping[str, st.StepCheck] | None = None,
               confidence: float = st.DEFAULT_CONFIDENCE, margin: float = st.EQUIVALENCE_MARGIN) -> pd.DataFrame:
    """n, mean, std, cv per case x metric x platform, with Diff% and normalized vs bare metal,
    their confidence intervals, the verdict and the noise flags (``outliers``: job_id -> what its
    steps say, :func:`step_checks`).

    Bare metal is looked up with the whole case key, scenario included: a distributed cell is
    normalized to bare metal's distributed cell, never to its single-instance run. Metrics that
    are already relative to a baseline (degradation %) keep Diff% and normalized empty."""
    columns = [*COLUMNS[:-1], "case_key", "flags"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    keys = ["suite", "scenario", "name", "case_key", "case", "cell", "metric", "unit", "labels_key"]
    grouped = frame.groupby(keys + ["platform"], sort=False)
    stats = grouped["value"].apply(list).rename("_values").reset_index()
    # Same groups, same order (sort=False): each row's jobs, for the flags.
    stats["_jobs"] = grouped["job_id"].apply(lambda s: list(dict.fromkeys(s))).reset_index(drop=True)
    by_run = _run_means(frame, keys)
    group_keys = [tuple(r) for r in stats[[*keys, "platform"]].itertuples(index=False)]
    stats["_values"] = [by_run.get(k, v) for k, v in zip(group_keys, stats["_values"], strict=True)]
    stats["n_of"] = [RUNS if k in by_run else REPETITIONS for k in group_keys]
    stats["n"] = [len(v) for v in stats["_values"]]
    stats["mean"] = [st.mean(v) for v in stats["_values"]]
    # One repetition has no spread: std and CV stay NaN (shown as "-"), never a misleading 0.
    stats["std"] = [st.std(v) for v in stats["_values"]]
    # Two distinct cases (other parameters or labels) must never share a display name: charts and
    # tables index by it. Suffix the ambiguous ones with a short id of what distinguishes them.
    ambiguous = stats.duplicated(["suite", "case", "metric", "platform"], keep=False)
    if ambiguous.any():
        ids = stats["case_key"].str[:6] + stats["labels_key"].map(
            lambda k: hashlib.sha256(k.encode()).hexdigest()[:4])
        stats.loc[ambiguous, "case"] = stats.loc[ambiguous, "case"] + " #" + ids[ambiguous]
    ambiguous_cell = stats.duplicated(["suite", "scenario", "cell", "metric", "labels_key", "platform"], keep=False)
    if ambiguous_cell.any():
        stats.loc[ambiguous_cell, "cell"] = stats.loc[ambiguous_cell, "cell"] + " #" + stats.loc[
            ambiguous_cell, "case_key"].str[:6]
    stats["cv"] = [st.cv(v) for v in stats["_values"]]
    base = stats[stats["platform"] == BASELINE][keys + ["mean", "_values"]].rename(
        columns={"mean": "baseline", "_values": "_base_values"})
    stats = stats.merge(base, on=keys, how="left")
    comparable = ~stats["metric"].isin(metrics.RELATIVE) & (stats["baseline"] != 0)
    stats["diff_pct"] = [st.diff_pct(m, b) if ok else math.nan
                         for m, b, ok in zip(stats["mean"], stats["baseline"], comparable, strict=True)]
    stats["normalized"] = [st.normalized(m, b) if ok else math.nan
                           for m, b, ok in zip(stats["mean"], stats["baseline"], comparable, strict=True)]
    stats["higher_is_better"] = [higher_is_better(m, u) for m, u in zip(stats["metric"], stats["unit"], strict=True)]
    _add_inference(stats, comparable, confidence, margin)
    _add_flags(stats, frame, outliers or {})
    stats["_p"] = stats["platform"].map(platform_rank)
    stats["_s"] = stats["scenario"].map(lambda s: SCENARIOS.index(s) if s in SCENARIOS else len(SCENARIOS))
    # Headline metrics first, in their declared order, then the rest alphabetically.
    stats["_m"] = [HEADLINE.get(s, []).index(m) if m in HEADLINE.get(s, []) else len(HEADLINE.get(s, []))
                   for s, m in zip(stats["suite"], stats["metric"], strict=True)]
    stats = stats.sort_values(["suite", "_m", "metric", "_s", "case", "_p"], kind="stable")
    stats = stats.drop(columns=["_p", "_s", "_m", "labels_key", "_values", "_base_values", "_jobs"])
    return stats[[c for c in columns if c in stats.columns] + [c for c in stats.columns if c not in columns]
                 ].reset_index(drop=True)


def _add_inference(stats: pd.DataFrame, comparable: pd.Series, confidence: float, margin: float) -> None:
    """Robust mean, the ratio interval against bare metal on every scale, and the verdict: each
    row's three p-values (difference, equivalence within ``margin``, beyond it) Holm-adjusted within
    its family, then read by :func:`dlbench.reports.analysis.stats.decide`. Two families: the headline
    metrics' rows (the answer's verdicts, what a planner acts on: about 90 per run) and the other
    metrics' (diagnostics), so a run's dozens of diagnostic rows do not blunt its answer. The
    interval stays each row's own; ``comparisons`` is the size of the row's family."""
    stats["robust_mean"] = [st.robust_mean(v) for v in stats["_values"]]
    rows: list[dict[str, Any]] = []
    results: list[st.Comparison | None] = []
    nan = float("nan")
    for values, base, platform, ok, higher in zip(stats["_values"], stats["_base_values"], stats["platform"],
                                                  comparable, stats["higher_is_better"], strict=True):
        row: dict[str, Any] = {"baseline_n": len(base) if isinstance(base, list) else 0, "confidence": confidence,
                               "margin": margin, "p_difference": nan, "p_equivalence": nan, "p_beyond": nan,
                               "repetitions_to_decide": 0}
        result = None
        if platform == BASELINE or not isinstance(base, list) or not ok:
            is_base = platform == BASELINE and isinstance(base, list)
            verdict = st.Verdict.BASELINE if is_base else st.Verdict.NOT_COMPARED
            row.update(ci_low=nan, ci_high=nan, df=nan, verdict=verdict.value,
                       normalized_ci_low=nan, normalized_ci_high=nan, diff_pct_ci_low=nan, diff_pct_ci_high=nan)
        else:
            result = st.compare(values, base, bool(higher), confidence, margin=margin)
            row.update(df=result.df, verdict=result.verdict.value, **result.scaled(st.mean(base)))
        rows.append(row)
        results.append(result)
    headline = [metrics.is_headline(s, m) for s, m in zip(stats["suite"], stats["metric"], strict=True)]
    tested = [(i, r) for i, r in enumerate(results) if r is not None and r.p_difference == r.p_difference]
    sizes = [0] * len(rows)
    for family in ([(i, r) for i, r in tested if headline[i]], [(i, r) for i, r in tested if not headline[i]]):
        adjusted = zip(st.holm([r.p_difference for _, r in family]), st.holm([r.p_equivalence for _, r in family]),
                       st.holm([r.p_beyond for _, r in family]), family, strict=True)
        for p_difference, p_equivalence, p_beyond, (i, result) in adjusted:
            verdict = st.decide(result.ratio, p_difference, p_equivalence, p_beyond,
                                bool(stats["higher_is_better"].iloc[i]), confidence)
            sizes[i] = len(family)
            rows[i].update(p_difference=p_difference, p_equivalence=p_equivalence, p_beyond=p_beyond,
                           verdict=verdict.value,
                           repetitions_to_decide=st.repetitions_to_decide(
                               result.ratio, result.ratio_low, result.ratio_high, max(result.n, result.baseline_n),
                               margin) if verdict in st.UNRESOLVED else 0)
    stats["comparisons"] = sizes
    for key in rows[0] if rows else []:
        stats[key] = [r[key] for r in rows]


def _add_flags(stats: pd.DataFrame, frame: pd.DataFrame, steps: Mapping[str, st.StepCheck]) -> None:
    """noisy (CV above the threshold), runs with step-time outliers, runs whose measured steps
    were not steady, runs on a loaded machine."""
    labels = frame.drop_duplicates("job_id").set_index("job_id")["execution_labels"].to_dict()
    none = st.StepCheck()
    stats["noisy"] = [st.is_noisy(c) for c in stats["cv"]]
    stats["outlier_runs"] = [sum(1 for j in jobs if steps.get(j, none).outliers > 0) for jobs in stats["_jobs"]]
    stats["unsteady_runs"] = [sum(1 for j in jobs if steps.get(j, none).drift) for jobs in stats["_jobs"]]
    stats["loaded_runs"] = [sum(1 for j in jobs if machine_load.load_flag(labels.get(j))) for jobs in stats["_jobs"]]
    flags = []
    for noisy, cv, out, unsteady, loaded, jobs in zip(stats["noisy"], stats["cv"], stats["outlier_runs"],
                                                      stats["unsteady_runs"], stats["loaded_runs"], stats["_jobs"],
                                                      strict=True):
        found = [f"noisy: CV {cv * 100:.0f}%"] if noisy else []
        found += [f"step-time outliers in {out} of {len(jobs)} runs"] if out else []
        if unsteady:
            drifts = [steps[j].drift for j in jobs if j in steps and steps[j].drift]
            worst = max(drifts, key=abs)
            found.append(f"not steady in {unsteady} of {len(jobs)} runs (step time {worst * 100:+.0f}% across the "
                         f"measured steps: {'still warming up' if worst < 0 else 'slowing down'})")
        found += [f"loaded machine in {loaded} of {len(jobs)} runs"] if loaded else []
        flags.append("; ".join(found))
    stats["flags"] = flags


def headline(stats: pd.DataFrame) -> pd.DataFrame:
    """The rows a reader looks at first: headline metrics per suite."""
    if stats.empty:
        return stats
    keep = [metrics.is_headline(s, m) for s, m in zip(stats["suite"], stats["metric"], strict=True)]
    return stats[keep]


def problems(engine: Engine, run_id: str | None) -> pd.DataFrame:
    """Failed and skipped executions, with their reasons and scenario. A scenario's role documents
    are left out: their cell's document fails too and already names the failing role."""
    query = (
        select(Execution.platform, Benchmark.suite, Benchmark.name, Benchmark.parameters, Execution.repetition,
               Execution.status, Execution.error, Execution.labels.label("execution_labels"))
        .join(Run, Execution.run_pk == Run.id)
        .join(Benchmark, Benchmark.id == Execution.benchmark_id)
        .where(Execution.status != "ok")
    )
    if run_id is not None:
        query = query.where(Run.run_id == run_id)
    with engine.connect() as conn:
        frame = pd.DataFrame(conn.execute(query.order_by(Execution.platform, Benchmark.name)).mappings().all())
    if frame.empty:
        return frame
    frame = frame[frame["execution_labels"].map(is_case_document)].reset_index(drop=True)
    frame["scenario"] = frame["parameters"].map(scenario_of)
    frame["cell"] = [cell_name(s, n, p, ex) for s, n, p, ex in
                     zip(frame["suite"], frame["name"], frame["parameters"], frame["execution_labels"], strict=True)]
    return frame.drop(columns=["parameters"])
