"""Regression detection: this run's cases against the history of the same cases.

A *case* here is a report case (suite, benchmark, requested parameters, scenario, sample labels,
metric) on one platform **and one machine class** (:mod:`dlbench.reports.analysis.machine_class`: the
hardware and placement facts, never a hostname, a container id or a run-named VM), so containers
and per-run VMs keep one history across runs (keyed by the environment fingerprint, every
container job started its own: issue 39). Software (kernel, driver, framework versions) is not
part of the key: a regression names what changed since the last baseline run
(``Regression.software_changes``), the most common cause of one.
Only headline metrics are tested (:func:`dlbench.reports.analysis.metrics.is_headline`): one test per
case and headline metric, not hundreds of diagnostic counters.

The baseline, first match wins:

1. ``baseline_run`` given to :func:`detect` (the CLI's ``--baseline``);
2. a pinned run (``dlbench baseline pin RUN_ID [--suite S]``, the explorer's "pin" button),
   stored in the warehouse table ``baseline_pins``, for the case's suite or for every suite;
3. the last ``window`` earlier runs holding the case (default 8) since its last change point
   and its last acknowledged level; a case with fewer than ``MIN_HISTORY`` (3) such runs is not
   tested by the latest run's test yet (its run-to-run noise is unknown).

Without a pinned baseline, the case's whole series (since its last acknowledged level) is also
searched for change points (E-divisive means, :mod:`dlbench.reports.analysis.changepoints`): the last one
that went the bad way alarms (method ``e-divisive``, ``level_since`` its first run) until
``dlbench baseline ack`` accepts the new level, so a step too small for one run's test, or one
caught once and not acted on, is not lost in the next windows (:func:`check_series`).

The test (docs/regressions.md):

- ``prediction-t``: with k >= 3 baseline runs, the current run's mean is compared with the
  baseline runs' means by a one-sided t test of a new observation against a sample
  (t = (x - m) / (s * sqrt(1 + 1/k)), k - 1 degrees of freedom). Run-to-run noise (a new node, a
  busy network) is part of s, so a stationary series is flagged at rate ``alpha`` at most.
- ``welch``: against a pinned or named run, Welch's one-sided t test of the
  current repetitions against the baseline's repetitions (needs >= 2 on each side).
- ``threshold``: fewer repetitions than that: the change alone decides (p_value None).

A case regresses when the change goes the bad way (metrics' direction), it is at least
``min_change_pct`` (default 2 %) of the baseline, and its p-value, adjusted by Benjamini-Hochberg
over all the cases the run tested, is below ``alpha`` (default 0.01): a run tests hundreds of
cases, and without the adjustment a stationary week would raise a few alarms by chance.
``Regression.p_value`` is that adjusted p-value (None for ``threshold``).

Measured on generated data (tests/reports/test_regression.py, 1000 series, run-to-run sd 1 %,
repetition sd 2 %, 3 repetitions, 8 baseline runs): per-case false-positive rate 0.009 at
alpha 0.01; a 10 % drop is flagged in 99.5 % of series, 5 % in 57 %, 3 % in 18 %.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics as pystats
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy
from sqlalchemy import delete, select
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from dlbench.providers import timings
from dlbench.reports.analysis import changepoints, compare, machine_class, metrics
from dlbench.reports.analysis.machine_load import load_flag
from dlbench.reports.analysis.stats import t_cdf
from dlbench.warehouse.models import BaselinePin, Benchmark, ChangeAck, Environment, Execution, Run, Sample

ALPHA = 0.01
MIN_CHANGE_PCT = 2.0
WINDOW = 8
MIN_HISTORY = 3
"""Runs of history a case needs before it is tested without a pinned baseline: fewer cannot show
how much a case moves from run to run."""
ALL_SUITES = "*"


@dataclass(frozen=True)
class Regression:
    benchmark: str
    case: str
    platform: str
    metric: str
    unit: str
    baseline: float
    current: float
    change_pct: float
    p_value: float | None
    method: str
    baseline_runs: tuple[str, ...]
    software_changes: tuple[str, ...] = ()
    """What changed in the machine's software since the last baseline run (``tensorflow 2.15.0 -> 2.16.1``)."""
    suite: str = ""
    history: str = ""
    """The case history's key (:func:`history_key`): what :func:`acknowledge` records."""
    level_since: str | None = None
    """For a change point (``method`` ``e-divisive``): the first run of the new level, what
    ``dlbench baseline ack`` accepts; None for a test of the run itself."""
    load_flag: str | None = None
    """Why this run's measurement of the case was on a loaded machine
    (:func:`dlbench.reports.analysis.machine_load.load_flag` of one of its jobs), else None."""

    @property
    def provisioning(self) -> bool:
        """A provisioning phase's time (allocate, deploy, reachable over SSH...), not a workload's
        measurement: it depends on the cloud's other tenants and API load as much as on the
        platform, so it is reported and notified but never fails the run (``regression_alerts``)."""
        return self.suite == timings.SUITE

    @property
    def fails_run(self) -> bool:
        """Whether ``on_regression: fail`` fails the run for it: not a provisioning time, and not
        measured on a loaded machine (another process's work moves a result as much as the
        platforms differ: the regression is reported, flagged, and left to the next run)."""
        return not self.provisioning and self.load_flag is None

    def as_dict(self) -> dict:
        return {**asdict(self), "baseline_runs": list(self.baseline_runs),
                "software_changes": list(self.software_changes), "fails_run": self.fails_run}

    def __str__(self) -> str:
        p = "" if self.p_value is None else f", p={self.p_value:.2g}"
        changed = f"; since the baseline: {', '.join(self.software_changes)}" if self.software_changes else ""
        since = (f"; a new level since run {self.level_since}, alarming until acknowledged "
                 "(dlbench baseline ack on a run that reports it)") if self.level_since else ""
        loaded = f"; measured on a loaded machine ({self.load_flag})" if self.load_flag else ""
        return (f"{self.case} [{self.platform}] {self.metric}: {self.baseline:.4g} -> {self.current:.4g} {self.unit} "
                f"({self.change_pct:+.1f} %{p}, {self.method} vs {len(self.baseline_runs)} run(s){changed}{since}"
                f"{loaded})")


# --- the test on one case ----------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    baseline: float
    current: float
    change_pct: float
    p_value: float | None
    method: str
    regressed: bool


def assess(baseline_means: Sequence[float], baseline_samples: Sequence[float], current_samples: Sequence[float],
           *, higher_is_better: bool, alpha: float = ALPHA, min_change_pct: float = MIN_CHANGE_PCT,
           pinned: bool = False) -> Outcome | None:
    """Test one case: ``baseline_means`` (one per baseline run, oldest first), all their
    repetitions, and the current run's repetitions. None when there is nothing to compare."""
    if not current_samples or not baseline_samples or not baseline_means:
        return None
    current = pystats.fmean(current_samples)
    sign = 1.0 if higher_is_better else -1.0  # > 0: the bad direction is "down"
    k = len(baseline_means)
    if k >= 3 and not pinned:
        method = "prediction-t"
        base = pystats.fmean(baseline_means)
        spread = pystats.stdev(baseline_means) * math.sqrt(1.0 + 1.0 / k)
        p = _one_sided(sign * (current - base), spread, k - 1)
    else:
        base = pystats.fmean(baseline_samples)
        n1, n2 = len(current_samples), len(baseline_samples)
        if n1 >= 2 and n2 >= 2:
            method = "welch"
            v1, v2 = pystats.variance(current_samples) / n1, pystats.variance(baseline_samples) / n2
            se = math.sqrt(v1 + v2)
            df = (v1 + v2) ** 2 / ((v1 * v1 / (n1 - 1) if v1 else 0.0) + (v2 * v2 / (n2 - 1) if v2 else 0.0)
                                   or 1e-300)
            p = _one_sided(sign * (current - base), se, max(df, 1.0))
        else:
            method, p = "threshold", None
    if base:
        change = (current - base) / abs(base) * 100.0
    else:
        change = 0.0 if current == base else math.copysign(math.inf, current - base)
    worse = sign * change < 0
    regressed = worse and abs(change) >= min_change_pct and (p is None or p < alpha)
    return Outcome(base, current, change, p, method, regressed)


def _one_sided(improvement: float, spread: float, df: float) -> float:
    """P(a change at least this far in the bad direction | no change): small when it got worse."""
    if spread <= 0 or not math.isfinite(spread):
        return 0.0 if improvement < 0 else 1.0
    return t_cdf(improvement / spread, df)


@dataclass(frozen=True)
class Finding:
    """One test of a case's series: its outcome (``regressed`` before the run's adjustment) and the
    positions in the series of the runs it compared with; ``level_since`` the position where a
    change point's new level starts (None for the test of the latest run)."""
    outcome: Outcome
    baseline: tuple[int, ...]
    level_since: int | None = None


def check_series(series: Sequence[Sequence[float]], *, higher_is_better: bool, window: int = WINDOW,
                min_history: int = MIN_HISTORY, alpha: float = ALPHA,
                min_change_pct: float = MIN_CHANGE_PCT) -> list[Finding]:
    """A case's unpinned tests: ``series`` is each run's repetitions, oldest first, the run under
    test last (from the case's last acknowledged level on). Two tests, each p-value left for the
    run's family (:func:`benjamini_hochberg`):

    - the **latest run** (prediction-t) against the last ``window`` runs **since the last change
      point** before it (a history that restarts at a step, as Hunter's does), when there are
      ``min_history`` of them;
    - the **last change point** of the whole series (E-divisive means over run means,
      :mod:`dlbench.reports.analysis.changepoints`, significant at ``alpha``) when it went the bad way by
      ``min_change_pct``: a drop that no single run's test caught (a 4 % step over several runs), or
      one caught once and not acknowledged, alarms until ``dlbench baseline ack`` accepts its level.
    """
    if not series:
        return []
    means = [pystats.fmean(v) for v in series]
    current = len(series) - 1
    points = changepoints.e_divisive(means, alpha=alpha)
    start = points[-1].index if points else 0  # a change point leaves MIN_SEGMENT runs after it: before current
    earlier = list(range(start, current))[-window:] if window > 0 else []
    found = []
    if len(earlier) >= min_history:
        outcome = assess([means[i] for i in earlier], [v for i in earlier for v in series[i]], series[current],
                         higher_is_better=higher_is_better, alpha=1.0, min_change_pct=min_change_pct)
        if outcome is not None:
            found.append(Finding(outcome, tuple(earlier)))
    sign = 1.0 if higher_is_better else -1.0
    bad = [c for c in points if sign * c.change_pct <= -min_change_pct]
    if bad:
        last = bad[-1]
        outcome = Outcome(last.before, last.after, last.change_pct, last.p_value, "e-divisive", True)
        found.append(Finding(outcome, tuple(range(last.start, last.index)), level_since=last.index))
    elif len(series) >= 2 * changepoints.MIN_SEGMENT:
        # The series was tested and showed no bad change point: the test still counts in the run's
        # family (p = 1), or Benjamini-Hochberg would divide alpha among fewer tests than were made
        # and let about twice alpha of stationary runs alarm (measured: 1.8-2.5 % at alpha 1 %).
        mean = pystats.fmean(means)
        found.append(Finding(Outcome(mean, mean, 0.0, 1.0, "e-divisive", False), tuple(range(current))))
    return found


def benjamini_hochberg(pvalues: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values (q-values) of a family; None stays None.

    A run tests hundreds of cases: at a per-case level of 1 % a stationary run would raise a few
    false alarms every week. Comparing q-values with ``alpha`` controls the false discovery rate,
    and under no change at all (every null true) the probability of any alarm, at ``alpha``."""
    indexed = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(indexed)
    out: list[float | None] = [None] * len(pvalues)
    running = 1.0
    for rank in range(m, 0, -1):
        p, i = indexed[rank - 1]
        running = min(running, p * m / rank)
        out[i] = running
    return out


# --- from the warehouse ------------------------------------------------------------------------

def _history(engine: sqlalchemy.Engine, run_id: str) -> list[dict]:
    """Headline case samples of the run's (benchmark, machine class) pairs, over every run; each
    row carries its ``machine`` (:func:`dlbench.reports.analysis.machine_class.class_key`) and ``software``."""
    with engine.connect() as conn:
        current = conn.execute(select(Run.id, Run.started_at).where(Run.run_id == run_id)).first()
        if current is None:
            raise LookupError(f"run {run_id!r} is not in the warehouse")
        benchmarks = set(conn.scalars(select(Execution.benchmark_id)
                                      .where(Execution.run_pk == current.id, Execution.status == "ok")))
        if not benchmarks:
            return []
        query = (
            select(Run.run_id, Run.id.label("run_pk"), Run.started_at, Execution.platform, Execution.benchmark_id,
                   Execution.labels.label("execution_labels"), Benchmark.suite, Benchmark.name, Benchmark.parameters,
                   Sample.metric, Sample.value, Sample.unit, Sample.labels, Environment.cpu_model,
                   Environment.cpu_count, Environment.memory_bytes, Environment.gpu_model, Environment.gpu_count,
                   Environment.cpu_limit_cores, Environment.memory_limit_bytes, Environment.gpu_driver,
                   Environment.details.label("environment_details"))
            .join(Execution, Execution.run_pk == Run.id)
            .join(Benchmark, Benchmark.id == Execution.benchmark_id)
            .join(Environment, Environment.id == Execution.environment_id)
            .join(Sample, Sample.execution_id == Execution.id)
            .where(Execution.status == "ok", Execution.benchmark_id.in_(sorted(benchmarks)))
        )
        suites = set(conn.scalars(select(Benchmark.suite).where(Benchmark.id.in_(sorted(benchmarks)))))
        if suites <= set(metrics.HEADLINE):  # only the headline metrics: served by samples(metric, execution_id)
            query = query.where(Sample.metric.in_(sorted({m for s in suites for m in metrics.HEADLINE[s]})))
        else:
            query = query.where(Sample.metric.not_in(compare.PER_STEP))
        rows = [dict(r) for r in conn.execute(query).mappings()]
    for r in rows:
        r["machine"] = machine_class.class_key(r["platform"], r, r["execution_labels"])
        r["software"] = machine_class.software(r["environment_details"], r["gpu_driver"])
        r["load_flag"] = load_flag(r["execution_labels"])
    pairs = {(r["benchmark_id"], r["machine"]) for r in rows if r["run_pk"] == current.id}
    return [r for r in rows if (r["benchmark_id"], r["machine"]) in pairs
            and metrics.is_headline(r["suite"], r["metric"]) and metrics.is_tabled(r["metric"], r["labels"])
            and compare.is_case_document(r["execution_labels"])]


def _order_key(started: datetime | None, pk: int) -> tuple:
    if started is None:
        return (1, datetime.max.replace(tzinfo=UTC), pk)
    return (0, started if started.tzinfo else started.replace(tzinfo=UTC), pk)


def pinned_run(engine: sqlalchemy.Engine, suite: str) -> str | None:
    """The run pinned for ``suite``, else the one pinned for every suite."""
    with engine.connect() as conn:
        rows = dict(conn.execute(select(BaselinePin.scope, Run.run_id).join(Run, Run.id == BaselinePin.run_pk)
                                 .where(BaselinePin.scope.in_([suite, ALL_SUITES]))).all())
    return rows.get(suite) or rows.get(ALL_SUITES)


def detect(engine: sqlalchemy.Engine, run_id: str, *, baseline_run: str | None = None, window: int = WINDOW,
           alpha: float = ALPHA, min_change_pct: float = MIN_CHANGE_PCT, min_history: int = MIN_HISTORY
           ) -> list[Regression]:
    """The run's regressions against its baseline (see the module docstring), worst first."""
    rows = _history(engine, run_id)
    if not rows:
        return []
    order: dict[int, tuple] = {}
    names: dict[int, str] = {}
    cases: dict[tuple, dict[int, list[float]]] = {}
    meta: dict[tuple, tuple[str, str, str, str, str]] = {}
    software: dict[tuple, dict[int, dict[str, str]]] = {}
    loaded: dict[tuple, str] = {}
    current_pk = None
    for r in rows:
        order[r["run_pk"]] = _order_key(r["started_at"], r["run_pk"])
        names[r["run_pk"]] = r["run_id"]
        if r["run_id"] == run_id:
            current_pk = r["run_pk"]
        key = (r["suite"], r["name"], compare.case_key(r["parameters"]), r["metric"], r["unit"],
               json.dumps(r["labels"] or {}, sort_keys=True), r["platform"], r["machine"])
        cases.setdefault(key, {}).setdefault(r["run_pk"], []).append(float(r["value"]))
        if r["run_id"] == run_id and r["load_flag"]:
            loaded.setdefault(key, r["load_flag"])
        software.setdefault(key, {}).setdefault(r["run_pk"], r["software"])
        meta[key] = (r["suite"], r["name"], compare.case_name(r["suite"], r["name"], r["parameters"], r["labels"],
                                                              r["execution_labels"]), r["platform"], r["metric"])
    if current_pk is None:
        return []
    accepted = _acknowledged(engine)
    pins: dict[str, str | None] = {}
    tested: list[tuple[tuple, Outcome, list[int], int | None]] = []
    for key, by_run in cases.items():
        if current_pk not in by_run:
            continue
        suite, metric, unit = key[0], key[3], key[4]
        higher = metrics.higher_is_better(metric, unit)
        pin = baseline_run
        if pin is None:
            if suite not in pins:
                pins[suite] = pinned_run(engine, suite)
            pin = pins[suite]
        if pin is not None:
            if pin == run_id:
                continue
            base_pks = [pk for pk in by_run if names[pk] == pin]
            outcome = assess([pystats.fmean(by_run[pk]) for pk in base_pks],
                             [v for pk in base_pks for v in by_run[pk]], by_run[current_pk],
                             higher_is_better=higher, alpha=1.0, min_change_pct=min_change_pct, pinned=True)
            if base_pks and outcome is not None:
                tested.append((key, outcome, base_pks, None))
            continue
        # An accepted change starts the history's new level: its own run no longer alarms, later
        # runs are tested on that level only (and wait for min_history runs of it).
        starts = [order[pk] for pk in accepted.get(history_key(key), ()) if pk in order]
        since = max((o for o in starts if o <= order[current_pk]), default=None)
        if since == order[current_pk]:
            continue
        pks = sorted((pk for pk in by_run if order[pk] < order[current_pk] and (since is None or order[pk] >= since)),
                     key=order.__getitem__) + [current_pk]
        # Every case is tested at level 1 (p kept); the run's family decides below.
        for finding in check_series([by_run[pk] for pk in pks], higher_is_better=higher, window=window,
                                   min_history=min_history, alpha=alpha, min_change_pct=min_change_pct):
            tested.append((key, finding.outcome, [pks[i] for i in finding.baseline],
                           None if finding.level_since is None else pks[finding.level_since]))
    adjusted = benjamini_hochberg([o.p_value for _, o, _, _ in tested])
    found: list[Regression] = []
    alarmed: set[tuple] = set()
    for (key, outcome, base_pks, level), q in zip(tested, adjusted, strict=True):
        if key in alarmed or not outcome.regressed or (q is not None and q >= alpha):
            continue  # one alarm per case: the run's own test first, then its series' change point
        alarmed.add(key)
        _, name, case, platform, metric = meta[key]
        last = max(base_pks, key=order.__getitem__)
        changed = machine_class.software_changes(software[key].get(last, {}),
                                                 software[key].get(current_pk if level is None else level, {}))
        found.append(Regression(suite=key[0], history=history_key(key), benchmark=name, case=case, platform=platform,
                                metric=metric, unit=key[4],
                                baseline=outcome.baseline, current=outcome.current, change_pct=outcome.change_pct,
                                p_value=q, method=outcome.method, baseline_runs=tuple(names[pk] for pk in base_pks),
                                software_changes=tuple(changed), level_since=None if level is None else names[level],
                                load_flag=loaded.get(key)))
    return sorted(found, key=lambda r: (-abs(r.change_pct), r.case, r.platform, r.metric))


# --- pins --------------------------------------------------------------------------------------

def history_key(key: tuple) -> str:
    """A short stable digest of a case history's key (suite, benchmark, case, metric, unit, labels,
    platform, machine class): what an acknowledgement is kept under."""
    return hashlib.sha256(json.dumps(list(key), default=str).encode()).hexdigest()[:16]


def _acknowledged(engine: sqlalchemy.Engine) -> dict[str, set[int]]:
    with engine.connect() as conn:
        rows = conn.execute(select(ChangeAck.history, ChangeAck.run_pk)).all()
    found: dict[str, set[int]] = {}
    for history, run_pk in rows:
        found.setdefault(history, set()).add(run_pk)
    return found


def acknowledge(engine: sqlalchemy.Engine, run_id: str, *, histories: Sequence[str] | None = None,
                note: str | None = None) -> list[Regression]:
    """Accept the regressions of ``run_id`` (all, or those of ``histories``) as their cases' new
    level: from that run (for a change point: from the first run of its new level,
    ``Regression.level_since``) the history is the new level, and nothing before alarms again.
    Idempotent; returns what was acknowledged (``dlbench baseline ack``, docs/regressions.md)."""
    found = [r for r in detect(engine, run_id) if histories is None or r.history in histories]
    with Session(engine) as session, session.begin():
        run = session.scalar(select(Run).where(Run.run_id == run_id))
        if run is None:
            raise LookupError(f"run {run_id!r} is not in the warehouse")
        for r in found:
            level = run if r.level_since is None else session.scalar(select(Run).where(Run.run_id == r.level_since))
            if level is not None and session.scalar(select(ChangeAck).where(ChangeAck.history == r.history,
                                                                            ChangeAck.run_pk == level.id)) is None:
                session.add(ChangeAck(history=r.history, run_pk=level.id, acknowledged_at=datetime.now(UTC),
                                      note=note))
    return found


def pin(engine: sqlalchemy.Engine, run_id: str, *, suite: str | None = None, note: str | None = None) -> None:
    """Name ``run_id`` the baseline (of ``suite``, or of every suite); replaces an earlier pin."""
    scope = suite or ALL_SUITES
    with Session(engine) as session, session.begin():
        run = session.scalar(select(Run).where(Run.run_id == run_id))
        if run is None:
            raise LookupError(f"run {run_id!r} is not in the warehouse")
        existing = session.scalar(select(BaselinePin).where(BaselinePin.scope == scope))
        if existing is None:
            existing = BaselinePin(scope=scope)
            session.add(existing)
        existing.run_pk, existing.pinned_at, existing.note = run.id, datetime.now(UTC), note


def unpin(engine: sqlalchemy.Engine, *, suite: str | None = None) -> bool:
    """Remove the pin (of ``suite``, or the all-suites pin); whether there was one."""
    with Session(engine) as session, session.begin():
        # A DELETE's result is a CursorResult (its row count); Session.execute is typed for any statement.
        statement = delete(BaselinePin).where(BaselinePin.scope == (suite or ALL_SUITES))
        result = cast(CursorResult[Any], session.execute(statement))
        return bool(result.rowcount)


def pins(engine: sqlalchemy.Engine) -> list[dict]:
    with engine.connect() as conn:
        rows = conn.execute(select(BaselinePin.scope, Run.run_id, BaselinePin.pinned_at, BaselinePin.note)
                            .join(Run, Run.id == BaselinePin.run_pk).order_by(BaselinePin.scope)).mappings().all()
    return [{"suite": r["scope"], "run_id": r["run_id"], "pinned_at": r["pinned_at"].isoformat()
             if r["pinned_at"] else None, "note": r["note"]} for r in rows]

