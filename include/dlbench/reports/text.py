"""The report as text: what ``dlbench report`` (and so ``make run``) prints at the end of a run.

The answer comes first, because that is what a planner asked: per scenario, data kind and
framework, each platform's throughput and elapsed time against bare metal (×BM) with its
interval, verdict and n; then the model workloads (Fathom, the transformer) case by case, named
(``vgg infer synthetic batch 32``), with their headline metrics. Then one line saying whether the
run is decision-grade and, if not, why and what to run instead
(:func:`dlbench.reports.answer.decision_grade`, the same judgement as the HTML page). The
micro-benchmarks follow as one line per suite and platform; every metric's row (n, mean, std,
intervals, verdicts, flags) is in comparison.csv and report.html, whose paths are printed.
Failures and skips close it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from dlbench import paths
from dlbench.reports import answer, compare, frameworks, gates, metrics, scenarios
from dlbench.reports import stats as st
from dlbench.reports.answer import VERDICT_SHORT
from dlbench.reports.formatting import ci_text, fmt, ratio, scenario_note
from dlbench.reports.run_data import (
    EMULATED_WARNING,
    emulated_platforms,
    resolve_run,
    run_gates,
    run_request,
    run_statistics,
)

__all__ = ["VERDICT_SHORT", "text_table"]


def _comparison(row: Any) -> str:
    """``0.981× [0.952, 1.01] inconclusive n=3/3``: ×BM, its interval (none when there is none), the
    verdict and the repetitions on both sides (platform / bare metal)."""
    verdict = st.Verdict(row.verdict)
    if row.metric in metrics.RELATIVE:  # a degradation %: already relative to the job alone, never × bare metal
        return f"{fmt(row.mean)} {row.unit} n={row.n}"
    if verdict is st.Verdict.NOT_COMPARED:
        return f"{fmt(row.mean)} {row.unit}, no bare-metal result, n={row.n}"
    interval = ci_text(row.normalized_ci_low, row.normalized_ci_high)
    shown = f" {interval}" if interval != "-" else ""
    return f"{ratio(row.normalized)}×{shown} {VERDICT_SHORT[verdict]} {answer.n_text(row)}"


def _group_lines(group: answer.AnswerGroup) -> list[str]:
    lines = [group.title]
    rows = group.rows
    platforms = [p for p in answer.platforms_that_ran(rows) if p != compare.BASELINE]
    width = max([len(p) for p in platforms] or [8])
    for cell in dict.fromkeys(rows["cell"]):
        mine = rows[rows["cell"] == cell]
        base = mine[mine["platform"] == compare.BASELINE]
        measured = ", ".join(f"{fmt(r.mean)} {r.unit}" for r in base.itertuples())
        base_n = f"; n={int(base['n'].max())}" if not base.empty else ""
        base_flags = "; ".join(f"{r.metric.split('_')[0]}: {w}" for r in base.itertuples()
                               if (w := answer.flag_words(r)))
        lines.append(f"  {cell} (bare metal: {measured or 'no result'}{base_n})" + (f"  ⚠ {base_flags}"
                                                                                   if base_flags else ""))
        parts: list[tuple[str, list[str], list[str]]] = []
        for platform in platforms:
            texts, flags = [], []
            for metric, label in group.metrics:
                found = mine[(mine["metric"] == metric) & (mine["platform"] == platform)]
                for r in found.itertuples():
                    texts.append(f"{label} {'↑' if r.higher_is_better else '↓'} {_comparison(r)}")
                    if words := answer.flag_words(r):
                        flags.append(f"{metric.split('_')[0]}: {words}")
            if texts:
                parts.append((platform, texts, flags))
        first = max([len(t[0]) for _, t, _ in parts if t] or [0])
        for platform, texts, flags in parts:
            shown = [texts[0].ljust(first), *texts[1:]]
            lines.append(f"    {platform:{width}}  {'   '.join(shown)}" + (f"  ⚠ {'; '.join(flags)}" if flags else ""))
    return lines


def _problem_lines(bad: Any) -> list[str]:
    """Failed and skipped executions, one line per cause: the same skip on every repetition and
    platform (no GPU here) is one line naming them, not eight that bury a real failure."""
    if bad.empty:
        return []
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for row in bad.itertuples():
        what = f"{row.suite}/{row.name}{scenario_note(row.scenario)}"
        groups.setdefault((str(row.status), what, str(row.error)), []).append(row)
    lines = []
    for (status, what, error), rows in groups.items():
        platforms = ", ".join(dict.fromkeys(str(r.platform) for r in rows))
        reps = ",".join(f"r{r}" for r in sorted({int(r.repetition) for r in rows}))
        runs = f"{len(rows)} run" + ("s" if len(rows) != 1 else "")
        lines.append(f"{status.upper()}: {what} on {platforms} ({reps}; {runs}): {error}")
    return lines


def text_table(engine: Engine, run_id: str | None = None, report_dir: Path | None = None) -> str:
    """The run's answer, its decision-grade line, the micro-benchmarks per suite, failures and
    skips (see the module docstring). ``report_dir``: where report.html and comparison.csv were
    written (default: ``$DLBENCH_HOME/reports/<run_id>``, where ``dlbench report`` writes them)."""
    run_id = resolve_run(engine, run_id)
    if run_id is None:
        return "no run in the warehouse yet"
    frame, stats = run_statistics(engine, run_id)
    profile_name, requested = run_request(engine, run_id)
    profile = answer.run_profile(profile_name, requested, frame)
    confidence = f"{st.DEFAULT_CONFIDENCE * 100:.0f}%"
    margin = answer.margin_of(stats)
    lines = [f"Run {run_id}: {profile.describe()}.",
             f"×BM = platform / bare metal with its {confidence} interval (docs/statistics.md); verdict at "
             f"{confidence}, Holm-corrected, margin ±{margin * 100:g}%: same (the interval within the margin) / "
             "better / worse (wholly beyond it) / diff-in-margin (excludes 1, reaches into the margin) / "
             "inconclusive (holds 1, reaches past it) / too-few "
             f"(n < {st.MIN_REPETITIONS} on a side: no interval); "
             "n = repetitions platform/bare metal; ↑ more is better, ↓ less is better; ⚠ flagged (CV > "
             f"{st.CV_THRESHOLD * 100:.0f}%, step-time outliers, unsteady steps, loaded machine)."]
    lines += [f"WARNING: {platform} {EMULATED_WARNING.format(accel=accel)}."
              for platform, accel in sorted(emulated_platforms(engine, run_id).items())]
    groups = answer.answer_groups(stats, frame)
    if groups:
        lines.append("")
        lines.append("ANSWER: training, each platform against bare metal")
        for group in groups:
            lines += _group_lines(group)
    if workload_groups := answer.workload_groups(stats, frame):
        lines += ["", "WORKLOADS: each case against bare metal (headline metrics)"]
        for group in workload_groups:
            lines += _group_lines(group)
    lines += frameworks.text_lines(frameworks.framework_rows(frame))
    bad = compare.problems(engine, run_id)
    lines += ["", answer.decision_grade(profile, stats).line()]
    if gate_results := run_gates(engine, run_id, frame, requested):
        lines += ["", *gates.text_lines(gate_results)]
    micro = answer.micro_summary(stats)
    if micro:
        lines += ["", "Micro-benchmarks (headline metrics vs bare metal):"]
        width = max(len(p) for _, p, _ in micro)
        lines += [f"  {suite:9} {platform:{width}}  {summary}" for suite, platform, summary in micro]
    out = report_dir or paths.reports_dir() / run_id
    if not stats.empty:
        lines.append(f"Every metric (n, mean, std, intervals, verdicts, flags): {out / 'comparison.csv'}; "
                     f"report: {out / 'report.html'}")
    lines += scenarios.text_lines(stats, frame, bad, profile.requested_list("scenarios"))
    lines += _problem_lines(bad)
    if stats.empty and bad.empty:
        lines.append("(no samples)")
    return "\n".join(lines)
