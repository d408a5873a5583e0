"""The report as one self-contained HTML page, and :func:`build_report`, which writes it with the
comparison's data files.

The first screen names the profile and its sizes and says whether the run is decision-grade
(:func:`dlbench.reports.answer.decision_grade`, the same judgement the console prints); then the
answer (per scenario, data kind and framework, each platform's throughput and elapsed time
normalized to bare metal, with its 95 % interval, verdict, n and flags), the cost per 1000 images
when host prices are set (and only then does the heading promise a cost), then the study's
figures (:mod:`dlbench.reports.scenarios`, inline SVG with the values above the bars), then the
model workloads (Fathom, the transformer: their figures, :mod:`dlbench.reports.workloads`, and
tables; their cases are also in the answer, by name), then the micro-benchmarks that explain
them (PNG charts, :mod:`dlbench.reports.figures`), then the environment (hardware, versions,
container limits, CPU affinity and NUMA, the machine's load), then failures and skips. Every
statistic comes from :mod:`dlbench.reports.stats`; the same rows are written as comparison.csv
and comparison.json (:mod:`dlbench.reports.exports`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from dlbench.reports import (
    answer,
    capacity,
    compare,
    frameworks,
    gates,
    load,
    metrics,
    regression,
    scenarios,
    workloads,
)
from dlbench.reports import stats as st
from dlbench.reports.exports import write_comparison
from dlbench.reports.figures import normalized_chart
from dlbench.reports.formatting import ci_text, fmt, platform_index, ratio, scenario_note
from dlbench.reports.run_data import (
    EMULATED_WARNING,
    emulated_platforms,
    load_table,
    network_paths,
    resolve_run,
    run_gates,
    run_request,
    run_statistics,
)
from dlbench.suites import MICRO_ORDER as MICRO_SUITES
from dlbench.warehouse.models import Environment, Execution, Run

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1500px;overflow-wrap:break-word}
table{border-collapse:collapse;margin:1em 0}.scroll{max-width:100%;overflow-x:auto}
.grade{padding:.5em .8em;border-radius:4px;margin:.5em 0}.grade.yes{background:#d9f2d9}.grade.no{background:#fff1cc}
td,th{border:1px solid #ccc;padding:.25em .6em;font-size:.9em;text-align:right}td:first-child,th{text-align:left}
h2{margin-top:2em;border-bottom:2px solid #ddd}.note{color:#555;font-size:.9em}.bad{color:#a00}
.v{padding:0 .35em;border-radius:3px;white-space:nowrap}.v.better{background:#d9f2d9;color:#155d15}
.v.worse{background:#f8d7d7;color:#8a1111}.v.equivalent{background:#e3effa;color:#1d4f7a}
.v.inconclusive,.v.different_within_margin{background:#eee;color:#444}
.v.too_few_repetitions{background:#fff1cc;color:#7a5a00}.v.baseline{color:#555}.flag{color:#b35c00;font-size:.85em}
.answer td{vertical-align:top}.answer .ci,.answer b{white-space:nowrap}
.answer td:first-child{white-space:normal;min-width:12em}.answer .ci{color:#555;font-size:.85em}
.summary li{margin:.2em 0}
table.env td{text-align:left;font-size:.85em}td.nw{white-space:nowrap}img{max-width:100%}
nav a{margin-right:1em}
""" + scenarios.STYLE + gates.STYLE


MICRO_ORDER = [suite.value for suite in MICRO_SUITES]
"""The micro-benchmarks in the order that explains training (:data:`dlbench.suites.MICRO_ORDER`)."""


ANSWER_METRICS = answer.ANSWER_METRICS


def scroll(table: str) -> str:
    """A wide table in its own horizontally scrolling box: the page itself never scrolls
    sideways in a 1280-px window, whatever the number of columns."""
    return f"<div class='scroll'>{table}</div>"


def _verdict_html(row: Any, short: bool = False) -> str:
    verdict = st.Verdict(row.verdict)
    text = st.VERDICT_TEXT[verdict]
    title = text
    if verdict is st.Verdict.TOO_FEW_REPETITIONS:
        title = f"too few repetitions for a verdict: n={row.n}, bare metal {row.baseline_n}; needs {st.MIN_REPETITIONS}"
        text = f"n={min(row.n, row.baseline_n)}: no verdict" if short else title
    elif verdict is st.Verdict.EQUIVALENT:
        title = f"equivalent: the interval lies within ±{row.margin * 100:g}% of bare metal"
        text = f"same ±{row.margin * 100:g}%" if short else title
    elif verdict in (st.Verdict.BETTER, st.Verdict.WORSE):
        title = f"{text}: the whole interval lies beyond ±{row.margin * 100:g}% of bare metal"
    elif verdict in st.UNRESOLVED:
        why = ("the interval excludes 1.0 but reaches into" if verdict is st.Verdict.DIFFERENT_WITHIN_MARGIN
               else "the interval holds 1.0 and reaches past")
        title = (f"{text}: {why} ±{row.margin * 100:g}%; about {row.repetitions_to_decide} repetitions per side "
                 "would resolve it")
        text = f"{text} (n≈{row.repetitions_to_decide} resolves)" if short else title
    return f"<span class='v {verdict.value}' title='{html.escape(title)}'>{html.escape(text)}</span>"


def _flags_html(row: Any, short: bool = False) -> str:
    flags = getattr(row, "flags", "")
    if not flags:
        return ""
    if short:
        text = "⚠ " + answer.flag_words(row)
    else:
        text = f"⚠ {flags}"
    return f"<span class='flag' title='{html.escape(flags)}'>{html.escape(text)}</span>"


def _table_html(stats: pd.DataFrame) -> str:
    if stats.empty:
        return "<p>No samples.</p>"
    rows = []
    for row in stats.itertuples():
        better = "↑" if row.higher_is_better else "↓"
        rows.append(
            f"<tr><td>{html.escape(row.case)}</td><td>{html.escape(row.metric)} ({html.escape(row.unit)}) {better}</td>"
            f"<td>{html.escape(row.platform)}</td><td>{row.n}</td><td>{fmt(row.mean)}</td>"
            f"<td>{fmt(row.cv * 100 if row.cv == row.cv else None, 3)}</td><td>{fmt(row.robust_mean)}</td>"
            f"<td>{fmt(row.diff_pct, 3)}</td><td class='nw'>{ci_text(row.diff_pct_ci_low, row.diff_pct_ci_high)}</td>"
            f"<td>{ratio(row.normalized)}</td><td class='nw'>{ci_text(row.normalized_ci_low, row.normalized_ci_high)}"
            f"</td><td class='nw'>{_verdict_html(row, short=True)}</td><td class='nw'>{_flags_html(row, short=True)}"
            "</td></tr>"
        )
    confidence = f"{st.DEFAULT_CONFIDENCE * 100:.0f}%"
    # One notion of uncertainty: the interval (Diff% and ×BM are its two scales); the std stays in
    # comparison.csv, CV % is here because the noise flag is read from it.
    return scroll("<table><tr><th>case</th><th>metric</th><th>platform</th><th>n</th><th>mean</th>"
                  f"<th>CV %</th><th>robust mean</th><th>Diff %</th><th>Diff % {confidence} CI</th><th>normalized</th>"
                  f"<th>normalized {confidence} CI</th><th>verdict</th><th>flags</th></tr>" + "".join(rows)
                  + "</table>")


def _ranges(cpus: list[int]) -> str:
    """``0-3,8`` for [0, 1, 2, 3, 8]."""
    parts: list[str] = []
    for cpu in sorted(set(cpus)):
        if parts and "-" in parts[-1] and int(parts[-1].split("-")[1]) == cpu - 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{cpu}"
        elif parts and "-" not in parts[-1] and int(parts[-1]) == cpu - 1:
            parts[-1] = f"{parts[-1]}-{cpu}"
        else:
            parts.append(str(cpu))
    return ",".join(parts)


def _environments_html(engine: Engine, run_id: str) -> str:
    query = (select(Environment.platform, Environment.hostname, Environment.cpu_model, Environment.cpu_count,
                    Environment.memory_bytes, Environment.gpu_model, Environment.gpu_count, Environment.gpu_driver,
                    Environment.tensorflow_version, Environment.cuda_version, Environment.in_container,
                    Environment.container_runtime, Environment.cpu_limit_cores, Environment.memory_limit_bytes,
                    Environment.details)
             .join(Execution, Execution.environment_id == Environment.id).join(Run, Execution.run_pk == Run.id)
             .where(Run.run_id == run_id).distinct())
    with engine.connect() as conn:
        rows = sorted(conn.execute(query).all(), key=lambda r: (platform_index(r.platform), r.hostname or ""))
    cells = []
    for r in rows:
        details = r.details or {}
        versions = dict(details.get("versions") or {})
        for key, value in (("TensorFlow", r.tensorflow_version), ("CUDA", r.cuda_version),
                           ("GPU driver", r.gpu_driver), ("kernel", details.get("kernel")), ("OS", details.get("os")),
                           ("Python", details.get("python"))):
            if value and key.lower() not in {k.lower() for k in versions}:
                versions[key] = value
        affinity = details.get("cpu_affinity") or []
        numa = details.get("numa_nodes") or []
        container = (f"{r.container_runtime or 'yes'}; CPU limit {r.cpu_limit_cores if r.cpu_limit_cores else 'none'}"
                     f"; memory limit "
                     f"{f'{r.memory_limit_bytes / 2**30:.1f} GiB' if r.memory_limit_bytes else 'none'}"
                     if r.in_container else "no")
        cells.append("<tr>" + "".join(f"<td>{html.escape(str(v if v not in (None, '') else '-'))}</td>" for v in (
            r.platform, r.hostname, r.cpu_model, r.cpu_count,
            f"{r.memory_bytes / 2**30:.1f} GiB" if r.memory_bytes else None,
            f"{r.gpu_count} × {r.gpu_model}" if r.gpu_count else "none", container,
            f"{_ranges(affinity)} ({len(affinity)} CPUs)" if affinity else None,
            ",".join(map(str, numa)) if numa else None,
            "; ".join(f"{k} {v}" for k, v in sorted(versions.items())),
        )) + "</tr>")
    return scroll("<table class='env'><tr><th>platform</th><th>host</th><th>CPU</th><th>cores</th><th>memory</th>"
            "<th>GPUs</th><th>container (limits)</th><th>CPU affinity</th><th>NUMA nodes</th><th>versions</th></tr>"
            f"{''.join(cells)}</table>")


def _load_html(engine: Engine, run_id: str) -> str:
    table = load_table(engine, run_id)
    if table.empty:
        return "<p class='note'>The documents of this run carry no machine-load readings (written before they " \
               "were recorded).</p>"

    rows = []
    for platform, group in table.groupby("platform", sort=False):
        before = [float(v) for v in group["host_load1_before"].dropna()]
        steal = [float(v) for v in group["host_steal_share"].dropna()]
        other = [float(v) for v in group["other_cores"].dropna()]
        rows.append((platform_index(str(platform)), f"<tr><td>{html.escape(str(platform))}</td><td>{len(group)}</td>"
                     f"<td>{fmt(max(before) if before else None, 3)}</td>"
                     f"<td>{fmt(max(steal) * 100 if steal else None, 2)}</td>"
                     f"<td>{fmt(max(other) if other else None, 3)}</td>"
                     f"<td>{int(group['loaded'].notna().sum())}</td></tr>"))
    flagged = table[table["loaded"].notna()]
    items = "".join(f"<li>{html.escape(r.platform)} {html.escape(r.suite)}/{html.escape(r.name)} repetition "
                    f"{r.repetition}: {html.escape(r.loaded)}</li>" for r in flagged.itertuples())
    return ("<p class='note'>Read before and after every job by the workload harness (/proc/loadavg, /proc/stat). "
            "A job ran on a <b>loaded machine</b> when, while it ran, processes outside its own process tree used "
            f"more than {load.OTHER_CORES_FLOOR:.2f} cores and more than {load.OTHER_SHARE_OF_JOB * 100:.0f}% of "
            "the cores the job used (the run's own controller was measured at "
            f"{load.CONTROLLER_OTHER_CORES:.2f} cores) or the hypervisor stole more than "
            f"{load.STEAL_THRESHOLD * 100:.0f}% of the CPU time (docs/statistics.md); the load average before a job "
            "is context only: jobs run back to back, so it mostly holds the previous job. In the "
            "shared scenario and for distributed roles on one host the other processes are the experiment.</p>"
            + scroll("<table><tr><th>platform</th><th>jobs</th><th>max load before</th><th>max steal %</th>"
                     "<th>max other cores</th><th>loaded jobs</th></tr>"
                     + "".join(r for _, r in sorted(rows, key=lambda item: item[0])) + "</table>")
            + (f"<ul class='note bad'>{items}</ul>" if items else ""))


def _emulated_note(engine: Engine, run_id: str) -> str:
    found = emulated_platforms(engine, run_id)
    if not found:
        return ""
    items = "".join(f"<li><b>{html.escape(platform)}</b> {html.escape(EMULATED_WARNING.format(accel=accel))}</li>"
                    for platform, accel in sorted(found.items()))
    return f"<div class='note bad'><p><b>Warning: emulated platforms</b></p><ul>{items}</ul></div>"


def _network_note(engine: Engine, run_id: str) -> str:
    """Says so when the platforms' network numbers went through different paths (e.g. loopback on
    this host vs host <-> container over the Docker bridge): then they are not like for like."""
    found = network_paths(engine, run_id)
    kinds = {path.split(" (")[0] for paths in found.values() for path in paths}
    if len(kinds) <= 1:
        return ""
    items = "".join(f"<li>{html.escape(platform)}: {html.escape('; '.join(paths))}</li>"
                    for platform, paths in sorted(found.items()))
    return ("<p class='note bad'><b>The platforms' network paths differ</b>, so their network numbers are not a "
            f"like-for-like comparison:</p><ul class='note'>{items}</ul>")


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
            f"{_verdict_html(row, short=True)} {_flags_html(row, short=True)}</td>")


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
        parts = [f"{label}: {_verdict_counts(mine[mine['metric'] == metric])}" for metric, label in ANSWER_METRICS
                 if not mine[mine["metric"] == metric].empty]
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
        flags = " ".join(_flags_html(b, short=True) for b in base.itertuples())
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


def cost_html(engine: Engine, run_id: str, frame: pd.DataFrame, prices: capacity.Prices | None) -> str:
    """Cost per 1000 images per platform, model and data kind of this run's single-instance
    training (:func:`dlbench.reports.capacity.capacity`, at the measured densities), when host
    prices are set; "" otherwise (then the page's heading promises no cost)."""
    if prices is None or frame.empty:
        return ""
    cells = frame[(frame["suite"] == scenarios.SUITE) & (frame["scenario"] == compare.SINGLE)]
    pairs = list(dict.fromkeys((str(r.name), str((r.parameters or {}).get("data") or "")) for r in cells.itertuples()))
    rows = []
    for hardware in capacity.hardware_types(engine):
        for model, data in pairs:
            for r in capacity.capacity(engine, hardware, model, data=data or None, runs=[run_id], prices=prices):
                if r.cost_per_1000 is not None:
                    rows.append(f"<tr><td>{html.escape(hardware)}</td><td>{html.escape(model)}</td>"
                                f"<td>{html.escape(data or '-')}</td><td>{html.escape(r.platform)}</td>"
                                f"<td>{r.instances_per_host}</td><td>{r.n}</td><td>{fmt(r.per_host)}</td>"
                                f"<td>{fmt(r.cost_per_1000)} {html.escape(r.currency or '')}</td>"
                                f"<td class='nw'>{ci_text(r.cost_ci_low, r.cost_ci_high)}</td></tr>")
    if not rows:
        return ""
    return ("<h3 id='cost'>Cost per 1000 images</h3><p class='note'>Host price per hour (Airflow Variable "
            "<code>dlbench_host_prices</code> or prices.yaml, docs/capacity.md) / images per host-hour, from this "
            "run's mean single-instance throughput and, per density, the measured tenant degradation.</p>"
            + scroll("<table><tr><th>hardware</th><th>model</th><th>data</th><th>platform</th><th>instances per "
                     "host</th><th>n</th><th>images/s per host</th><th>cost per 1000 images</th>"
                     f"<th>{st.DEFAULT_CONFIDENCE * 100:.0f}% interval</th></tr>" + "".join(rows) + "</table>"))


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


def _regressions_html(engine: Engine, run_id: str) -> str:
    """"Regressions since the baseline", from :mod:`dlbench.reports.regression`."""
    head = "<h2 id='regressions'>Regressions since the baseline</h2>"
    try:
        found = regression.detect(engine, run_id)
    except Exception as exc:  # noqa: BLE001 - the rest of the report stands without it
        return head + f"<p class='bad'>Regression detection failed: {html.escape(f'{type(exc).__name__}: {exc}')}</p>"
    if not found:
        return head + ("<p class='note'>No case got significantly worse than its baseline (docs/regressions.md: "
                       "the pinned run, else the previous runs holding the same case on the same kind of machine).</p>")
    rows = "".join(
        f"<tr><td>{html.escape(r.platform)}</td><td>{html.escape(r.case)}</td><td>{html.escape(r.metric)}</td>"
        f"<td>{fmt(r.baseline)} {html.escape(r.unit)}</td><td>{fmt(r.current)} {html.escape(r.unit)}</td>"
        f"<td>{r.change_pct:+.1f}</td><td>{fmt(r.p_value, 2)}</td><td>{html.escape(r.method)}"
        + (f" (a new level since run {html.escape(r.level_since)}: alarms until accepted with "
           f"<code>dlbench baseline ack {html.escape(run_id)}</code>)" if r.level_since else "") + "</td>"
        f"<td>{html.escape(', '.join(r.baseline_runs[-3:]))}{' …' if len(r.baseline_runs) > 3 else ''}</td>"
        f"<td>{html.escape('; '.join(r.software_changes)) or '-'}</td></tr>"
        for r in found)
    return head + scroll("<table><tr><th>platform</th><th>case</th><th>metric</th><th>baseline</th>"
                         "<th>this run (a change point: its new level)</th>"
                         "<th>change %</th><th>p</th><th>test</th><th>baseline runs</th>"
                         f"<th>software changed since the baseline</th></tr>{rows}</table>")


def _suite_html(engine: Engine, run_id: str, suite: str, stats: pd.DataFrame, head: pd.DataFrame,
                heading: bool = True) -> str:
    """A suite's charts and tables; ``heading=False`` when its section names it already (a workload's)."""
    suite_head = head[head["suite"] == suite]
    parts = [f"<h2>{html.escape(suite)}</h2>"] if heading else []
    if suite == "network":
        parts.append(_network_note(engine, run_id))
    # Each chart once: training is drawn in the study figures (every scenario), so not again here;
    # nor a workload's throughput, which its figure draws (dlbench.reports.workloads).
    charted = suite_head.iloc[0:0] if suite == scenarios.SUITE else suite_head
    if suite in workloads.FIGURES:
        charted = charted[charted["metric"] != workloads.METRIC]
    for metric in list(dict.fromkeys(charted["metric"]))[:6]:
        rows = charted[charted["metric"] == metric]
        better = "higher" if bool(rows["higher_is_better"].iloc[0]) else "lower"
        png = normalized_chart(charted, metric, f"{suite}: {metric} ({rows['unit'].iloc[0]}, {better} is better), "
                                      "normalized to bare metal, 95% interval; + / − = significantly better / worse")
        if png:
            parts.append(f"<img alt='{html.escape(metric)}' src='data:image/png;base64,{png}'>")
    if suite == scenarios.SUITE:  # the answer and the study figures show them; every number stays one click away
        parts.append(f"<details><summary>Every training headline number ({len(suite_head)} rows: all scenarios, "
                     f"intervals, verdicts, flags)</summary>{_table_html(suite_head)}</details>")
    else:
        parts.append(_table_html(suite_head))
    details = stats[(stats["suite"] == suite) & ~stats.index.isin(suite_head.index)]
    if not details.empty:
        parts.append(f"<details><summary>All other metrics ({len(details)} rows: counters, step statistics)"
                     f"</summary>{_table_html(details)}</details>")
    return "\n".join(parts)


def _span_text(values: pd.Series) -> str:
    """``3`` or ``2-3``: the range of a column of counts."""
    low, high = int(values.min()), int(values.max())
    return str(low) if low == high else f"{low}-{high}"


@dataclass(frozen=True)
class Section:
    """One section of the HTML report: its anchor in the navigation (None: listed in none, e.g. the
    cost table inside the answer), its title there, and its HTML ("" when it has nothing to show)."""

    anchor: str | None
    title: str
    html: str


def build_report(engine: Engine, run_id: str | None, out_dir: str | Path) -> Path:
    """Write ``report.html`` (self-contained: charts embedded), ``comparison.csv`` and
    ``comparison.json`` for the run; return the HTML path."""
    run_id = resolve_run(engine, run_id)
    if run_id is None:
        raise LookupError("the warehouse holds no run yet: trigger dlbench_benchmark first")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame, stats = run_statistics(engine, run_id)
    write_comparison(stats, out)
    head = compare.headline(stats)
    bad = compare.problems(engine, run_id)
    suites = list(dict.fromkeys(stats["suite"])) if not stats.empty else []
    micro = sorted((s for s in suites if s != scenarios.SUITE and s not in answer.WORKLOAD_SUITES),
                   key=lambda s: (MICRO_ORDER.index(s) if s in MICRO_ORDER else len(MICRO_ORDER), s))
    regressions = _regressions_html(engine, run_id)
    profile_name, requested = run_request(engine, run_id)
    profile = answer.run_profile(profile_name, requested, frame)
    grade = answer.decision_grade(profile, stats)
    training = answer.training_rows(stats)
    cells = "training cell" if not training.empty else "cell"
    training = training if not training.empty else answer.answer_rows(stats)  # a run of the workload suites only
    reps = _span_text(training["n"]) if not training.empty else ""
    cost = cost_html(engine, run_id, frame, capacity.load_prices())
    gate_results = run_gates(engine, run_id, frame, requested)
    workload_section = workloads.html_section(
        workloads.figures(stats, frame), out,
        {s: _suite_html(engine, run_id, s, stats, head, heading=False) for s in answer.WORKLOAD_SUITES if s in suites})
    framework_rows = frameworks.framework_rows(frame)
    if framework_rows:
        frameworks.table(framework_rows).to_csv(out / "frameworks.csv", index=False)
    def study_figures() -> str:
        if not scenarios.has_training(stats, bad):
            return ""
        return scenarios.section_html(stats, frame, bad, _table_html, profile.requested_list("scenarios"))

    def micro_benchmarks() -> str:
        if not micro:
            return ""
        return ("<h2 id='micro'>Micro-benchmarks</h2><p class='note'>What explains the training numbers: the "
                "accelerator, deep-learning kernels, the CPU, the network and the disk, each normalized to bare "
                "metal with the same intervals and verdicts.</p>\n"
                + "\n".join(x for x in (_suite_html(engine, run_id, suite, stats, head) for suite in micro) if x))

    def problems() -> str:
        if bad.empty:
            return ""
        return "<h2 id='problems' class='bad'>Failed or skipped</h2><ul>" + "".join(
            f"<li class='bad'>{html.escape(r.status)}: {html.escape(r.platform)} {html.escape(r.suite)}/"
            f"{html.escape(r.name)}{html.escape(scenario_note(r.scenario))} repetition {r.repetition}: "
            f"{html.escape(str(r.error))}</li>"
            for r in bad.itertuples()) + "</ul>"

    # The report's sections in order, each once: the navigation lists those that have something to
    # show (an empty section is left out of both), so the nav and the page cannot disagree.
    sections = [
        Section("answer", "Answer", "\n".join(p for p in (
            _emulated_note(engine, run_id),
            profile_html(profile, grade, f"{reps} repetitions per {cells}" if reps else ""),
            f"<h2 id='answer'>{'Which platform, at what cost' if cost else 'Which platform'}: this run's answer</h2>",
            _warnings_html(stats, bad, load_table(engine, run_id)),
            answer_html(stats, frame)) if p)),
        Section("frameworks", "Frameworks", frameworks.html_section(framework_rows)),
        Section("gates", "Gates", gates.html_section(gate_results)),
        Section(None, "Cost", cost),
        Section("regressions", "Regressions", regressions),
        Section("scenarios", "Study figures", study_figures()),
        Section(None, scenarios.SUITE, _suite_html(engine, run_id, scenarios.SUITE, stats, head)
                if scenarios.SUITE in suites else ""),
        Section("workloads", "Workloads", workload_section),
        Section("micro", "Micro-benchmarks", micro_benchmarks()),
        Section("environment", "Environment", "<h2 id='environment'>Environment</h2>"
                + _environments_html(engine, run_id) + "<h3 id='load'>Machine load</h3>" + _load_html(engine, run_id)),
        Section("problems", "Failures and skips", problems()),
    ]
    shown = [section for section in sections if section.html]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>dlbench report {html.escape(run_id)}</title>"
        f"<style>{STYLE}</style></head><body><h1>Benchmark report: {html.escape(run_id)}</h1>",
        "<nav>" + "".join(f"<a href='#{x.anchor}'>{html.escape(x.title)}</a>" for x in shown if x.anchor) + "</nav>",
        *(section.html for section in shown),
    ]
    parts.append(f"<p class='note'>Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC from the warehouse. Values are "
                 "means over repetitions (n); the uncertainty shown is the 95% interval of each comparison, in the "
                 "tables and as the charts' error bars (the std is in comparison.csv); CV = std / mean; robust "
                 "mean = the mean without the minimum and "
                 f"the maximum (from {st.ROBUST_MIN_N} repetitions, as MLPerf). <b>Diff% = (H − D) / H × 100</b> "
                 "with H = bare metal and D = the platform (study 001): for higher-is-better metrics (↑, e.g. "
                 "images/s) a positive Diff% means the platform is slower; for lower-is-better metrics (↓, e.g. "
                 "elapsed seconds) a negative Diff% means it takes longer. <b>normalized = D / H</b> (bare metal = "
                 "1.0), as in the core study's figures. The same rows: comparison.csv and comparison.json.</p>")
    parts.append("</body></html>")
    page = out / "report.html"
    page.write_text("\n".join(p for p in parts if p))
    return page
