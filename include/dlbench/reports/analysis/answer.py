"""The run's answer, computed once for the console (:mod:`dlbench.reports.text`) and the HTML page
(:mod:`dlbench.reports.html`): which profile ran and at what sizes, the training cells grouped by
scenario, data kind and framework, the model workloads' cells (Fathom, the transformer) by name,
whether the run is decision-grade (:func:`decision_grade`) and
what to run instead, and a short summary per micro-benchmark suite.

Why one module: the console and the page must never disagree about whether a run answers its
question; both call :func:`decision_grade` on the same comparison rows. Nothing here computes a
statistic: every interval, verdict, n and flag is a column of :func:`dlbench.reports.analysis.compare.statistics`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from dlbench.profiles import get_profile
from dlbench.reports.analysis import compare, metrics
from dlbench.reports.analysis import stats as st
from dlbench.reports.analysis.formatting import ratio
from dlbench.suites import Suite
from dlbench.warehouse.load import FRAMEWORK_SUITES
from dlbench.workloads.profiles import FathomModel, FathomTask, TransformerTask

TRAINING_SUITE = Suite.TF_CNN.value
ANSWER_METRICS = (("throughput", "throughput"), ("elapsed_time", "elapsed time"))
"""The metrics a planner asks about (figures 2-9 of the core study), in that order."""

DATA_ORDER = ["synthetic", "real"]

FRAMEWORK_NAMES = {"tensorflow": "TensorFlow", "pytorch": "PyTorch", "jax": "JAX", "vllm": "vLLM"}
"""How the report writes each framework a document names."""

FRAMEWORKS = {suite: FRAMEWORK_NAMES[framework.value] for suite, framework in FRAMEWORK_SUITES.items()}
"""The framework a suite trains with when its documents do not say (``framework`` parameter or
label): the warehouse's rule (a tf_cnn document without one is TensorFlow's)."""

WORKLOAD_SUITES = tuple(suite for suite in FRAMEWORK_SUITES if suite != TRAINING_SUITE)
"""The model workloads beyond the study's CNNs (issue 24: Fathom, the transformer): suites that run
a framework's model as a planner would, answered case by case like training (not summarised as
micro-benchmarks); their framework is the warehouse's (:data:`FRAMEWORK_SUITES`)."""


def is_micro(suite: str) -> bool:
    """Whether ``suite``'s results are a micro-benchmark's: neither training nor a model workload
    (the report's micro-benchmark section and the summary's one line per suite both ask this)."""
    return suite != TRAINING_SUITE and suite not in WORKLOAD_SUITES


NAME_ORDER = [m.value for m in FathomModel]
"""Workload cells in the order a reader knows them: Fathom's own (its paper's table 1)."""
TASK_ORDER = [*dict.fromkeys([t.value for t in FathomTask] + [t.value for t in TransformerTask])]
"""Then training before inference or generation."""

METRIC_LABELS = {"throughput": "throughput", "elapsed_time": "elapsed time", "step_time_mean": "step time",
                 "mfu": "MFU", "time_to_first_token": "time to first token",
                 "inter_token_latency": "inter-token latency", "degradation_throughput": "throughput degradation"}
"""How the answer writes a metric (else its name with spaces)."""

TOY_PROFILES = frozenset({"smoke"})
"""Profiles that are toy-sized by definition: ``smoke`` shrinks shapes and steps so a whole
matrix runs in minutes (its own description: "for tests, demos and checking a cloud")."""

MIN_MEASURED_STEPS = 20
"""Fewer measured steps than this makes a cell toy-sized whatever its profile is called: a
throughput over a handful of steps is dominated by start-up effects (the paper measures 100)."""

DECISION_PROFILE = "paper"
MAX_SUGGESTED_REPETITIONS = 20
"""The most repetitions the decision command asks for: a comparison that needs more sits on the
margin's end, where more runs of the same kind will not decide it."""
DECISION_REPETITIONS = 5
"""What a decision run uses when this one was toy-sized or short of repetitions: the studies'
sizes and enough repetitions that one bad repetition still leaves
:data:`~dlbench.reports.analysis.stats.MIN_REPETITIONS`."""

VERDICT_SHORT = {st.Verdict.BETTER: "better", st.Verdict.WORSE: "worse",
                 st.Verdict.EQUIVALENT: "same", st.Verdict.DIFFERENT_WITHIN_MARGIN: "diff-in-margin",
                 st.Verdict.INCONCLUSIVE: "inconclusive",
                 st.Verdict.TOO_FEW_REPETITIONS: "too-few",
                 st.Verdict.BASELINE: "baseline", st.Verdict.NOT_COMPARED: "-"}

VERDICT_ORDER = [st.Verdict.BETTER, st.Verdict.WORSE, st.Verdict.EQUIVALENT, st.Verdict.DIFFERENT_WITHIN_MARGIN,
                 st.Verdict.INCONCLUSIVE, st.Verdict.TOO_FEW_REPETITIONS]
"""The verdicts a comparison can have, in the order summaries count them."""


# -- the run's profile and sizes -------------------------------------------------------------------


def _span(values: Iterable[Any]) -> str:
    """``4`` or ``4-8`` for the distinct numbers among ``values``; "" for none."""
    found = sorted({int(v) for v in values if v is not None and v == v})
    if not found:
        return ""
    return str(found[0]) if found[0] == found[-1] else f"{found[0]}-{found[-1]}"


@dataclass(frozen=True)
class RunProfile:
    """The profile a run used and the training sizes its cells ran at (from the cells'
    parameters, which record what actually ran; the profile's definition fills in what an older
    document did not record)."""

    name: str | None
    batches: tuple[int, ...] = ()
    images: tuple[int, ...] = ()
    measured_steps: tuple[int, ...] = ()
    requested: Mapping[str, Any] = field(default_factory=dict)
    """The run's validated request (``runs.config``); empty for runs loaded without one."""

    @property
    def sizes(self) -> str:
        """``batch 4-8, images 32-75 px, 5 measured steps``: what a reader needs to judge the size."""
        parts = [f"batch {_span(self.batches)}" if self.batches else "",
                 f"images {_span(self.images)} px" if self.images else "",
                 f"{_span(self.measured_steps)} measured steps" if self.measured_steps else ""]
        return ", ".join(p for p in parts if p)

    @property
    def toy(self) -> bool:
        """Toy-sized: a :data:`TOY_PROFILES` profile, or cells with fewer than :data:`MIN_MEASURED_STEPS` steps."""
        return self.name in TOY_PROFILES or any(s < MIN_MEASURED_STEPS for s in self.measured_steps)

    def describe(self) -> str:
        """``profile smoke (batch 4-8, images 32-75 px, 5 measured steps)``."""
        name = f"profile {self.name}" if self.name else "profile unknown (not recorded)"
        return f"{name} ({self.sizes})" if self.sizes else name

    def requested_list(self, key: str) -> list[str] | None:
        """The request's ``key`` (scenarios, platforms...) as strings; None when the run's request
        is not in the warehouse (then nothing can be called "not run")."""
        if not self.requested:
            return None
        value = self.requested.get(key)
        if value is None and key == "scenarios":
            return [compare.SINGLE]  # the request's default
        return [str(v) for v in value] if isinstance(value, list) else None


def _spec_steps(profile: str | None, spec: Mapping[str, Any] | None, model: str) -> int | None:
    """The measured steps of ``model`` in the run's pinned profile (``profile_spec``), else in the
    profile this deployment knows by that name."""
    try:
        if spec:
            entry = dict((spec.get(TRAINING_SUITE) or {}).get(model) or {})
            if "measured_steps" in entry:
                return int(entry["measured_steps"])
        return int(get_profile(str(profile)).training(model).measured_steps) if profile else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # an unknown profile or model: the size is not known, not guessed


def run_profile(name: str | None, requested: Mapping[str, Any] | None, frame: pd.DataFrame) -> RunProfile:
    """The run's profile (``runs.profile``, else the training cells' ``profile`` parameter) and
    the sizes its training cells ran at."""
    requested = dict(requested or {})
    training = frame[frame["suite"] == TRAINING_SUITE].drop_duplicates(["name", "case_key"]) \
        if not frame.empty else frame
    batches, images, steps = [], [], []
    for row in training.itertuples() if not training.empty else []:
        parameters = row.parameters or {}
        name = name or parameters.get("profile")
        batches.append(parameters.get("batch_size", parameters.get("batch_size_per_device")))
        images.append(parameters.get("image_size"))
        steps.append(parameters.get("measured_steps")
                     or _spec_steps(parameters.get("profile") or name, requested.get("profile_spec"), row.name))
    workloads = frame[frame["suite"].isin(WORKLOAD_SUITES)].drop_duplicates(["suite", "name", "case_key"]) \
        if not frame.empty else frame
    for row in workloads.itertuples() if not workloads.empty else []:
        parameters = row.parameters or {}
        name = name or parameters.get("profile")
        steps.append(parameters.get("measured_steps"))  # a workload's job records its own in its parameters
    return RunProfile(name=str(name) if name else None, batches=tuple(int(b) for b in batches if b is not None),
                      images=tuple(int(i) for i in images if i is not None),
                      measured_steps=tuple(int(s) for s in steps if s is not None), requested=requested)


# -- the training cells ----------------------------------------------------------------------------


def framework_of(suite: str, parameters: Mapping[str, Any] | None, labels: Mapping[str, Any] | None) -> str:
    """The framework a cell trained with: its ``framework`` parameter or execution label, else
    the suite's (:data:`FRAMEWORKS`), else the suite's name."""
    found = (parameters or {}).get("framework") or (labels or {}).get("framework")
    return FRAMEWORK_NAMES.get(str(found), str(found)) if found else FRAMEWORKS.get(suite, suite)


def training_rows(stats: pd.DataFrame) -> pd.DataFrame:
    """The comparison rows of the answer: training's throughput and elapsed time, every scenario,
    bare metal included."""
    if stats.empty:
        return stats
    return stats[(stats["suite"] == TRAINING_SUITE) & stats["metric"].isin([m for m, _ in ANSWER_METRICS])]


@dataclass(frozen=True)
class AnswerGroup:
    """The cells of one scenario, data kind and framework, with their comparison rows."""

    scenario: str
    data: str
    framework: str
    rows: pd.DataFrame
    suite: str = TRAINING_SUITE
    metrics: tuple[tuple[str, str], ...] = ANSWER_METRICS
    """The group's answered metrics and how to write them: training's (throughput, elapsed time),
    a workload suite's headline metrics (:func:`workload_metrics`)."""

    @property
    def title(self) -> str:
        prefix = "" if self.suite == TRAINING_SUITE else f"{self.suite} · "
        return f"{prefix}{self.scenario} · {self.data} data · {self.framework}"


def answer_groups(stats: pd.DataFrame, frame: pd.DataFrame) -> list[AnswerGroup]:
    """The answer's tables: per scenario (the study's order), data kind (synthetic, real) and
    framework, the training rows of its cells."""
    rows = training_rows(stats)
    if rows.empty:
        return []
    # A case key hashes the parameters, not the benchmark's name: (name, case key) is one cell's benchmark.
    cells = frame[frame["suite"] == TRAINING_SUITE].drop_duplicates(["name", "case_key"])
    kind = {(r.name, r.case_key): str((r.parameters or {}).get("data") or "-") for r in cells.itertuples()}
    framework = {(r.name, r.case_key): framework_of(r.suite, r.parameters, r.execution_labels)
                 for r in cells.itertuples()}
    keys = list(zip(rows["name"], rows["case_key"], strict=True))
    rows = rows.assign(_data=[kind.get(k, "-") for k in keys],
                       _framework=[framework.get(k, FRAMEWORKS[TRAINING_SUITE]) for k in keys])
    groups = []
    for scenario in [*compare.SCENARIOS, *sorted(set(rows["scenario"]) - set(compare.SCENARIOS))]:
        mine = rows[rows["scenario"] == scenario]
        for data in sorted(set(mine["_data"]), key=lambda k: (DATA_ORDER.index(k) if k in DATA_ORDER else 9, k)):
            names = list(FRAMEWORK_NAMES.values())  # the study's framework first, then as declared
            for fw in sorted(set(mine[mine["_data"] == data]["_framework"]),
                             key=lambda f: (names.index(f) if f in names else len(names), f)):
                found = mine[(mine["_data"] == data) & (mine["_framework"] == fw)]
                groups.append(AnswerGroup(scenario, data, fw, found.drop(columns=["_data", "_framework"])))
    return groups


def workload_metrics(suite: str) -> tuple[tuple[str, str], ...]:
    """A workload suite's answered metrics: its headline metrics (:data:`~dlbench.reports.analysis.metrics.HEADLINE`),
    each with how the answer writes it."""
    return tuple((m, METRIC_LABELS.get(m, m.replace("_", " "))) for m in metrics.HEADLINE.get(suite, []))


def workload_rows(stats: pd.DataFrame, *, relative: bool = True) -> pd.DataFrame:
    """The comparison rows of the workload suites' answer: each suite's headline metrics, every
    scenario, bare metal included; ``relative=False`` leaves out the metrics that are already
    relative to a baseline (a degradation %: no verdict against bare metal)."""
    if stats.empty:
        return stats
    keep = [s in WORKLOAD_SUITES and m in dict(workload_metrics(s)) and (relative or m not in metrics.RELATIVE)
            for s, m in zip(stats["suite"], stats["metric"], strict=True)]
    return stats[keep]


def answer_rows(stats: pd.DataFrame) -> pd.DataFrame:
    """Every comparison the run's answer rests on (the decision-grade rule): training's and the
    workload suites' (their degradations excepted: those have no verdict)."""
    found = [rows for rows in (training_rows(stats), workload_rows(stats, relative=False)) if not rows.empty]
    return pd.concat(found) if found else stats.iloc[0:0]


def _index(order: Sequence[str], value: str) -> int:
    return order.index(value) if value in order else len(order)


def _data_as_run(parameters: Mapping[str, Any] | None, labels: Mapping[str, Any] | None) -> str:
    """The data a workload ran on: its ``data`` label (synthetic, real), else the request's parameter."""
    return str((labels or {}).get("data") or (parameters or {}).get("data") or "-")


def workload_groups(stats: pd.DataFrame, frame: pd.DataFrame) -> list[AnswerGroup]:
    """The workload suites' tables (:data:`WORKLOAD_SUITES`, in that order): per suite, scenario,
    data kind and framework (Fathom under TensorFlow, the transformer under PyTorch), the rows of
    their cells, each cell named by its case (``vgg infer synthetic batch 32``)."""
    rows = workload_rows(stats)
    if rows.empty:
        return []
    cells = frame[frame["suite"].isin(WORKLOAD_SUITES)].drop_duplicates(["suite", "name", "case_key"])
    kind = {(r.suite, r.name, r.case_key): _data_as_run(r.parameters, r.execution_labels) for r in cells.itertuples()}
    framework = {(r.suite, r.name, r.case_key): framework_of(r.suite, r.parameters, r.execution_labels)
                 for r in cells.itertuples()}
    task = {(r.suite, r.name, r.case_key): str((r.parameters or {}).get("task", "")) for r in cells.itertuples()}
    keys = list(zip(rows["suite"], rows["name"], rows["case_key"], strict=True))
    rows = rows.assign(_data=[kind.get(k, "-") for k in keys],
                       _framework=[framework.get(k, FRAMEWORKS.get(k[0], k[0])) for k in keys],
                       _order=[(_index(NAME_ORDER, k[1]), k[1], _index(TASK_ORDER, task.get(k, ""))) for k in keys])
    rows = rows.sort_values("_order", kind="stable").drop(columns=["_order"])
    groups = []
    names = list(FRAMEWORK_NAMES.values())
    for suite in WORKLOAD_SUITES:
        ours = rows[rows["suite"] == suite]
        for scenario in [*compare.SCENARIOS, *sorted(set(ours["scenario"]) - set(compare.SCENARIOS))]:
            mine = ours[ours["scenario"] == scenario]
            for data in sorted(set(mine["_data"]), key=lambda k: (DATA_ORDER.index(k) if k in DATA_ORDER else 9, k)):
                for fw in sorted(set(mine[mine["_data"] == data]["_framework"]),
                                 key=lambda f: (names.index(f) if f in names else len(names), f)):
                    found = mine[(mine["_data"] == data) & (mine["_framework"] == fw)]
                    present = set(found["metric"])
                    groups.append(AnswerGroup(scenario, data, fw, found.drop(columns=["_data", "_framework"]),
                                              suite=suite, metrics=tuple(m for m in workload_metrics(suite)
                                                                         if m[0] in present)))
    return groups


def margin_of(stats: pd.DataFrame) -> float:
    """The equivalence margin a comparison's verdicts were read at (every row carries the run's),
    else the default: one statement for the report, the text table and decision-grade."""
    return float(stats["margin"].iloc[0]) if not stats.empty and "margin" in stats else st.EQUIVALENCE_MARGIN


def n_text(row: Any) -> str:
    """``n=3/3`` (repetitions, platform / bare metal), or ``runs=3/3`` when the row compares run
    means (a case seen in several runs: ``compare.RUNS``)."""
    return f"{'runs' if getattr(row, 'n_of', '') == compare.RUNS else 'n'}={row.n}/{row.baseline_n}"


def flag_words(row: Any) -> str:
    """``CV 13%, outliers, loaded 1/5``: why a row is flagged, short; "" when it is not."""
    if not getattr(row, "flags", ""):
        return ""
    words = [f"CV {row.cv * 100:.0f}%" if row.noisy else "", "outliers" if row.outlier_runs else "",
             f"unsteady {int(row.unsteady_runs)}/{int(row.n)}" if getattr(row, "unsteady_runs", 0) else "",
             f"loaded {int(row.loaded_runs)}/{int(row.n)}" if row.loaded_runs else ""]
    return ", ".join(w for w in words if w)


# -- decision-grade --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grade:
    """Whether a run answers its question, why not, and what to run instead."""

    decision_grade: bool
    reasons: tuple[str, ...]
    instead: str | None
    margin: float = st.EQUIVALENCE_MARGIN

    @property
    def margin_text(self) -> str:
        return f"±{self.margin * 100:g}%"

    def line(self) -> str:
        """The one sentence the console and the page both print."""
        if self.decision_grade:
            return ("DECISION-GRADE: real-sized profile, every training comparison resolved (equivalent within "
                    f"{self.margin_text}, better or worse beyond it; n >= {st.MIN_REPETITIONS} on both sides), "
                    "no flags on training cells.")
        return f"NOT DECISION-GRADE: {'; '.join(self.reasons)}. {self.instead}"


def decision_command(profile: str | None, toy: bool, frameworks: list[str] | None = None,
                     suites: list[str] | None = None, repetitions: int = DECISION_REPETITIONS) -> str:
    """The run to do instead: the request keys of :class:`dlbench.request.BenchmarkRequest`; the
    run's frameworks when it named others than TensorFlow, its suites when it ran a workload suite
    (:data:`WORKLOAD_SUITES`, opt-in: the default suites would not repeat them): the question was
    about them."""
    name = DECISION_PROFILE if toy or not profile else profile
    keys = f"\"profile\": \"{name}\", \"repetitions\": {max(repetitions, DECISION_REPETITIONS)}"
    if frameworks and frameworks != ["tensorflow"]:
        keys += ", \"frameworks\": [" + ", ".join(f"\"{f}\"" for f in frameworks) + "]"
    if suites and set(suites) & set(WORKLOAD_SUITES):
        keys += ", \"suites\": [" + ", ".join(f"\"{s}\"" for s in suites) + "]"
    return f"make run RUN_CONF='{{{keys}}}'"


def decision_grade(profile: RunProfile, stats: pd.DataFrame) -> Grade:
    """A run is decision-grade when all three hold:

    1. its profile is real-sized (:attr:`RunProfile.toy` is false: not ``smoke``, at least
       :data:`MIN_MEASURED_STEPS` measured steps): toy shapes measure start-up and Python
       overheads, not the platform;
    2. every training comparison (throughput and elapsed time of each cell, each platform
       against bare metal) decides: at least :data:`~dlbench.reports.analysis.stats.MIN_REPETITIONS`
       repetitions on both sides, a bare-metal result to compare with, and an interval narrow
       enough for better, worse or equivalent (an inconclusive one, n = 3 at CV 5 % is about
       ±12 %, answers nothing: the command asks for the repetitions that would decide, up to
       :data:`MAX_SUGGESTED_REPETITIONS`);
    3. no training cell carries a noise flag (CV, step-time outliers, unsteady steps, a loaded machine): a
       flagged measurement's verdict may be the noise's.

    Why one function: the console line and the HTML report state the same judgement, and a
    reader who acts on "decision-grade" must get the same answer from both."""
    reasons = []
    repetitions = DECISION_REPETITIONS
    rows = answer_rows(stats)
    what = "training" if rows.empty or set(rows["suite"]) <= {TRAINING_SUITE} else "training and workload"
    if profile.toy:
        why = "is toy-sized" if profile.name in TOY_PROFILES else \
            f"ran cells of under {MIN_MEASURED_STEPS} measured steps"
        sizes = f" ({profile.sizes})" if profile.sizes else ""
        reasons.append(f"profile {profile.name or '(unknown)'} {why}{sizes}")
    compared = rows[rows["platform"] != compare.BASELINE] if not rows.empty else rows
    if compared.empty:
        reasons.append(f"no {what} cell compares a platform with bare metal")
    else:
        few = compared[compared["verdict"] == st.Verdict.TOO_FEW_REPETITIONS.value]
        if not few.empty:
            low = int(min(few["n"].min(), few["baseline_n"].min()))
            reasons.append(f"{len(few)} of {len(compared)} {what} comparisons have n < {st.MIN_REPETITIONS} "
                           f"repetitions (as few as {low})")
        alone = compared[compared["verdict"] == st.Verdict.NOT_COMPARED.value]
        if not alone.empty:
            reasons.append(f"{len(alone)} {what} comparisons have no bare-metal result")
        open_ = compared[compared["verdict"].isin([v.value for v in st.UNRESOLVED])]
        if not open_.empty:
            needs = open_["repetitions_to_decide"]
            needed = math.ceil(float(needs.median()))
            beyond = int((needs > MAX_SUGGESTED_REPETITIONS).sum())
            which = " or ".join(st.VERDICT_TEXT[v] for v in sorted(st.UNRESOLVED)
                                if (open_["verdict"] == v.value).any())
            near = f"; {beyond} sit so near the margin that they need more than {MAX_SUGGESTED_REPETITIONS}"
            reasons.append(f"{len(open_)} of {len(compared)} {what} comparisons are {which} at the "
                           f"±{float(open_['margin'].iloc[0]) * 100:g}% margin (about {needed} repetitions per side "
                           f"would resolve half of them{near if beyond else ''})")
            if not profile.toy:  # a toy run's spread is start-up noise: its needs say nothing of a real run's
                repetitions = min(needed, MAX_SUGGESTED_REPETITIONS)
    flagged = rows[rows["flags"] != ""] if not rows.empty else rows
    if not flagged.empty:
        cell = ["suite", "scenario", "cell"]  # a cell's name is unique within its suite and scenario
        kinds = [("on a loaded machine", flagged["loaded_runs"] > 0), ("noisy", flagged["noisy"].astype(bool)),
                 ("with step-time outliers", flagged["outlier_runs"] > 0),
                 ("not steady", flagged["unsteady_runs"] > 0)]
        counts = [f"{flagged[mask].groupby(cell).ngroups} {what}" for what, mask in kinds if mask.any()]
        reasons.append(f"flags on {flagged.groupby(cell).ngroups} of {rows.groupby(cell).ngroups} {what} cells "
                       f"({', '.join(counts)})")
    margin = margin_of(rows)
    if not reasons:
        return Grade(True, (), None, margin)
    command = decision_command(profile.name, profile.toy, profile.requested_list("frameworks"),
                               profile.requested_list("suites"), repetitions)
    return Grade(False, tuple(reasons), f"For a decision run: {command} on a "
                                        "quiet machine (or trigger dlbench_benchmark with that conf).", margin)


# -- micro-benchmarks ------------------------------------------------------------------------------


def _badness(row: Any) -> float:
    """How unfavourable a row's ×BM is, larger = worse (the direction read from the metric)."""
    value = float(row.normalized)
    if not value > 0:
        return -math.inf
    return 1.0 / value if row.higher_is_better else value


def micro_summary(stats: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(suite, platform, summary) per micro-benchmark suite and platform: how many headline
    metrics were better / worse / equivalent (within the margin) / inconclusive / too few repetitions than bare
    metal, and the most unfavourable one named."""
    head = compare.headline(stats)
    if head.empty:
        return []
    rows = head[head["suite"].map(is_micro) & (head["platform"] != compare.BASELINE)
                & ~head["metric"].isin(metrics.RELATIVE)]
    out = []
    order = VERDICT_ORDER
    for suite in dict.fromkeys(rows["suite"]):
        mine = rows[rows["suite"] == suite]
        for platform in _platform_order(mine["platform"]):
            found = mine[mine["platform"] == platform]
            counts = found["verdict"].value_counts()
            text = ", ".join(f"{int(counts.get(v.value, 0))} {VERDICT_SHORT[v]}" for v in order)
            ranked = [r for r in found.itertuples() if r.normalized == r.normalized]
            if ranked:
                worst = max(ranked, key=_badness)
                text += (f"; worst: {worst.case} {worst.metric} {'↑' if worst.higher_is_better else '↓'} "
                         f"{ratio(worst.normalized)}×BM ({VERDICT_SHORT[st.Verdict(worst.verdict)]})")
            out.append((str(suite), str(platform), text))
    return out


def _platform_order(values: Sequence[str] | pd.Series) -> list[str]:
    present = set(values)
    return [p for p in compare.PLATFORM_ORDER if p in present] + sorted(present - set(compare.PLATFORM_ORDER))


def platforms_that_ran(stats: pd.DataFrame) -> list[str]:
    """The platforms with at least one successful result in the comparison, in the study's order."""
    return _platform_order(stats["platform"]) if not stats.empty else []
