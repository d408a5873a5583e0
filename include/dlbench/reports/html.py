"""The report as one self-contained HTML page, and :func:`build_report`, which writes it with the
comparison's data files.

The page leads with the answer (per scenario and data kind, each platform's throughput and
elapsed time normalized to bare metal, with a 95 % confidence interval and a verdict), then the
study's figures (:mod:`dlbench.reports.scenarios`, inline SVG with the values above the bars),
then the micro-benchmarks that explain them (PNG charts, :mod:`dlbench.reports.figures`), then the
environment (hardware, versions, container limits, CPU affinity and NUMA, the machine's load),
then failures and skips. Every statistic comes from :mod:`dlbench.reports.stats`; the same rows
are written as comparison.csv and comparison.json (:mod:`dlbench.reports.exports`).
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from dlbench.reports import compare, metrics, regression, scenarios
from dlbench.reports import stats as st
from dlbench.reports.exports import write_comparison
from dlbench.reports.figures import normalized_chart
from dlbench.reports.formatting import ci_text, fmt, platform_index, scenario_note
from dlbench.reports.run_data import (
    EMULATED_WARNING,
    emulated_platforms,
    load_table,
    network_paths,
    resolve_run,
    run_statistics,
)
from dlbench.warehouse.models import Environment, Execution, Run

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1500px}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.25em .6em;font-size:.9em;text-align:right}td:first-child,th{text-align:left}
h2{margin-top:2em;border-bottom:2px solid #ddd}.note{color:#555;font-size:.9em}.bad{color:#a00}
.v{padding:0 .35em;border-radius:3px;white-space:nowrap}.v.better{background:#d9f2d9;color:#155d15}
.v.worse{background:#f8d7d7;color:#8a1111}.v.no_significant_difference{background:#eee;color:#444}
.v.too_few_repetitions{background:#fff1cc;color:#7a5a00}.v.baseline{color:#555}.flag{color:#b35c00;font-size:.85em}
.answer td{vertical-align:top;white-space:nowrap}
.answer td:first-child{white-space:normal;min-width:12em}.answer .ci{color:#555;font-size:.85em}
.summary li{margin:.2em 0}
table.env td{text-align:left;font-size:.85em}td.nw{white-space:nowrap}img{max-width:100%}
nav a{margin-right:1em}
""" + scenarios.STYLE


MICRO_ORDER = ["gpu", "deepbench", "cpu", "network", "disk"]
"""The micro-benchmarks in the order that explains training: the accelerator, DL kernels, the CPU,
then the network and the disk."""


DATA_ORDER = ["synthetic", "real"]


ANSWER_METRICS = (("throughput", "throughput"), ("elapsed_time", "elapsed time"))


def _verdict_html(row: Any, short: bool = False) -> str:
    verdict = st.Verdict(row.verdict)
    text = st.VERDICT_TEXT[verdict]
    title = text
    if verdict is st.Verdict.TOO_FEW_REPETITIONS:
        title = f"too few repetitions for a verdict: n={row.n}, bare metal {row.baseline_n}; needs {st.MIN_REPETITIONS}"
        text = f"n={min(row.n, row.baseline_n)}: no verdict" if short else title
    elif verdict is st.Verdict.NO_SIGNIFICANT_DIFFERENCE and short:
        text = "no sig. difference"
    return f"<span class='v {verdict.value}' title='{html.escape(title)}'>{html.escape(text)}</span>"


def _flags_html(row: Any, short: bool = False) -> str:
    flags = getattr(row, "flags", "")
    if not flags:
        return ""
    if short:
        words = [f"CV {row.cv * 100:.0f}%" if row.noisy else "", "outliers" if row.outlier_runs else "",
                 "loaded" if row.loaded_runs else ""]
        text = "⚠ " + ", ".join(w for w in words if w)
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
            f"<td>{html.escape(row.platform)}</td><td>{row.n}</td><td>{fmt(row.mean)}</td><td>{fmt(row.std, 3)}</td>"
            f"<td>{fmt(row.cv * 100 if row.cv == row.cv else None, 3)}</td><td>{fmt(row.robust_mean)}</td>"
            f"<td>{fmt(row.diff_pct, 3)}</td><td class='nw'>{ci_text(row.diff_pct_ci_low, row.diff_pct_ci_high)}</td>"
            f"<td>{fmt(row.normalized, 3)}</td><td class='nw'>{ci_text(row.normalized_ci_low, row.normalized_ci_high)}"
            f"</td><td class='nw'>{_verdict_html(row, short=True)}</td><td class='nw'>{_flags_html(row, short=True)}"
            "</td></tr>"
        )
    confidence = f"{st.DEFAULT_CONFIDENCE * 100:.0f}%"
    return ("<table><tr><th>case</th><th>metric</th><th>platform</th><th>n</th><th>mean</th><th>std</th>"
            f"<th>CV %</th><th>robust mean</th><th>Diff %</th><th>Diff % {confidence} CI</th><th>normalized</th>"
            f"<th>normalized {confidence} CI</th><th>verdict</th><th>flags</th></tr>" + "".join(rows) + "</table>")


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
    return ("<table class='env'><tr><th>platform</th><th>host</th><th>CPU</th><th>cores</th><th>memory</th>"
            "<th>GPUs</th><th>container (limits)</th><th>CPU affinity</th><th>NUMA nodes</th><th>versions</th></tr>"
            f"{''.join(cells)}</table>")


def _load_html(engine: Engine, run_id: str) -> str:
    table = load_table(engine, run_id)
    if table.empty:
        return "<p class='note'>The documents of this run carry no machine-load readings (written before they " \
               "were recorded).</p>"

    rows = []
    for platform, group in table.groupby("platform", sort=False):
        load = [float(v) for v in group["host_load1_before"].dropna()]
        steal = [float(v) for v in group["host_steal_share"].dropna()]
        other = [float(v) for v in group["host_other_cpu_share"].dropna()]
        rows.append((platform_index(str(platform)), f"<tr><td>{html.escape(str(platform))}</td><td>{len(group)}</td>"
                     f"<td>{fmt(max(load) if load else None, 3)}</td>"
                     f"<td>{fmt(max(steal) * 100 if steal else None, 2)}</td>"
                     f"<td>{fmt(max(other) * 100 if other else None, 3)}</td>"
                     f"<td>{int(group['loaded'].notna().sum())}</td></tr>"))
    flagged = table[table["loaded"].notna()]
    items = "".join(f"<li>{html.escape(r.platform)} {html.escape(r.suite)}/{html.escape(r.name)} repetition "
                    f"{r.repetition}: {html.escape(r.loaded)}</li>" for r in flagged.itertuples())
    return ("<p class='note'>Read before and after every job by the workload harness (/proc/loadavg, /proc/stat). "
            f"A job ran on a <b>loaded machine</b> when the 1-minute load per CPU was above "
            f"{st.LOAD_PER_CORE_THRESHOLD:g} before it started, the hypervisor stole more than "
            f"{st.STEAL_THRESHOLD * 100:.0f}% of the CPU time, or other processes used more than "
            f"{st.OTHER_CPU_THRESHOLD * 100:.0f}% of the machine's CPU while it ran (docs/statistics.md). In the "
            "shared scenario and for distributed roles on one host the other processes are the experiment.</p>"
            "<table><tr><th>platform</th><th>jobs</th><th>max load before</th><th>max steal %</th>"
            "<th>max other CPU %</th><th>loaded jobs</th></tr>"
            + "".join(r for _, r in sorted(rows, key=lambda item: item[0])) + "</table>"
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


def _data_kinds(frame: pd.DataFrame) -> dict[str, str]:
    """case_key -> data kind (synthetic, real) of the training cases."""
    if frame.empty:
        return {}
    rows = frame.drop_duplicates("case_key")
    return {r.case_key: str((r.parameters or {}).get("data") or "-") for r in rows.itertuples()}


def _answer_cell(row: Any | None) -> str:
    if row is None:
        return "<td class='note'>-</td>"
    verdict = st.Verdict(row.verdict)
    if verdict is st.Verdict.NOT_COMPARED:
        return f"<td class='note'>{html.escape(value_text(row))}<br>no bare-metal result</td>"
    ci = ci_text(row.normalized_ci_low, row.normalized_ci_high)
    return (f"<td><b>{fmt(row.normalized, 3)}</b> <span class='ci'>{ci}</span><br>"
            f"{_verdict_html(row, short=True)} {_flags_html(row, short=True)}</td>")


def value_text(row: Any) -> str:
    return scenarios.value_text(float(row.mean), row.std, str(row.unit),
                                int(row.n))


def _verdict_counts(rows: pd.DataFrame) -> str:
    counts = rows["verdict"].value_counts()
    order = [st.Verdict.BETTER, st.Verdict.WORSE, st.Verdict.NO_SIGNIFICANT_DIFFERENCE, st.Verdict.TOO_FEW_REPETITIONS]
    return ", ".join(f"{int(counts[v.value])} {st.VERDICT_TEXT[v]}" for v in order if counts.get(v.value, 0))


def answer_html(stats: pd.DataFrame, frame: pd.DataFrame) -> str:
    """The first screen: per scenario and data kind, each platform's throughput and elapsed time
    normalized to bare metal with its confidence interval and verdict; a run without training
    answers with the micro-benchmarks' headline metrics instead."""
    confidence = f"{st.DEFAULT_CONFIDENCE * 100:.0f}%"
    intro = (f"<p class='note'>Each platform against bare metal (×BM: 1.0 = bare metal) with its {confidence} "
             "confidence interval (Welch's t, docs/statistics.md) and a verdict at that confidence: "
             "<span class='v better'>better</span>, <span class='v worse'>worse</span>, <span class='v "
             "no_significant_difference'>no significant difference</span> (the interval contains 1.0), or "
             f"<span class='v too_few_repetitions'>too few repetitions</span> (fewer than {st.MIN_REPETITIONS} on "
             "either side: no verdict). ⚠ marks measurements flagged noisy (CV above "
             f"{st.CV_THRESHOLD * 100:.0f}%, step-time outliers, a loaded machine): their verdicts deserve a "
             "repeat.</p>")
    head = compare.headline(stats)
    training = head[(head["suite"] == scenarios.SUITE) & head["metric"].isin([m for m, _ in ANSWER_METRICS])] \
        if not head.empty else head
    if training.empty:
        return _micro_answer(head, intro)
    platforms = [p for p in scenarios._platforms(list(training["platform"])) if p != compare.BASELINE]
    if not platforms:
        return intro + "<p>Only bare metal ran training in this run: no platform to compare with it.</p>"
    kinds = _data_kinds(frame)
    summary = []
    for platform in platforms:
        mine = training[training["platform"] == platform]
        parts = [f"{label}: {_verdict_counts(mine[mine['metric'] == metric])}" for metric, label in ANSWER_METRICS
                 if not mine[mine["metric"] == metric].empty]
        summary.append(f"<li><b>{html.escape(platform)}</b> vs bare metal, over {mine['case_key'].nunique()} "
                       f"training cells: {html.escape('; '.join(parts))}</li>")
    parts = [intro, f"<ul class='summary'>{''.join(summary)}</ul>"]
    for scenario in compare.SCENARIOS:
        rows = training[training["scenario"] == scenario]
        if rows.empty:
            continue
        found_kinds = {kinds.get(k, "-") for k in rows["case_key"]}
        for kind in sorted(found_kinds, key=lambda k: (DATA_ORDER.index(k) if k in DATA_ORDER else len(DATA_ORDER), k)):
            cells = rows[rows["case_key"].map(lambda k, kind=kind: kinds.get(k, "-") == kind)]
            head_cells = "".join(f"<th colspan='{len(platforms)}'>{html.escape(label)} ×BM "
                                 f"{'↑' if metric == 'throughput' else '↓'}</th>" for metric, label in ANSWER_METRICS)
            sub = "".join(f"<th>{html.escape(p)}</th>" for _ in ANSWER_METRICS for p in platforms)
            body = []
            for cell in dict.fromkeys(cells["cell"]):
                mine = cells[cells["cell"] == cell]
                base = {m: mine[(mine["metric"] == m) & (mine["platform"] == compare.BASELINE)] for m, _ in
                        ANSWER_METRICS}
                measured = "; ".join(value_text(next(b.itertuples())) for b in base.values() if not b.empty)
                row_cells = []
                for metric, _ in ANSWER_METRICS:
                    for platform in platforms:
                        found = mine[(mine["metric"] == metric) & (mine["platform"] == platform)]
                        row_cells.append(_answer_cell(next(found.itertuples()) if not found.empty else None))
                body.append(f"<tr><td>{html.escape(str(cell))}</td><td>{html.escape(measured or '-')}</td>"
                            f"{''.join(row_cells)}</tr>")
            parts.append(f"<h3>{html.escape(scenarios.TITLES.get(scenario, scenario))} · {html.escape(kind)} data</h3>"
                         f"<table class='answer'><tr><th rowspan='2'>cell</th><th rowspan='2'>bare metal (mean ± "
                         f"std)</th>{head_cells}</tr><tr>{sub}</tr>{''.join(body)}</table>")
    relative = head[(head["suite"] == scenarios.SUITE) & head["metric"].isin(metrics.RELATIVE)] \
        if not head.empty else head
    if not relative.empty:
        parts.append("<p class='note'>Shared resource: the degradation of each platform's job next to a background "
                     "or other tenants is in the study figures below (figure 10).</p>")
    return "\n".join(parts)


def _micro_answer(head: pd.DataFrame, intro: str) -> str:
    rows = head[head["platform"] != compare.BASELINE] if not head.empty else head
    if rows.empty:
        return "<p class='note'>No platform to compare with bare metal in this run.</p>"
    body = "".join(f"<tr><td>{html.escape(r.suite)}</td><td>{html.escape(r.case)}</td><td>{html.escape(r.metric)} "
                   f"{'↑' if r.higher_is_better else '↓'}</td><td>{html.escape(r.platform)}</td>"
                   f"{_answer_cell(r)}</tr>" for r in rows.itertuples())
    return (intro + "<p>This run has no training results: the micro-benchmarks' headline metrics.</p>"
            "<table class='answer'><tr><th>suite</th><th>case</th><th>metric</th><th>platform</th><th>×BM</th></tr>"
            f"{body}</table>")


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
                       "the pinned run, else the previous runs holding the same case on the same environment).</p>")
    rows = "".join(
        f"<tr><td>{html.escape(r.platform)}</td><td>{html.escape(r.case)}</td><td>{html.escape(r.metric)}</td>"
        f"<td>{fmt(r.baseline)} {html.escape(r.unit)}</td><td>{fmt(r.current)} {html.escape(r.unit)}</td>"
        f"<td>{r.change_pct:+.1f}</td><td>{fmt(r.p_value, 2)}</td><td>{html.escape(r.method)}</td>"
        f"<td>{html.escape(', '.join(r.baseline_runs[-3:]))}{' …' if len(r.baseline_runs) > 3 else ''}</td></tr>"
        for r in found)
    return (head + "<table><tr><th>platform</th><th>case</th><th>metric</th><th>baseline</th><th>this run</th>"
            f"<th>change %</th><th>p</th><th>test</th><th>baseline runs</th></tr>{rows}</table>")


def _suite_html(engine: Engine, run_id: str, suite: str, stats: pd.DataFrame, head: pd.DataFrame) -> str:
    suite_head = head[head["suite"] == suite]
    parts = [f"<h2>{html.escape(suite)}</h2>"]
    if suite == "network":
        parts.append(_network_note(engine, run_id))
    # Training's scenarios are charted in the study figures; here its single instance, as before.
    charted = suite_head[suite_head["scenario"] == compare.SINGLE] if suite == scenarios.SUITE else suite_head
    for metric in list(dict.fromkeys(charted["metric"]))[:6]:
        rows = charted[charted["metric"] == metric]
        better = "higher" if bool(rows["higher_is_better"].iloc[0]) else "lower"
        png = normalized_chart(charted, metric, f"{suite}: {metric} ({rows['unit'].iloc[0]}, {better} is better), "
                                      "normalized to bare metal; + / − = significantly better / worse")
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
    micro = sorted((s for s in suites if s != scenarios.SUITE),
                   key=lambda s: (MICRO_ORDER.index(s) if s in MICRO_ORDER else len(MICRO_ORDER), s))
    regressions = _regressions_html(engine, run_id)
    nav = [("answer", "Answer")] + ([("regressions", "Regressions")] if regressions else []) + (
        [("scenarios", "Study figures")] if scenarios.has_training(stats, bad) else []) + (
        [("micro", "Micro-benchmarks")] if micro else []) + [("environment", "Environment")] + (
        [("problems", "Failures and skips")] if not bad.empty else [])
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>dlbench report {html.escape(run_id)}</title>"
        f"<style>{STYLE}</style></head><body><h1>Benchmark report: {html.escape(run_id)}</h1>",
        "<nav>" + "".join(f"<a href='#{a}'>{html.escape(t)}</a>" for a, t in nav) + "</nav>",
        _emulated_note(engine, run_id),
        "<h2 id='answer'>Which platform, at what cost: this run's answer</h2>",
        _warnings_html(stats, bad, load_table(engine, run_id)),
        answer_html(stats, frame),
        regressions,
    ]
    if scenarios.has_training(stats, bad):
        parts.append(scenarios.section_html(stats, frame, bad, _table_html))
    if scenarios.SUITE in suites:
        parts.append(_suite_html(engine, run_id, scenarios.SUITE, stats, head))
    if micro:
        parts.append("<h2 id='micro'>Micro-benchmarks</h2><p class='note'>What explains the training numbers: the "
                     "accelerator, deep-learning kernels, the CPU, the network and the disk, each normalized to bare "
                     "metal with the same intervals and verdicts.</p>")
        parts += [_suite_html(engine, run_id, suite, stats, head) for suite in micro]
    parts.append("<h2 id='environment'>Environment</h2>" + _environments_html(engine, run_id)
                 + "<h3 id='load'>Machine load</h3>" + _load_html(engine, run_id))
    if not bad.empty:
        parts.append("<h2 id='problems' class='bad'>Failed or skipped</h2><ul>" + "".join(
            f"<li class='bad'>{html.escape(r.status)}: {html.escape(r.platform)} {html.escape(r.suite)}/"
            f"{html.escape(r.name)}{html.escape(scenario_note(r.scenario))} repetition {r.repetition}: "
            f"{html.escape(str(r.error))}</li>"
            for r in bad.itertuples()) + "</ul>")
    parts.append(f"<p class='note'>Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC from the warehouse. Values are "
                 "the mean ± std over repetitions; CV = std / mean; robust mean = the mean without the minimum and "
                 f"the maximum (from {st.ROBUST_MIN_N} repetitions, as MLPerf). <b>Diff% = (H − D) / H × 100</b> "
                 "with H = bare metal and D = the platform (study 001): for higher-is-better metrics (↑, e.g. "
                 "images/s) a positive Diff% means the platform is slower; for lower-is-better metrics (↓, e.g. "
                 "elapsed seconds) a negative Diff% means it takes longer. <b>normalized = D / H</b> (bare metal = "
                 "1.0), as in the core study's figures. The same rows: comparison.csv and comparison.json.</p>")
    parts.append("</body></html>")
    page = out / "report.html"
    page.write_text("\n".join(p for p in parts if p))
    return page
