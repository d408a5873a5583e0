"""The report as fixed-width text: the headline comparison printed at the end of a run."""

from __future__ import annotations

from sqlalchemy import Engine

from dlbench.reports import compare, metrics, scenarios
from dlbench.reports import stats as st
from dlbench.reports.formatting import ci_text, fmt, scenario_note
from dlbench.reports.run_data import EMULATED_WARNING, emulated_platforms, resolve_run, run_statistics


def _metric_label(metric: str, unit: str, higher_is_better: bool, width: int = 22) -> str:
    """``metric unit ↑`` cut to ``width`` with the arrow always visible."""
    return f"{(metric + ' ' + unit)[:width - 2]} {'↑' if higher_is_better else '↓'}"


VERDICT_SHORT = {st.Verdict.BETTER: "better", st.Verdict.WORSE: "worse",
                 st.Verdict.NO_SIGNIFICANT_DIFFERENCE: "not-sig", st.Verdict.TOO_FEW_REPETITIONS: "too-few",
                 st.Verdict.BASELINE: "baseline", st.Verdict.NOT_COMPARED: "-"}


def text_table(engine: Engine, run_id: str | None = None) -> str:
    """Headline comparison as fixed-width text (printed at the end of a run)."""
    run_id = resolve_run(engine, run_id)
    if run_id is None:
        return "no run in the warehouse yet"
    frame, all_stats = run_statistics(engine, run_id)
    stats = compare.headline(all_stats)
    confidence = f"{st.DEFAULT_CONFIDENCE * 100:.0f}%"
    lines = [f"Run {run_id}: mean ± std over repetitions. Diff% = (BM - X) / BM x 100 (study 001), norm = X / BM "
             "(BM = bare metal).", "For ↓ metrics (times) a negative Diff% / norm > 1 means X is slower.",
             f"CI: {confidence} Welch interval of norm; verdict vs BM at {confidence}: better / worse / not-sig (no "
             f"significant difference) / too-few (< {st.MIN_REPETITIONS} repetitions). !: flagged noisy (CV > "
             f"{st.CV_THRESHOLD * 100:.0f}%, step-time outliers or a loaded machine)."]
    lines += [f"WARNING: {platform} {EMULATED_WARNING.format(accel=accel)}."
              for platform, accel in sorted(emulated_platforms(engine, run_id).items())]
    # Case names say their scenario and cell (up to ~70 characters): never cut what tells them apart.
    width = min(80, max([42, *(len(c) for c in stats["case"])])) if not stats.empty else 42
    header = f"{'suite':8} {'case':{width}} {'metric':22} {'platform':24} {'n':>3} {'mean':>11} {'std':>9} " \
             f"{'cv%':>6} {'Diff%':>7} {'norm':>6} {'CI':>16} {'verdict':8}"
    if not stats.empty and stats["metric"].isin(metrics.RELATIVE).any():
        lines.append("degradation_* rows (shared scenario) are % worse than the same job alone: compared as they "
                     "are, no Diff% / norm.")
    lines += [header, "-" * len(header)]
    for row in stats.itertuples():
        cv = row.cv * 100 if row.cv == row.cv and row.cv is not None else float("nan")
        flag = " !" if row.flags else ""
        lines.append(
            f"{row.suite[:8]:8} {row.case[:width]:{width}} "
            f"{_metric_label(row.metric, row.unit, row.higher_is_better):22} "
            f"{row.platform[:24]:24} "
            f"{row.n:>3} {fmt(row.mean):>11} {fmt(row.std, 3):>9} {fmt(cv, 3):>6} "
            f"{fmt(row.diff_pct, 3):>7} {fmt(row.normalized, 3):>6} "
            f"{ci_text(row.normalized_ci_low, row.normalized_ci_high):>16} "
            f"{VERDICT_SHORT[st.Verdict(row.verdict)]}{flag}"
        )
    bad = compare.problems(engine, run_id)
    for row in bad.itertuples():
        lines.append(f"{row.status.upper()}: {row.platform} {row.suite}/{row.name}{scenario_note(row.scenario)} "
                     f"r{row.repetition}: {row.error}")
    if stats.empty and bad.empty:
        lines.append("(no samples)")
    flagged = stats[stats["flags"] != ""] if not stats.empty else stats
    if not flagged.empty:
        reasons = [(int(flagged["noisy"].sum()), f"CV > {st.CV_THRESHOLD * 100:.0f}%"),
                   (int((flagged["outlier_runs"] > 0).sum()), "step-time outliers"),
                   (int((flagged["loaded_runs"] > 0).sum()), "run on a loaded machine")]
        lines.append(f"NOISY (!): {len(flagged)} of {len(stats)} rows: "
                     + ", ".join(f"{n} {why}" for n, why in reasons if n)
                     + "; details in the report and comparison.csv (flags)")
    lines += scenarios.text_lines(stats, frame, bad)
    return "\n".join(lines)
