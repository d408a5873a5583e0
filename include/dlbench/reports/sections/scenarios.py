"""The report's "Scenarios" section: the core study's three scenarios side by side.

The study (004, section 4) answers one question per figure: how much does a platform cost in a
given scenario? Figures 2-9 show throughput and elapsed time per model, one bar per platform,
normalized to bare metal, "the actual performance measurement values indicated above the bars";
figure 10 shows the elapsed-time degradation % of a job sharing its machine, per platform. This
module builds the same figures from the comparison table (:func:`dlbench.reports.analysis.compare.statistics`)
for single, distributed and shared side by side, so one look says which platform, in which scenario.

Everything a figure shows is first a plain list of :class:`Bar` (what is drawn, and the text above
it), then drawn by matplotlib as inline SVG with its text kept as text: the values stay readable
at any zoom, searchable, and checkable by tests against the warehouse.
"""

from __future__ import annotations

import html
import io
import math
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dlbench.profiles import get_profile
from dlbench.reports.analysis import compare, metrics
from dlbench.reports.rendering import palette
from dlbench.reports.rendering.tables import table_html
from dlbench.reports.sections.base import RunView
from dlbench.reports.sections.suite_tables import suite_html
from dlbench.suites import Suite

SUITE = Suite.TF_CNN.value

TITLES = {
    compare.SINGLE: "Single instance",
    compare.DISTRIBUTED: "Distributed multi-instance",
    compare.SHARED: "Shared resource",
}
EXPLAINED = {
    compare.SINGLE: "one instance, the job on all its devices (figures 2-5)",
    compare.DISTRIBUTED: "parameter server + workers, one instance each; cluster throughput = sum of the workers, "
                         "elapsed = first launch to last exit (figures 6-9)",
    compare.SHARED: "the job while a background job or other tenants share its machine (under load)",
}
FIGURE_METRICS = (("throughput", "throughput"), ("elapsed_time", "elapsed time"))
"""The two measures of figures 2-9, in the study's order."""

DEGRADATION_METRICS = (("degradation_elapsed_time", "elapsed-time degradation"),
                       ("degradation_throughput", "throughput degradation"))
"""Figure 10 (elapsed time, the study's), and the same for throughput."""

BACKGROUND, CONTROL, TENANTS = "background", "control", "tenants"
_KIND_ORDER = {BACKGROUND: 0, CONTROL: 1, TENANTS: 2}


@dataclass(frozen=True)
class Bar:
    """One bar of a figure: its group on the x axis, its platform, its height (normalized to bare
    metal, or a degradation %), the ends of its error bar and the text printed above it (the
    measured mean, its unit and n).

    The error bar is the comparison's interval, the same the tables show
    (``normalized_ci_low``/``normalized_ci_high``), never a std: one notion of uncertainty in the
    whole report. ``low``/``high`` are NaN where there is no interval (bare metal, the reference;
    too few repetitions; a degradation, which is not compared): then no error bar is drawn."""

    group: str
    platform: str
    height: float
    low: float
    high: float
    text: str

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)


def value_text(mean: float, std: float | None, unit: str, n: int) -> str:
    """``mean ± std unit`` as printed above a bar; one repetition has no spread, so it says n=1."""
    if std is not None and not math.isnan(std) and abs(std) <= 1e-9 * abs(mean):
        std = 0.0  # equal repetitions: rounding noise in the mean's last bits is no spread
    spread = f" ± {std:.2g}" if std is not None and not math.isnan(std) else ""
    suffix = "" if spread or n != 1 else " (n=1)"
    return f"{mean:.4g}{spread} {unit}{suffix}".strip()


def bar_text(mean: float, unit: str, n: int) -> str:
    """``61.2 images/s n=3``: what is printed above a bar (the measured mean and the repetitions
    behind it; the spread is the error bar's interval, not a second number)."""
    return f"{mean:.4g} {unit} n={n}".strip()


def _platforms(values: Sequence[str]) -> list[str]:
    present = set(values)
    return [p for p in compare.PLATFORM_ORDER if p in present] + sorted(present - set(compare.PLATFORM_ORDER))


def scenario_rows(stats: pd.DataFrame, scenario: str, metric: str) -> pd.DataFrame:
    """The comparison rows of one training metric in one scenario."""
    if stats.empty:
        return stats
    return stats[(stats["suite"] == SUITE) & (stats["scenario"] == scenario) & (stats["metric"] == metric)]


def normalized_bars(stats: pd.DataFrame, scenario: str, metric: str,
                    kinds: Mapping[str, str] | None = None) -> list[Bar]:
    """Figures 2-9: per cell of the scenario, one bar per platform at mean / bare metal's mean
    (bare metal = 1.0), its error bar the ×BM interval of the comparison (none for bare metal and
    for too few repetitions); cells without a bare-metal result have no bars (:func:`unnormalized`
    names them). With ``kinds`` (shared cells' interference), the cells come in figure 10's order:
    with background, the control, tenants."""
    rows = scenario_rows(stats, scenario, metric)
    rows = rows[rows["normalized"].notna()]
    bars = [(_KIND_ORDER[kinds.get(str(r["case_key"]), BACKGROUND)] if kinds else 0,
             Bar(group=_group(rows, r), platform=str(r["platform"]), height=float(r["normalized"]),
                 low=float(r["normalized_ci_low"]), high=float(r["normalized_ci_high"]),
                 text=bar_text(float(r["mean"]), str(r["unit"]), int(r["n"]))))
            for _, r in rows.iterrows()]
    return [bar for _, bar in sorted(bars, key=lambda item: item[0])]


def _group(rows: pd.DataFrame, row: pd.Series) -> str:
    """The cell's name; the full case name when a cell has several label sets for one metric."""
    same = rows[(rows["cell"] == row["cell"]) & (rows["platform"] == row["platform"])]
    return str(row["cell"]) if len(same) <= 1 else str(row["case"])


def unnormalized(stats: pd.DataFrame, scenario: str, metric: str) -> list[str]:
    """Cells of the scenario that some platform ran but bare metal did not (nothing to divide by)."""
    rows = scenario_rows(stats, scenario, metric)
    return list(dict.fromkeys(rows[rows["normalized"].isna() & (rows["platform"] != compare.BASELINE)]["cell"]))


# -- shared: what kind of interference a cell measured ---------------------------------------------


def _control_spec(profile: Any) -> tuple[str, int] | None:
    """(model, batch) of the profile's small-batch control, when the profile defines one."""
    try:
        shared = get_profile(str(profile)).scenarios.shared
        return str(getattr(shared.control_model, "value", shared.control_model)), int(shared.control_batch_size)
    except Exception:  # noqa: BLE001 - an unknown or older profile: fall back on the explicit batch
        return None


def _default_batch(profile: Any, model: str) -> int | None:
    try:
        return int(get_profile(str(profile)).training(model).batch_size_per_device)
    except Exception:  # noqa: BLE001 - unknown profile or model
        return None


def interference_kind(name: str, parameters: Mapping[str, Any] | None,
                      execution_labels: Mapping[str, Any] | None = None) -> str:
    """background, control or tenants: the groups of figure 10.

    The control is the study's AlexNet at a small batch next to the same big-batch background
    (it shows the host-device bus contention): a background cell of the profile's control model
    at the control batch, when that batch is not the model's own (else the two cells are one).
    Without a known profile, a cell that asked for an explicit ``batch_size`` is the control
    (only the control overrides the model's batch)."""
    parameters = parameters or {}
    interference = parameters.get("interference") or (execution_labels or {}).get("interference")
    if interference == TENANTS:
        return TENANTS
    batch = parameters.get("batch_size", parameters.get("batch_size_per_device"))
    spec = _control_spec(parameters.get("profile"))
    if spec is None:
        return CONTROL if "batch_size" in parameters else BACKGROUND
    model, control_batch = spec
    if name == model and batch is not None and int(batch) == control_batch \
            and _default_batch(parameters.get("profile"), name) != control_batch:
        return CONTROL
    return BACKGROUND


def shared_kinds(frame: pd.DataFrame) -> dict[str, str]:
    """case_key -> interference kind, for the shared cells of a samples frame."""
    if frame.empty:
        return {}
    rows = frame[(frame["suite"] == SUITE) & (frame["scenario"] == compare.SHARED)].drop_duplicates("case_key")
    return {r.case_key: interference_kind(r.name, r.parameters, r.execution_labels) for r in rows.itertuples()}


def degradation_bars(stats: pd.DataFrame, kinds: Mapping[str, str], metric: str) -> list[Bar]:
    """Figure 10: per shared cell, one bar per platform at the cell documents' mean degradation %
    (positive = slower than alone), grouped background, then control, then tenants. No error
    bar: a degradation is already relative to the job alone, so the comparison states no interval
    for it (:data:`dlbench.reports.analysis.metrics.RELATIVE`); n is printed above the bar."""
    rows = scenario_rows(stats, compare.SHARED, metric)
    bars = []
    for _, r in rows.iterrows():
        kind = kinds.get(str(r["case_key"]), BACKGROUND)
        # A cell's name already says "with background" or "N tenants"; the control needs saying.
        group = f"control: {_group(rows, r)}" if kind == CONTROL else _group(rows, r)
        bars.append((_KIND_ORDER[kind], Bar(group=group, platform=str(r["platform"]), height=float(r["mean"]),
                                            low=math.nan, high=math.nan,
                                            text=bar_text(float(r["mean"]), str(r["unit"]), int(r["n"])))))
    return [bar for _, bar in sorted(bars, key=lambda item: item[0])]


def uncovered_cells(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Shared cells whose background job did not cover the foreground's measured window
    (``labels["background_covered"] == "false"`` on the cell's execution): their foreground ran
    partly alone, so their degradation understates the interference."""
    if frame.empty:
        return []
    flagged = frame[frame["execution_labels"].map(lambda lab: str((lab or {}).get("background_covered")) == "false")]
    found = []
    for job_id, rows in flagged.groupby("job_id", sort=False):
        first = rows.iloc[0]
        coverage = rows[rows["metric"] == "background_coverage"]["value"]
        found.append({"job_id": job_id, "platform": first["platform"], "cell": first["cell"],
                      "repetition": int(first["repetition"]),
                      "coverage": float(coverage.iloc[0]) if not coverage.empty else None})
    return sorted(found, key=lambda f: (f["cell"], f["platform"], f["repetition"]))


NOT_REQUESTED = "not requested"


def scenario_status(stats: pd.DataFrame, bad: pd.DataFrame, requested: Sequence[str] | None = None
                    ) -> dict[str, str]:
    """Per scenario: "ran", "failed" (cell documents, none successful), "not run" (the request
    asked for it and nothing came back) or :data:`NOT_REQUESTED`. ``requested``: the request's
    scenarios; None (a run loaded without its request) calls nothing "not run": what was not
    asked for is not missing."""
    ran = set(stats[stats["suite"] == SUITE]["scenario"]) if not stats.empty else set()
    failed = set(bad[bad["suite"] == SUITE]["scenario"]) if not bad.empty and "scenario" in bad else set()
    asked = set(requested or ())
    return {s: "ran" if s in ran else "failed" if s in failed else "not run" if s in asked else NOT_REQUESTED
            for s in compare.SCENARIOS}


def has_training(stats: pd.DataFrame, bad: pd.DataFrame) -> bool:
    return (not stats.empty and (stats["suite"] == SUITE).any()) or (not bad.empty and (bad["suite"] == SUITE).any())


# -- drawing ---------------------------------------------------------------------------------------


def _gid(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))


def y_limits(bars: Sequence[Bar], reference: float) -> tuple[float, float]:
    """The value axis' range: it always contains 0 (bars start there), the reference line, every
    bar and every end of its interval, with room above (and below, for negative bars) for the
    vertical value texts."""
    tops = [reference, 0.0] + [b.height for b in bars] + [b.high for b in bars if b.has_interval]
    bottoms = [reference, 0.0] + [b.height for b in bars] + [b.low for b in bars if b.has_interval]
    low, high = min(bottoms), max(tops)
    span = (high - low) or 1.0
    return low - (0.55 * span if low < 0 else 0.0), high + 0.6 * span


def svg_figure(bars: Sequence[Bar], *, figure_id: str, title: str, ylabel: str, reference: float) -> str:
    """Grouped bars (one group per cell, one bar per platform) as inline SVG, each bar's text
    above it and its interval as an error bar; ``reference`` draws the line a reader compares
    against (1.0 = bare metal, 0 %). The legend names only the platforms drawn.

    Bars, their texts and error bars carry ids ``bar-<figure>-<platform>-<group index>``,
    ``value-...`` and ``err-...``, the plot area ``axes-<figure>`` and the legend's swatches
    ``legend-<figure>-<platform>``, so a reader (or a test) can pair them and check that every
    bar lies inside its axes."""
    import matplotlib  # heavy: matplotlib takes most of a second to import; only drawing a figure needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # heavy: after the Agg backend is chosen (no display on a worker)

    groups = list(dict.fromkeys(b.group for b in bars))
    platforms = _platforms([b.platform for b in bars])
    width = 0.8 / max(1, len(platforms))
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": figure_id}):
        # About 0.4 in per bar and at least 1.6 in per group: the wrapped group names never overlap.
        width_in = 0.9 + max(0.4 * len(platforms), 1.6) * len(groups)
        fig, ax = plt.subplots(figsize=(max(5.0, width_in), 4.4), dpi=100)
        ax.patch.set_gid(_gid("axes", figure_id))
        drawn = []
        for i, platform in enumerate(platforms):
            found = [(g, next((b for b in bars if b.group == group and b.platform == platform), None))
                     for g, group in enumerate(groups)]
            mine = [(g, b) for g, b in found if b is not None]
            if not mine:
                continue
            drawn.append(platform)
            xs = [g + (i - (len(platforms) - 1) / 2) * width for g, _ in mine]
            rects = ax.bar(xs, [b.height for _, b in mine], width, label=platform,
                           color=palette.platform_color(platform))
            for x, (g, b) in zip(xs, mine, strict=True):
                if b.has_interval:
                    err = ax.errorbar([x], [b.height], yerr=[[b.height - b.low], [b.high - b.height]], fmt="none",
                                      ecolor="black", elinewidth=0.8, capsize=2)
                    for artist in (*err.lines[1], *err.lines[2]):
                        artist.set_gid(_gid("err", figure_id, platform, str(g)))
            for x, (g, b), rect in zip(xs, mine, rects.patches, strict=True):
                rect.set_gid(_gid("bar", figure_id, platform, str(g)))
                # Above the bar, or above its error bar's cap when it has one (below, for a negative bar).
                up = b.height >= 0
                end = (max(b.height, b.high) if up else min(b.height, b.low)) if b.has_interval else b.height
                text = ax.annotate(b.text, xy=(x, end), xytext=(0, 2 if up else -2), textcoords="offset points",
                                   rotation=90, ha="center", va="bottom" if up else "top", fontsize=7.5)
                text.set_gid(_gid("value", figure_id, platform, str(g)))
        ax.set_ylim(*y_limits(bars, reference))
        ax.axhline(reference, color="black", linewidth=0.8)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([textwrap.fill(g, 24) for g in groups], fontsize=7.5)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title(textwrap.fill(title, 55), fontsize=9)
        legend = fig.legend(loc="lower center", ncol=max(1, len(drawn)), fontsize=7, frameon=False)
        for platform, handle in zip(drawn, legend.get_patches(), strict=True):
            handle.set_gid(_gid("legend", figure_id, platform))
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
        plt.close(fig)
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]  # inline: no XML prolog or DOCTYPE inside HTML


# -- the section -----------------------------------------------------------------------------------


STYLE = """.scenario-grid{display:grid;grid-template-columns:1fr;gap:1em}
.scenario-grid>div{border:1px solid #ddd;padding:.5em;min-width:0}.scenario-grid svg{max-width:100%;height:auto}
.figrow{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}.figrow>div{max-width:100%}
.scenario-grid h3{margin:.2em 0}.notrun{color:#a00;font-weight:bold}.figure10 svg{max-width:100%;height:auto}
.swatch{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;vertical-align:middle}
.scenario-grid figure,.figure10{margin:0;max-width:100%;overflow-x:auto}"""


def legend_html(platforms: Sequence[str]) -> str:
    """Colour swatches of ``platforms`` (those that ran: a legend never lists a platform with
    nothing drawn), each in its :func:`~dlbench.reports.rendering.palette.platform_color`."""
    return "<p class='note legend'>" + "".join(
        f"<span class='swatch' data-platform='{html.escape(p)}' style='background:{palette.platform_color(p)}'>"
        f"</span>{html.escape(p)}" for p in _platforms(platforms)) + "</p>"


def _status_text(scenario: str, status: str, bad: pd.DataFrame) -> str:
    if status == "not run":
        return (f"<p class='notrun'>Not run: the request's <code>scenarios</code> asked for {html.escape(scenario)}, "
                f"but this run has no {html.escape(scenario)} cells (no result, no failure).</p>")
    count = int(((bad["suite"] == SUITE) & (bad["scenario"] == scenario)).sum()) if not bad.empty else 0
    return (f"<p class='notrun'>No successful {html.escape(scenario)} cell: {count} failed or skipped "
            "(reasons: <a href='#problems'>failures and skips</a>, at the end).</p>")


def _figure_cell(stats: pd.DataFrame, scenario: str, metric: str, label: str, table: Any,
                 kinds: Mapping[str, str] | None = None) -> str:
    bars = normalized_bars(stats, scenario, metric, kinds)
    rows = scenario_rows(stats, scenario, metric)
    parts = []
    if bars:
        better = "higher" if metrics.higher_is_better(metric, str(rows["unit"].iloc[0])) else "lower"
        parts.append(svg_figure(bars, figure_id=f"{scenario}-{metric}", reference=1.0,
                                title=f"{TITLES[scenario]}: {label}, normalized to bare metal ({better} is better)",
                                ylabel=f"{label} (normalized to BM)"))
    elif not rows.empty:
        parts.append(f"<p class='note bad'>No bare-metal {html.escape(label)} in this scenario: nothing to normalize "
                     "to (values in the table).</p>")
    else:
        parts.append(f"<p class='note'>No {html.escape(label)} samples.</p>")
    missing = unnormalized(stats, scenario, metric)
    if missing and bars:
        parts.append("<p class='note bad'>Without a bare-metal result (not drawn): "
                     f"{html.escape('; '.join(missing))}.</p>")
    if not rows.empty:
        parts.append(f"<details><summary>values ({len(rows)} rows)</summary>{table(rows)}</details>")
    return "".join(parts)


def _network_html(frame: pd.DataFrame) -> str:
    """The network between the distributed job's worker and parameter-server instances, measured
    with each cell: why a platform lost cluster throughput is right next to the loss."""
    if frame.empty:
        return ""
    cells = frame[frame["scenario"] == compare.DISTRIBUTED].drop_duplicates("job_id")
    failed = [f"{r.platform} {r.cell} repetition {r.repetition}: {(r.execution_labels or {})['network_error']}"
              for r in cells.itertuples() if (r.execution_labels or {}).get("network_error")]
    note = ("<p class='note bad'>The network measurement failed in these cells (their training result stands):</p>"
            "<ul class='note bad'>" + "".join(f"<li>{html.escape(f)}</li>" for f in failed) + "</ul>") if failed else ""
    rows = frame[(frame["scenario"] == compare.DISTRIBUTED)
                 & frame["metric"].isin(["network_tcp_throughput", "network_tcp_latency"])]
    if rows.empty:
        return note
    stats = rows.groupby(["platform", "metric", "unit"], sort=False)["value"].agg(["mean", "std", "count"])
    items = []
    for platform in _platforms(list(rows["platform"])):
        found = [value_text(s["mean"], s["std"], unit, int(s["count"])) for (p, _, unit), s in stats.iterrows()
                 if p == platform]
        items.append(f"<li>{html.escape(platform)}: {html.escape(', '.join(found))}</li>")
    return ("<p class='note'>Network between the worker and parameter-server instances (measured with each cell, "
            f"mean ± std over cells):</p><ul class='note'>{''.join(items)}</ul>{note}")


def _coverage_html(uncovered: Sequence[Mapping[str, Any]]) -> str:
    if not uncovered:
        return ""
    items = "".join(
        f"<li>{html.escape(u['platform'])} {html.escape(u['cell'])} repetition {u['repetition']}"
        + (f" (background covered {u['coverage'] * 100:.0f}% of the foreground's measured window)"
           if u["coverage"] is not None else "") + "</li>" for u in uncovered)
    return ("<p class='note bad'><b>The background did not cover the foreground</b> in these shared cells: the "
            "foreground ran partly alone, so their degradation understates the interference.</p>"
            f"<ul class='note bad'>{items}</ul>")


def html_section(stats: pd.DataFrame, frame: pd.DataFrame, bad: pd.DataFrame, table: Any,
                 requested: Sequence[str] | None = None) -> str:
    """The Scenarios section: at a glance, then per scenario (columns) throughput and elapsed time
    normalized to bare metal (rows), then the shared scenario's degradation (figure 10).
    ``table`` renders comparison rows as an HTML table (the report's own); ``requested``: the
    request's scenarios (a scenario neither requested nor run is left out, not called "not run")."""
    status = scenario_status(stats, bad, requested)
    training = stats[stats["suite"] == SUITE] if not stats.empty else stats
    parts = ["<h2 id='scenarios'>Scenarios</h2>",
             "<p class='note'>The core study's three scenarios side by side (004, section 4). Bars: a platform's "
             "mean normalized to bare metal's mean in the same scenario and cell (bare metal = 1.0; a scenario is "
             "never compared with another); above each bar the measured mean, its unit and n (repetitions). "
             "Error bars: the comparison's 95% interval of ×BM, the same as in the tables; none where there is "
             "no interval (bare metal, the reference; too few repetitions).</p>",
             legend_html(list(training["platform"]) if not training.empty else []), "<div class='scenario-grid'>"]
    for scenario in compare.SCENARIOS:
        if status[scenario] == NOT_REQUESTED:
            continue
        parts.append(f"<div id='scenario-{scenario}'><h3>{html.escape(TITLES[scenario])}</h3>"
                     f"<p class='note'>{html.escape(EXPLAINED[scenario])}</p>")
        if status[scenario] != "ran":
            parts.append(_status_text(scenario, status[scenario], bad) + "</div>")
            continue
        kinds = shared_kinds(frame) if scenario == compare.SHARED else None
        parts.append("<div class='figrow'>" + "".join(
            f"<div>{_figure_cell(stats, scenario, metric, label, table, kinds)}</div>"
            for metric, label in FIGURE_METRICS) + "</div>")
        if scenario == compare.DISTRIBUTED:
            parts.append(_network_html(frame))
        if scenario == compare.SHARED:
            parts.append(_coverage_html(uncovered_cells(frame)))
        parts.append("</div>")
    parts.append("</div>")
    if status[compare.SHARED] == NOT_REQUESTED:
        return "\n".join(parts)
    parts.append("<h3 id='scenario-shared-degradation'>Shared resource: degradation per platform</h3>")
    if status[compare.SHARED] != "ran":
        parts.append(_status_text(compare.SHARED, status[compare.SHARED], bad))
        return "\n".join(parts)
    kinds = shared_kinds(frame)
    parts.append("<p class='note'>As figure 10 of the study: how much worse each cell's job did than the same job "
                 "alone on the same platform (positive = degraded; lower is better). Groups: the job with a "
                 "background job, the small-batch control with the same background, N tenants at once. Above each "
                 "bar the cell documents' mean and n; no error bar: a degradation is not compared with bare metal, "
                 "so no interval is stated for it (its values are in the table under the figure).</p>"
                 + _background_html(frame) + _coverage_html(uncovered_cells(frame)))
    for metric, label in DEGRADATION_METRICS:
        bars = degradation_bars(stats, kinds, metric)
        if not bars:
            parts.append(f"<p class='note'>No {html.escape(label)} samples.</p>")
            continue
        parts.append("<div class='figure10'>" + svg_figure(
            bars, figure_id=f"shared-{metric}", reference=0.0, ylabel=f"{label} (%)",
            title=f"Shared resource: {label} % vs the job alone (lower is better)") + "</div>")
        rows = scenario_rows(stats, compare.SHARED, metric)
        parts.append(f"<details><summary>values ({len(rows)} rows)</summary>{table(rows)}</details>")
    return "\n".join(parts)


def _background_html(frame: pd.DataFrame) -> str:
    """Which background job the cells ran against (from the cells' background_throughput labels)."""
    rows = frame[(frame["scenario"] == compare.SHARED) & (frame["metric"] == "background_throughput")] \
        if not frame.empty else frame
    jobs = sorted({f"{lab.get('model', '?')} batch {lab.get('batch_size', '?')}" for lab in rows["labels"]}) \
        if not rows.empty else []
    return f"<p class='note'>Background job: {html.escape(', '.join(jobs))}.</p>" if jobs else ""


def text_lines(stats: pd.DataFrame, frame: pd.DataFrame, bad: pd.DataFrame,
               requested: Sequence[str] | None = None) -> list[str]:
    """The text table's scenario summary: which scenarios ran (and which the request asked for
    that did not), and the cells whose background did not cover the foreground."""
    if not has_training(stats, bad):
        return []
    status = scenario_status(stats, bad, requested)
    counts = {s: stats[(stats["suite"] == SUITE) & (stats["scenario"] == s)]["cell"].nunique()
              for s in compare.SCENARIOS} if not stats.empty else {}
    lines = [f"Scenarios ({SUITE}): " + "; ".join(
        f"{s}: {counts.get(s, 0)} cell{'' if counts.get(s, 0) == 1 else 's'}" if status[s] == "ran"
        else f"{s}: {status[s]}" for s in compare.SCENARIOS if status[s] != NOT_REQUESTED)]
    for u in uncovered_cells(frame):
        coverage = f" ({u['coverage'] * 100:.0f}% covered)" if u["coverage"] is not None else ""
        lines.append(f"WARNING: shared {u['platform']} {u['cell']} r{u['repetition']}: the background did not cover "
                     f"the foreground{coverage}; its degradation understates the interference")
    return lines


class StudyFiguresSection:
    """The core study's three scenarios side by side, then the shared scenario's degradation."""

    id = "scenarios"
    title: str | None = "Study figures"
    style = STYLE

    def html(self, run: RunView) -> str:
        if not has_training(run.stats, run.bad):
            return ""
        return html_section(run.stats, run.frame, run.bad, table_html, run.profile.requested_list("scenarios"))

    def text(self, run: RunView) -> list[str]:
        return text_lines(run.stats, run.frame, run.bad, run.profile.requested_list("scenarios"))


class TrainingNumbersSection:
    """Every training headline number, one click away (the answer and the figures show them)."""

    id = "training-numbers"
    title: str | None = None
    style = ""

    def html(self, run: RunView) -> str:
        if SUITE not in run.suites:
            return ""
        return suite_html(run, SUITE, charted=list(dict.fromkeys(run.head["metric"])), collapsed=True)

    def text(self, run: RunView) -> list[str]:
        return []
