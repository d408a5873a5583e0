"""The answer section: what a planner asked, first (docs/statistics.md says how to read it).

HTML: the profile and its sizes, whether the run is decision-grade (the same judgement the
console prints, :func:`dlbench.reports.analysis.answer.decision_grade`), a box of what to know
before believing the answer, then per scenario, data kind and framework each platform's
throughput and elapsed time normalized to bare metal with its interval, verdict, n and flags, and
the model workloads (Fathom, the transformer) case by case. Text: the same, as lines.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from dlbench.reports.analysis import answer, compare, metrics
from dlbench.reports.analysis import stats as st
from dlbench.reports.analysis.answer import VERDICT_SHORT
from dlbench.reports.analysis.formatting import ci_text, fmt, ratio
from dlbench.reports.analysis.run_data import EMULATED_WARNING, emulated_platforms
from dlbench.reports.rendering.tables import flags_html, scroll, verdict_html
from dlbench.reports.sections import scenarios
from dlbench.reports.sections.base import RunView
from dlbench.reports.sections.cost import COST


def _emulated_note(run: RunView) -> str:
    found = emulated_platforms(run.engine, run.run_id)
    if not found:
        return ""
    items = "".join(f"<li><b>{html.escape(platform)}</b> {html.escape(EMULATED_WARNING.format(accel=accel))}</li>"
                    for platform, accel in sorted(found.items()))
    return f"<div class='note bad'><p><b>Warning: emulated platforms</b></p><ul>{items}</ul></div>"


def _answer_cell(row: Any | None) -> str:
    if row is None:
        return "<td class='note'>-</td>"
    if row.metric in metrics.RELATIVE:  # a degradation %: relative to the job alone already, never × bare metal
        return f"<td>{html.escape(value_text(row))}</td>"
    verdict = st.Verdict(row.verdict)
    if verdict is st.Verdict.NOT_COMPARED:
        return f"<td class='note'>{html.escape(value_text(row))}<br>no bare-metal result</td>"
    ci = ci_text(row.normalized_ci_low, row.normalized_ci_high)
    interval = f" <span class='ci'>{ci}</span>" if ci != "-" else ""
    return (f"<td><b>{ratio(row.normalized)}</b>{interval} <span class='ci'>{answer.n_text(row)}</span><br>"
            f"{verdict_html(row, short=True)} {flags_html(row, short=True)}</td>")


def value_text(row: Any) -> str:
    """``61.2 images/s n=3``: a measured mean with its repetitions."""
    return scenarios.bar_text(float(row.mean), str(row.unit), int(row.n))


def _verdict_counts(rows: pd.DataFrame) -> str:
    counts = rows["verdict"].value_counts()
    order = answer.VERDICT_ORDER
    return ", ".join(f"{int(counts[v.value])} {st.VERDICT_TEXT[v]}" for v in order if counts.get(v.value, 0))


def profile_html(profile: answer.RunProfile, grade: answer.Grade, repetitions: str) -> str:
    """The first screen's facts: the profile and its sizes, the repetitions, and whether the run
    is decision-grade (with why not and what to run instead)."""
    kind = "yes" if grade.decision_grade else "no"
    return (f"<p id='profile'><b>{html.escape(profile.describe())}</b>"
            + (f"; {html.escape(repetitions)}" if repetitions else "") + "</p>"
            f"<p class='grade {kind}' id='grade'>{html.escape(grade.line())}</p>")


def answer_html(stats: pd.DataFrame, frame: pd.DataFrame) -> str:
    """The answer: per scenario, data kind and framework, each platform's throughput and elapsed
    time normalized to bare metal with its confidence interval, n, verdict and flags; a run
    without training answers with the micro-benchmarks' headline metrics instead."""
    confidence = f"{st.DEFAULT_CONFIDENCE * 100:.0f}%"
    margin = answer.margin_of(stats)
    intro = (f"<p class='note'>Each platform against bare metal (×BM: 1.0 = bare metal) with its {confidence} "
             "interval (ratio of the means, delta-method interval on the log scale, df by Welch-Satterthwaite; "
             "docs/statistics.md), n = repetitions (platform/bare metal), "
             "and a verdict at that confidence: "
             f"<span class='v equivalent'>same ±{margin * 100:g}%</span> (the interval lies within the run's "
             "equivalence margin of bare metal), <span class='v better'>better</span> or <span class='v "
             "worse'>worse</span> (it lies wholly beyond the margin), <span class='v different_within_margin'>"
             "different, within margin</span> (it excludes 1.0 but reaches into the margin), <span class='v "
             "inconclusive'>inconclusive</span> (it holds 1.0 and reaches past the margin; both say about how many "
             "repetitions would resolve them), or "
             f"<span class='v too_few_repetitions'>too few repetitions</span> (fewer than {st.MIN_REPETITIONS} on "
             "either side: no verdict and no interval); verdicts are Holm-corrected over the run's "
             "comparisons. ⚠ marks measurements flagged noisy (CV above "
             f"{st.CV_THRESHOLD * 100:.0f}%, step-time outliers, measured steps not steady, a loaded machine): "
             "their verdicts deserve a "
             "repeat.</p>")
    head = compare.headline(stats)
    training = answer.training_rows(stats)
    workload_tables = [_group_table(group) for group in answer.workload_groups(stats, frame)]
    if training.empty:
        return intro + "\n".join(workload_tables) if workload_tables else _micro_answer(head, intro)
    platforms = [p for p in answer.platforms_that_ran(training) if p != compare.BASELINE]
    if not platforms:
        return "\n".join([intro + "<p>Only bare metal ran training in this run: no platform to compare with it.</p>",
                          *workload_tables])
    summary = []
    for platform in platforms:
        mine = training[training["platform"] == platform]
        parts = [f"{label}: {_verdict_counts(mine[mine['metric'] == metric])}"
                 for metric, label in answer.ANSWER_METRICS if not mine[mine["metric"] == metric].empty]
        cells = mine.groupby(["scenario", "cell"]).ngroups
        summary.append(f"<li><b>{html.escape(platform)}</b> vs bare metal, over {cells} "
                       f"training cells: {html.escape('; '.join(parts))}</li>")
    parts = [intro, f"<ul class='summary'>{''.join(summary)}</ul>"]
    parts += [_group_table(group) for group in answer.answer_groups(stats, frame)]
    relative = head[(head["suite"] == scenarios.SUITE) & head["metric"].isin(metrics.RELATIVE)] \
        if not head.empty else head
    if not relative.empty:
        parts.append("<p class='note'>Shared resource: the degradation of each platform's job next to a background "
                     "or other tenants is in the study figures below (figure 10).</p>")
    return "\n".join(parts + workload_tables)


def _group_table(group: answer.AnswerGroup) -> str:
    """One answer table: a row per cell (named by its case), bare metal's means, then per metric of
    the group (training's two, a workload suite's headline metrics) each platform's ×BM cell."""
    cells = group.rows
    mine_platforms = [p for p in answer.platforms_that_ran(cells) if p != compare.BASELINE]
    arrows = {m: "↑" if metrics.higher_is_better(m, str(u)) else "↓" for m, u in zip(cells["metric"], cells["unit"],
                                                                                    strict=True)}
    relative = {m for m, _ in group.metrics if m in metrics.RELATIVE}
    head_cells = "".join(f"<th colspan='{len(mine_platforms)}'>{html.escape(label)} "
                         f"{'%' if metric in relative else '×BM'} {arrows.get(metric, '')}</th>"
                         for metric, label in group.metrics if mine_platforms)
    # Break long platform names at their underscores: the table fits a 1280-px window.
    sub = "".join(f"<th>{html.escape(p).replace('_', '_<wbr>')}</th>" for _ in group.metrics
                  for p in mine_platforms)
    body = []
    for cell in dict.fromkeys(cells["cell"]):
        mine = cells[cells["cell"] == cell]
        base = mine[mine["platform"] == compare.BASELINE]
        measured = "; ".join(value_text(b) for b in base.itertuples())
        flags = " ".join(flags_html(b, short=True) for b in base.itertuples())
        row_cells = []
        for metric, _ in group.metrics:
            for platform in mine_platforms:
                found = mine[(mine["metric"] == metric) & (mine["platform"] == platform)]
                row_cells.append(_answer_cell(next(found.itertuples()) if not found.empty else None))
        body.append(f"<tr><td>{html.escape(str(cell))}</td><td>{html.escape(measured or '-')} {flags}</td>"
                    f"{''.join(row_cells)}</tr>")
    title = f"{scenarios.TITLES.get(group.scenario, group.scenario)} · {group.data} data · {group.framework}"
    if group.suite != answer.TRAINING_SUITE:
        title = f"{group.suite} · {title}"
    second = f"<tr>{sub}</tr>" if sub else ""
    return f"<h3>{html.escape(title)}</h3>" + scroll(
        f"<table class='answer'><tr><th rowspan='2'>cell</th><th rowspan='2'>bare metal (mean, n)</th>"
        f"{head_cells}</tr>{second}{''.join(body)}</table>")


def _micro_answer(head: pd.DataFrame, intro: str) -> str:
    rows = head[head["platform"] != compare.BASELINE] if not head.empty else head
    if rows.empty:
        return "<p class='note'>No platform to compare with bare metal in this run.</p>"
    body = "".join(f"<tr><td>{html.escape(r.suite)}</td><td>{html.escape(r.case)}</td><td>{html.escape(r.metric)} "
                   f"{'↑' if r.higher_is_better else '↓'}</td><td>{html.escape(r.platform)}</td>"
                   f"{_answer_cell(r)}</tr>" for r in rows.itertuples())
    return (intro + "<p>This run has no training results: the micro-benchmarks' headline metrics.</p>"
            + scroll("<table class='answer'><tr><th>suite</th><th>case</th><th>metric</th><th>platform</th>"
                     f"<th>×BM</th></tr>{body}</table>"))


def _warnings_html(stats: pd.DataFrame, bad: pd.DataFrame, load: pd.DataFrame | None = None) -> str:
    """What a reader must know before believing the answer, in one box."""
    items = []
    if load is not None and not load.empty and load["loaded"].notna().any():
        items.append(f"{int(load['loaded'].notna().sum())} of {len(load)} executions ran on a loaded machine (busy "
                     "CPUs, hypervisor steal or other processes): <a href='#load'>machine load</a>.")
    head = compare.headline(stats) if not stats.empty else stats
    if not head.empty:
        flagged = head[head["flags"] != ""]
        if not flagged.empty:
            items.append(f"{len(flagged)} of {len(head)} headline measurements are flagged noisy (⚠): repeat them "
                         "on a quiet machine before acting on their verdicts.")
        few = head[head["verdict"] == st.Verdict.TOO_FEW_REPETITIONS.value]
        if not few.empty:
            items.append(f"{len(few)} headline comparisons have fewer than {st.MIN_REPETITIONS} repetitions on a "
                         "side: they get no verdict (run with more repetitions).")
    if not bad.empty:
        counts = bad["status"].value_counts()
        items.append("Jobs that did not produce a result: " + ", ".join(f"{int(n)} {s}" for s, n in counts.items())
                     + " (listed at the end: <a href='#problems'>failures and skips</a>).")
    return f"<div class='note'><ul>{''.join(f'<li>{i}</li>' for i in items)}</ul></div>" if items else ""


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


def _header_lines(run: RunView) -> list[str]:
    """The summary's first lines: the run and its profile, how to read a comparison, emulated platforms."""
    confidence = f"{st.DEFAULT_CONFIDENCE * 100:.0f}%"
    margin = answer.margin_of(run.stats)
    lines = [f"Run {run.run_id}: {run.profile.describe()}.",
             f"×BM = platform / bare metal with its {confidence} interval (docs/statistics.md); verdict at "
             f"{confidence}, Holm-corrected, margin ±{margin * 100:g}%: same (the interval within the margin) / "
             "better / worse (wholly beyond it) / diff-in-margin (excludes 1, reaches into the margin) / "
             "inconclusive (holds 1, reaches past it) / too-few "
             f"(n < {st.MIN_REPETITIONS} on a side: no interval); "
             "n = repetitions platform/bare metal; ↑ more is better, ↓ less is better; ⚠ flagged (CV > "
             f"{st.CV_THRESHOLD * 100:.0f}%, step-time outliers, unsteady steps, loaded machine)."]
    return lines + [f"WARNING: {platform} {EMULATED_WARNING.format(accel=accel)}."
                    for platform, accel in sorted(emulated_platforms(run.engine, run.run_id).items())]


class AnswerSection:
    """The answer a planner asked for, first: the profile and whether the run is decision-grade,
    what to know before believing it, then per scenario, data kind and framework each platform
    against bare metal, and the model workloads case by case."""

    id = "answer"
    title: str | None = "Answer"
    style = ""

    def html(self, run: RunView) -> str:
        stats, frame = run.stats, run.frame
        training = answer.training_rows(stats)
        cells = "training cell" if not training.empty else "cell"
        training = training if not training.empty else answer.answer_rows(stats)  # a run of the workload suites only
        reps = _span_text(training["n"]) if not training.empty else ""
        cost = "Which platform, at what cost" if COST.rows(run) else "Which platform"
        return "\n".join(p for p in (
            _emulated_note(run),
            profile_html(run.profile, run.grade, f"{reps} repetitions per {cells}" if reps else ""),
            f"<h2 id='answer'>{cost}: this run's answer</h2>",
            _warnings_html(stats, run.bad, run.load),
            answer_html(stats, frame)) if p)

    def text(self, run: RunView) -> list[str]:
        lines = _header_lines(run)
        if groups := answer.answer_groups(run.stats, run.frame):
            lines += ["", "ANSWER: training, each platform against bare metal"]
            for group in groups:
                lines += _group_lines(group)
        if workload_groups := answer.workload_groups(run.stats, run.frame):
            lines += ["", "WORKLOADS: each case against bare metal (headline metrics)"]
            for group in workload_groups:
                lines += _group_lines(group)
        return [*lines, "", run.grade.line()]


def _span_text(values: pd.Series) -> str:
    """``3`` or ``2-3``: the range of a column of counts."""
    low, high = int(values.min()), int(values.max())
    return str(low) if low == high else f"{low}-{high}"
