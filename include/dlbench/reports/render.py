"""Render comparisons: an HTML report with embedded charts and a plain-text table.

The suites' charts are PNG images; the Scenarios section (:mod:`dlbench.reports.scenarios`) draws
the core study's figures with the same library as inline SVG, so the values above its bars are text.
"""

from __future__ import annotations

import base64
import html
import io
import math
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine, select

from dlbench.reports import compare, metrics, scenarios
from dlbench.warehouse.models import Benchmark as BenchmarkRow
from dlbench.warehouse.models import Environment, Execution, Run


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}g}"


def _metric_label(metric: str, unit: str, higher_is_better: bool, width: int = 22) -> str:
    """``metric unit ↑`` cut to ``width`` with the arrow always visible."""
    return f"{(metric + ' ' + unit)[:width - 2]} {'↑' if higher_is_better else '↓'}"


def _resolve(engine: Engine, run_id: str | None) -> str | None:
    """``run_id`` if the warehouse has it (LookupError naming it otherwise); None: the latest run."""
    if run_id is None:
        return compare.latest_run_id(engine)
    with engine.connect() as conn:
        if conn.scalar(select(Run.id).where(Run.run_id == run_id)) is None:
            known = conn.scalars(select(Run.run_id).order_by(Run.started_at.desc().nulls_last()).limit(5)).all()
            raise LookupError(f"run_id {run_id!r} is not in the warehouse; latest runs: {', '.join(known) or 'none'}")
    return run_id


def text_table(engine: Engine, run_id: str | None = None) -> str:
    """Headline comparison as fixed-width text (printed at the end of a run)."""
    run_id = _resolve(engine, run_id)
    if run_id is None:
        return "no run in the warehouse yet"
    frame = compare.samples_frame(engine, run_id)
    stats = compare.headline(compare.statistics(frame))
    lines = [f"Run {run_id}: mean ± std over repetitions. Diff% = (BM - X) / BM x 100 (study 001), norm = X / BM "
             "(BM = bare metal).", "For ↓ metrics (times) a negative Diff% / norm > 1 means X is slower."]
    lines += [f"WARNING: {platform} {EMULATED_WARNING.format(accel=accel)}."
              for platform, accel in sorted(emulated_platforms(engine, run_id).items())]
    # Case names say their scenario and cell (up to ~70 characters): never cut what tells them apart.
    width = min(80, max([42, *(len(c) for c in stats["case"])])) if not stats.empty else 42
    header = f"{'suite':8} {'case':{width}} {'metric':22} {'platform':24} {'n':>3} {'mean':>11} {'std':>9} " \
             f"{'cv%':>6} {'Diff%':>7} {'norm':>6}"
    if not stats.empty and stats["metric"].isin(metrics.RELATIVE).any():
        lines.append("degradation_* rows (shared scenario) are % worse than the same job alone: compared as they "
                     "are, no Diff% / norm.")
    lines += [header, "-" * len(header)]
    for row in stats.itertuples():
        cv = row.cv * 100 if row.cv == row.cv and row.cv is not None else float("nan")
        lines.append(
            f"{row.suite[:8]:8} {row.case[:width]:{width}} "
            f"{_metric_label(row.metric, row.unit, row.higher_is_better):22} "
            f"{row.platform[:24]:24} "
            f"{row.n:>3} {_fmt(row.mean):>11} {_fmt(row.std, 3):>9} {_fmt(cv, 3):>6} "
            f"{_fmt(row.diff_pct, 3):>7} {_fmt(row.normalized, 3):>6}"
        )
    bad = compare.problems(engine, run_id)
    for row in bad.itertuples():
        lines.append(f"{row.status.upper()}: {row.platform} {row.suite}/{row.name}{_scenario_note(row.scenario)} "
                     f"r{row.repetition}: {row.error}")
    if stats.empty and bad.empty:
        lines.append("(no samples)")
    lines += scenarios.text_lines(stats, frame, bad)
    return "\n".join(lines)


def _scenario_note(scenario: str) -> str:
    return "" if scenario == compare.SINGLE else f" ({scenario})"


def _chart(stats: pd.DataFrame, metric: str, title: str) -> str | None:
    """Grouped bars of a metric normalized to bare metal, error bars = std / bare-metal mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = stats[(stats["metric"] == metric) & stats["normalized"].notna()]
    if data.empty:
        return None
    cases = list(dict.fromkeys(data["case"]))
    platforms = [p for p in compare.PLATFORM_ORDER if p in set(data["platform"])] + sorted(
        set(data["platform"]) - set(compare.PLATFORM_ORDER))
    width = 0.8 / max(1, len(platforms))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(cases) + 2), 3.8), dpi=100)
    for i, platform in enumerate(platforms):
        rows = data[data["platform"] == platform].set_index("case")
        xs = [c + i * width for c in range(len(cases))]
        heights = [rows["normalized"].get(case, float("nan")) for case in cases]
        errors = [(rows["std"] / rows["baseline"]).fillna(0.0).get(case, 0.0) for case in cases]
        ax.bar(xs, heights, width, yerr=errors, capsize=3, label=platform)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([c + width * (len(platforms) - 1) / 2 for c in range(len(cases))])
    ax.set_xticklabels(cases, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("normalized to bare metal")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _table_html(stats: pd.DataFrame) -> str:
    if stats.empty:
        return "<p>No samples.</p>"
    rows = []
    for row in stats.itertuples():
        better = "↑" if row.higher_is_better else "↓"
        rows.append(
            f"<tr><td>{html.escape(row.case)}</td><td>{html.escape(row.metric)} ({html.escape(row.unit)}) {better}</td>"
            f"<td>{html.escape(row.platform)}</td><td>{row.n}</td><td>{_fmt(row.mean)}</td><td>{_fmt(row.std, 3)}</td>"
            f"<td>{_fmt(row.cv * 100 if row.cv == row.cv else None, 3)}</td><td>{_fmt(row.diff_pct, 3)}</td>"
            f"<td>{_fmt(row.normalized, 3)}</td></tr>"
        )
    return ("<table><tr><th>case</th><th>metric</th><th>platform</th><th>n</th><th>mean</th><th>std</th>"
            "<th>CV %</th><th>Diff %</th><th>normalized</th></tr>" + "".join(rows) + "</table>")


def _environments_html(engine: Engine, run_id: str) -> str:
    query = (select(Environment.platform, Environment.hostname, Environment.cpu_model, Environment.cpu_count,
                    Environment.memory_bytes, Environment.gpu_model, Environment.gpu_count,
                    Environment.tensorflow_version, Environment.in_container, Environment.cpu_limit_cores,
                    Environment.memory_limit_bytes)
             .join(Execution, Execution.environment_id == Environment.id).join(Run, Execution.run_pk == Run.id)
             .where(Run.run_id == run_id).distinct())
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    cells = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v if v is not None else '-'))}</td>" for v in (
            r.platform, r.hostname, r.cpu_model, r.cpu_count,
            f"{r.memory_bytes / 2**30:.1f} GiB" if r.memory_bytes else None, r.gpu_model or "none", r.gpu_count,
            r.tensorflow_version, "yes" if r.in_container else "no",
            r.cpu_limit_cores, f"{r.memory_limit_bytes / 2**30:.1f} GiB" if r.memory_limit_bytes else None,
        )) + "</tr>" for r in rows)
    return ("<table><tr><th>platform</th><th>host</th><th>CPU</th><th>cores</th><th>memory</th><th>GPU</th>"
            "<th>GPUs</th><th>TensorFlow</th><th>container</th><th>CPU limit</th><th>memory limit</th></tr>"
            f"{cells}</table>")


def network_paths(engine: Engine, run_id: str) -> dict[str, list[str]]:
    """platform -> the network paths its network-suite executions measured (label ``network_path``)."""
    query = (select(Execution.platform, Execution.labels).join(Run, Execution.run_pk == Run.id)
             .join(BenchmarkRow, Execution.benchmark_id == BenchmarkRow.id)
             .where(Run.run_id == run_id, BenchmarkRow.suite == "network"))
    found: dict[str, list[str]] = {}
    with engine.connect() as conn:
        for platform, labels in conn.execute(query).all():
            path = (labels or {}).get("network_path")
            if path and path not in found.setdefault(platform, []):
                found[platform].append(path)
    return found


def emulated_platforms(engine: Engine, run_id: str) -> dict[str, str]:
    """platform -> the accelerator of its executions whose documents say ``emulated=true``: QEMU
    guests without hardware virtualization (TCG), 10-70x slower than a real VM."""
    query = (select(Execution.platform, Execution.labels).join(Run, Execution.run_pk == Run.id)
             .where(Run.run_id == run_id))
    found: dict[str, str] = {}
    with engine.connect() as conn:
        for platform, labels in conn.execute(query).all():
            if (labels or {}).get("emulated") == "true":
                found[platform] = (labels or {}).get("accel") or "emulated"
    return found


EMULATED_WARNING = ("ran in QEMU guests without hardware virtualization ({accel}): emulated, 10-70x slower than a VM "
                    "on KVM, so these numbers say nothing about virtualization overhead")


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


STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.25em .6em;font-size:.9em;text-align:right}td:first-child,th{text-align:left}
h2{margin-top:2em}.note{color:#555;font-size:.9em}.bad{color:#a00}
""" + scenarios.STYLE


def build_report(engine: Engine, run_id: str | None, out_dir: str | Path) -> Path:
    """Write ``report.html`` (charts embedded) and ``comparison.csv`` for the run; return the HTML path."""
    run_id = _resolve(engine, run_id)
    if run_id is None:
        raise LookupError("the warehouse holds no run yet: trigger dlbench_benchmark first")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame = compare.samples_frame(engine, run_id)
    stats = compare.statistics(frame)
    stats.to_csv(out / "comparison.csv", index=False)
    head = compare.headline(stats)
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>dlbench report {html.escape(run_id)}</title>"
        f"<style>{STYLE}</style></head><body><h1>Benchmark report: {html.escape(run_id)}</h1>",
        f"<p class='note'>Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC from the warehouse. Values are the mean "
        "± std over repetitions; CV = std / mean. <b>Diff% = (H − D) / H × 100</b> with H = bare metal and D = the "
        "platform (study 001): for higher-is-better metrics (↑, e.g. images/s) a positive Diff% means the platform "
        "is slower; for lower-is-better metrics (↓, e.g. elapsed seconds) a negative Diff% means it takes longer. "
        "<b>normalized = D / H</b> (bare metal = 1.0), as in the core study's figures.</p>",
    ]
    parts.append(_emulated_note(engine, run_id))
    bad = compare.problems(engine, run_id)
    if not bad.empty:
        parts.append("<h2 class='bad'>Failed or skipped</h2><ul>" + "".join(
            f"<li class='bad'>{html.escape(r.status)}: {html.escape(r.platform)} {html.escape(r.suite)}/"
            f"{html.escape(r.name)}{html.escape(_scenario_note(r.scenario))} repetition {r.repetition}: "
            f"{html.escape(str(r.error))}</li>"
            for r in bad.itertuples()) + "</ul>")
    if scenarios.has_training(stats, bad):
        parts.append(scenarios.section_html(stats, frame, bad, _table_html))
    for suite in list(dict.fromkeys(stats["suite"])) if not stats.empty else []:
        suite_head = head[head["suite"] == suite]
        parts.append(f"<h2>{html.escape(suite)}</h2>")
        if suite == "network":
            parts.append(_network_note(engine, run_id))
        # Training's scenarios are charted in the Scenarios section; here its single instance, as before.
        charted = suite_head[suite_head["scenario"] == compare.SINGLE] if suite == scenarios.SUITE else suite_head
        for metric in list(dict.fromkeys(charted["metric"]))[:6]:
            rows = charted[charted["metric"] == metric]
            better = "higher" if bool(rows["higher_is_better"].iloc[0]) else "lower"
            png = _chart(charted, metric, f"{suite}: {metric} ({rows['unit'].iloc[0]}, {better} is better), "
                                          "normalized to bare metal")
            if png:
                parts.append(f"<img alt='{html.escape(metric)}' src='data:image/png;base64,{png}'>")
        parts.append(_table_html(suite_head))
        details = stats[(stats["suite"] == suite) & ~stats.index.isin(suite_head.index)]
        if not details.empty:
            parts.append(f"<details><summary>All other metrics ({len(details)} rows: counters, step statistics)"
                         f"</summary>{_table_html(details)}</details>")
    parts.append("<h2>Environments</h2>" + _environments_html(engine, run_id))
    parts.append("</body></html>")
    page = out / "report.html"
    page.write_text("\n".join(parts))
    return page
