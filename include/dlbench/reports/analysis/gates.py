"""Pass/fail gates on a run's comparison with bare metal: what a team puts in CI or on a schedule
("container_on_vm throughput >= 0.90 x bare metal with 95 % confidence"). docs/gates.md.

A gate is declared in the request (:class:`dlbench.request.Gate`, validated before anything is
provisioned) or in the Airflow Variable ``dlbench_gates``; this module only reads the fields it
needs through :class:`GateSpec` (``request`` and ``reports`` are sibling layers and never import
each other, the same arrangement as the providers' ``RunRequest``), so it evaluates any object
with those fields, from a validated request or from the request the warehouse archived.

The rules, and why:

- The comparison is recomputed at the gate's own confidence
  (:func:`dlbench.reports.analysis.compare.statistics`), so a gate at 99 % is judged on a 99 % interval.
- ``>= r`` passes only if the interval's LOWER end (``normalized_ci_low``, D/H) is at least r;
  ``<= r`` only if its UPPER end is at most r. The point estimate alone is not evidence: with
  noisy repetitions a mean of 0.91 may be a platform at 0.80.
- A gate matches rows by platform and metric (and, when given, suite, benchmark, scenario and data)
  and passes only if EVERY matching row passes; each row is named in the result. A gate that holds
  "on average over the models" would let one model miss the SLA silently.
- Three outcomes per row and gate (issue 39): **passed** (the interval's end clears the threshold),
  **failed** (shown beyond it: the WHOLE interval is on the wrong side), **inconclusive** (the
  interval straddles the threshold, or there is none: too few repetitions, no bare-metal result,
  or no matching row). An inconclusive gate is not a pass, but neither is it evidence that the
  platform misses the SLA (the first rule called an interval of [0.259, 2.14] against 0.75
  "failed"); the DAG fails on it by default (Param ``on_inconclusive_gate``, :data:`POLICY_FAIL`).
- A row flagged as noisy, with outliers or on a loaded machine says so in its gate's reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import pandas as pd

from dlbench.reports.analysis import compare
from dlbench.reports.analysis import stats as st
from dlbench.reports.analysis.formatting import ci_text, fmt, ratio


class GateSpec(Protocol):
    """The fields of a gate this module reads (:class:`dlbench.request.Gate` has them). Enum
    fields arrive as their string values (``StrEnum``), ``op`` as ``">="``/``"<="`` or None."""

    @property
    def name(self) -> str | None: ...
    @property
    def platform(self) -> str: ...
    @property
    def metric(self) -> str: ...
    @property
    def op(self) -> str | None: ...
    @property
    def ratio(self) -> float: ...
    @property
    def confidence(self) -> float: ...
    @property
    def suite(self) -> str | None: ...
    @property
    def benchmark(self) -> str | None: ...
    @property
    def scenario(self) -> str | None: ...
    @property
    def data(self) -> str | None: ...


@dataclass(frozen=True)
class ArchivedGate:
    """A gate as a run's archived request holds it (``runs.config["gates"]``: JSON that
    :class:`dlbench.request.Gate` validated when the run started), so a report regenerated from the
    warehouse alone (``dlbench report``) judges the gates the run was held to."""

    platform: str
    metric: str
    ratio: float
    confidence: float
    name: str | None = None
    op: str | None = None
    suite: str | None = None
    benchmark: str | None = None
    scenario: str | None = None
    data: str | None = None


def archived(config: Mapping[str, Any]) -> list[ArchivedGate]:
    """The gates of a run's archived request (:func:`dlbench.reports.analysis.run_data.run_request`);
    none for a run without them or loaded without a request."""
    fields = set(ArchivedGate.__dataclass_fields__)
    return [ArchivedGate(**{k: v for k, v in gate.items() if k in fields}) for gate in config.get("gates") or []]


AT_LEAST, AT_MOST = ">=", "<="
"""The two comparisons (:class:`dlbench.request.GateOp`'s values)."""

FILTERS = ("suite", "benchmark", "scenario", "data")
"""Optional fields that narrow the rows a gate applies to; ``benchmark`` matches the comparison's
``name`` column (tf_cnn: the model)."""


class GateState(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    """Shown beyond the threshold: a matching row's whole interval is on the wrong side of it."""
    INCONCLUSIVE = "inconclusive"
    """Neither: a row's interval straddles the threshold or there is none, or no row matches."""


STATE_TEXT = {GateState.PASSED: "PASSED", GateState.FAILED: "FAILED", GateState.INCONCLUSIVE: "INCONCLUSIVE"}
POLICY_FAIL, POLICY_WARN = "fail", "warn"
"""What an inconclusive gate does to the run (the DAG's Param ``on_inconclusive_gate``): fail it
(the default: an SLA needs evidence) or only warn."""


@dataclass(frozen=True)
class RowResult:
    """One matching row of the comparison, judged against the gate."""

    case: str
    suite: str
    benchmark: str
    scenario: str
    metric: str
    unit: str
    platform: str
    op: str
    n: int
    baseline_n: int
    normalized: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    flags: str
    state: GateState
    reason: str

    def measured(self, confidence: float) -> str:
        """``0.981 x BM [0.952, 1.01] at 95 %`` (no interval: says so)."""
        interval = ci_text(self.ci_low, self.ci_high)
        where = f" {interval} at {percent(confidence)}" if interval != "-" else " (no interval)"
        return f"{ratio(self.normalized)} x BM{where}"


@dataclass(frozen=True)
class GateResult:
    """A gate's outcome with every row it was judged on."""

    label: str
    """The gate's name, or ``<platform> <metric> <op> <ratio> x BM`` built from its fields."""
    gate: dict[str, Any]
    """The gate's fields as declared (JSON-able)."""
    state: GateState
    reason: str
    rows: tuple[RowResult, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return self.state is GateState.PASSED

    @property
    def confidence(self) -> float:
        return float(self.gate["confidence"])

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["state"] = self.state.value
        out["rows"] = [{**asdict(r), "state": r.state.value} for r in self.rows]
        return _json_safe(out)


def percent(confidence: float) -> str:
    return f"{confidence * 100:g} %"


def _value(gate: GateSpec, key: str) -> Any:
    """A field as plain JSON (an enum's value)."""
    value = getattr(gate, key)
    return value.value if isinstance(value, StrEnum) else value


def spec_dict(gate: GateSpec) -> dict[str, Any]:
    keys = ("name", "platform", "metric", "op", "ratio", "confidence", *FILTERS)
    return {k: _value(gate, k) for k in keys}


def gate_label(gate: GateSpec, op: str | None = None) -> str:
    """``container_on_vm throughput >= 0.9 x BM (alexnet, synthetic)``, or the gate's own name.
    ``op``: the comparison its rows were judged with, for a gate that leaves it to the metric."""
    if gate.name:
        return gate.name
    op = _value(gate, "op") or op or "vs"
    narrowed = [str(_value(gate, k)) for k in FILTERS if getattr(gate, k) is not None]
    extra = f" ({', '.join(narrowed)})" if narrowed else ""
    return f"{_value(gate, 'platform')} {gate.metric} {op} {gate.ratio:g} x BM{extra}"


def statistics_at(frame: pd.DataFrame, confidence: float, outliers: Mapping[str, st.StepCheck] | None = None
                  ) -> pd.DataFrame:
    """The run's comparison at ``confidence`` (:func:`dlbench.reports.analysis.compare.statistics`), with a
    ``data`` column (the case's data kind, from its parameters) for gates that name one."""
    stats = compare.statistics(frame, outliers, confidence=confidence)
    if stats.empty or frame.empty:
        return stats.assign(data=pd.Series(dtype=object))
    kinds = {key: (params or {}).get("data") for key, params in zip(frame["case_key"], frame["parameters"],
                                                                     strict=True)}
    return stats.assign(data=stats["case_key"].map(kinds))


def _matches(gate: GateSpec, stats: pd.DataFrame) -> pd.DataFrame:
    keep = (stats["platform"] == _value(gate, "platform")) & (stats["metric"] == gate.metric)
    columns = {"suite": "suite", "benchmark": "name", "scenario": "scenario", "data": "data"}
    for key in FILTERS:
        value = _value(gate, key)
        if value is not None:
            keep &= stats[columns[key]] == value
    return stats[keep]


def _number(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def judge_row(gate: GateSpec, row: Any) -> RowResult:
    """One row against the gate: passed on the interval's near end, failed on its far end,
    inconclusive across the threshold or without an interval."""
    op = _value(gate, "op") or (AT_LEAST if bool(row.higher_is_better) else AT_MOST)
    low, high = _number(row.normalized_ci_low), _number(row.normalized_ci_high)
    verdict = str(row.verdict)
    n, base_n = int(row.n), int(row.baseline_n)
    if verdict == st.Verdict.TOO_FEW_REPETITIONS:
        state, reason = GateState.INCONCLUSIVE, (f"too few repetitions for an interval (n={n}, bare metal "
                                                 f"n={base_n}): run more repetitions")
    elif verdict == st.Verdict.NOT_COMPARED:
        state, reason = GateState.INCONCLUSIVE, ("no bare-metal result for this case" if not base_n else
                                                 "not compared with bare metal (a metric relative to its own "
                                                 "baseline)")
    elif low is None or high is None:
        state, reason = GateState.INCONCLUSIVE, "no interval for this comparison"
    elif op == AT_LEAST:
        if low >= gate.ratio:
            state, reason = GateState.PASSED, f"lower end {fmt(low)} >= {gate.ratio:g}"
        elif high < gate.ratio:
            state, reason = GateState.FAILED, f"whole interval below {gate.ratio:g} (upper end {fmt(high)})"
        else:
            state, reason = GateState.INCONCLUSIVE, (f"interval {ci_text(low, high)} straddles {gate.ratio:g}: "
                                                     "more repetitions would narrow it")
    else:
        if high <= gate.ratio:
            state, reason = GateState.PASSED, f"upper end {fmt(high)} <= {gate.ratio:g}"
        elif low > gate.ratio:
            state, reason = GateState.FAILED, f"whole interval above {gate.ratio:g} (lower end {fmt(low)})"
        else:
            state, reason = GateState.INCONCLUSIVE, (f"interval {ci_text(low, high)} straddles {gate.ratio:g}: "
                                                     "more repetitions would narrow it")
    return RowResult(case=str(row.case), suite=str(row.suite), benchmark=str(row.name), scenario=str(row.scenario),
                     metric=str(row.metric), unit=str(row.unit), platform=str(row.platform), op=op, n=n,
                     baseline_n=base_n, normalized=_number(row.normalized), ci_low=low, ci_high=high,
                     verdict=verdict, flags=str(row.flags or ""), state=state, reason=reason)


def evaluate_gate(gate: GateSpec, stats: pd.DataFrame) -> GateResult:
    """One gate on a comparison computed at its confidence (:func:`statistics_at`): every matching
    row must pass; one failed row fails it; otherwise one inconclusive row leaves it inconclusive."""
    label, spec = gate_label(gate), spec_dict(gate)
    if not stats.empty and "confidence" in stats and not math.isclose(float(stats["confidence"].iloc[0]),
                                                                      gate.confidence):
        raise ValueError(f"gate {label!r} is at {percent(gate.confidence)}, the comparison at "
                         f"{percent(float(stats['confidence'].iloc[0]))}: use statistics_at(frame, gate.confidence)")
    matched = _matches(gate, stats) if not stats.empty else stats
    if matched.empty:
        measured = sorted(set(stats[stats["platform"] == spec["platform"]]["metric"])) if not stats.empty else []
        hint = (f"; metrics of {spec['platform']} in this run: {', '.join(measured[:12])}"
                f"{' ...' if len(measured) > 12 else ''}" if measured else
                f"; this run has no result of {spec['platform']}")
        return GateResult(label, spec, GateState.INCONCLUSIVE, "no row of the comparison matches the gate" + hint)
    rows = tuple(judge_row(gate, row) for row in matched.itertuples(index=False))
    failed = [r for r in rows if r.state is GateState.FAILED]
    unsure = [r for r in rows if r.state is GateState.INCONCLUSIVE]
    if failed:
        state = GateState.FAILED
        reason = f"{len(failed)} of {len(rows)} matching rows miss the threshold"
        reason += f"; {len(unsure)} more inconclusive" if unsure else ""
    elif unsure:
        state, reason = GateState.INCONCLUSIVE, (f"{len(unsure)} of {len(rows)} matching rows inconclusive (an "
                                                 "interval across the threshold, or none)")
    else:
        state, reason = GateState.PASSED, f"all {len(rows)} matching rows clear the threshold"
    flagged = [r for r in rows if r.flags]
    if flagged:
        reason += (f"; {len(flagged)} of {len(rows)} rows flagged ({'; '.join(sorted({r.flags for r in flagged}))}): "
                   "read their intervals with care")
    ops = {r.op for r in rows}
    return GateResult(gate_label(gate, ops.pop() if len(ops) == 1 else None), spec, state, reason, rows)


def evaluate(gates: Sequence[GateSpec], frame: pd.DataFrame, outliers: Mapping[str, st.StepCheck] | None = None
             ) -> list[GateResult]:
    """Every gate on the run's samples (:func:`dlbench.reports.analysis.compare.samples_frame`), the
    comparison computed once per confidence the gates ask for."""
    by_confidence: dict[float, pd.DataFrame] = {}
    results = []
    for gate in gates:
        if gate.confidence not in by_confidence:
            by_confidence[gate.confidence] = statistics_at(frame, gate.confidence, outliers)
        results.append(evaluate_gate(gate, by_confidence[gate.confidence]))
    return results


def inconclusive(gates: Iterable[GateSpec], why: str) -> list[GateResult]:
    """Every gate inconclusive for one reason (the run never reached the warehouse, say)."""
    return [GateResult(gate_label(g), spec_dict(g), GateState.INCONCLUSIVE, why) for g in gates]


def failed(results: Iterable[GateResult], policy: str = POLICY_FAIL) -> list[GateResult]:
    """The gates that fail the run: every failed one, and the inconclusive ones unless ``policy``
    is :data:`POLICY_WARN`."""
    return [r for r in results if r.state is GateState.FAILED
            or (r.state is GateState.INCONCLUSIVE and policy != POLICY_WARN)]


def summary(results: Sequence[GateResult]) -> str:
    """``gates: 1 of 2 passed (1 failed, 0 inconclusive)``."""
    count = {s: sum(1 for r in results if r.state is s) for s in GateState}
    return (f"gates: {count[GateState.PASSED]} of {len(results)} passed ({count[GateState.FAILED]} failed, "
            f"{count[GateState.INCONCLUSIVE]} inconclusive)")


def _row_line(row: RowResult, confidence: float) -> str:
    flags = f" ⚠ {row.flags}" if row.flags else ""
    return (f"{STATE_TEXT[row.state].lower()}: {row.case}: {row.measured(confidence)}, n={row.n}/"
            f"{row.baseline_n}: {row.reason}{flags}")


def text_lines(results: Sequence[GateResult]) -> list[str]:
    """The gates for the console and the text report: a summary, then each gate and its rows."""
    if not results:
        return []
    lines = [summary(results)]
    for result in results:
        lines.append(f"  {STATE_TEXT[result.state]:9} {result.label} (at {percent(result.confidence)}): "
                     f"{result.reason}")
        lines += [f"      {_row_line(row, result.confidence)}" for row in result.rows]
    return lines


def failure_message(results: Sequence[GateResult], policy: str = POLICY_FAIL) -> str | None:
    """Why the gates task fails: each gate that failed (and, unless ``policy`` is
    :data:`POLICY_WARN`, each inconclusive one), with the rows that failed it or left it
    inconclusive (passing rows left out); None when nothing fails the run."""
    bad = failed(results, policy)
    if not bad:
        return None
    lines = [f"{len(bad)} of {len(results)} gate(s) did not pass:"]
    for result in bad:
        lines.append(f"gate {result.label!r} {STATE_TEXT[result.state]} (at {percent(result.confidence)}): "
                     f"{result.reason}")
        lines += [f"  {_row_line(row, result.confidence)}" for row in result.rows
                  if row.state is not GateState.PASSED]
    return "\n".join(lines)


def as_json(run_id: str, results: Sequence[GateResult]) -> dict[str, Any]:
    """gates.json: the run, whether every gate passed, and each gate with its rows."""
    return {"run_id": run_id, "passed": all(r.passed for r in results), "summary": summary(results),
            "gates": [r.as_dict() for r in results]}


def _json_safe(value: Any) -> Any:
    """NaN -> None, recursively (JSON has no NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value
