"""Every statistic the report states, in one place (method and thresholds: docs/statistics.md).

Per case and platform, over the repetitions (one value per execution):

- ``mean``, sample ``std`` (n - 1), ``cv = std / mean``; with n >= :data:`ROBUST_MIN_N` also the
  MLPerf-style ``robust_mean``: the mean after dropping the minimum and the maximum.
- Against bare metal (H = bare metal's values, D = the platform's): the **ratio of the means**
  ``D̄/H̄`` (×BM, "normalized": a ratio of arithmetic means) with a **delta-method interval on the
  log scale**, its degrees of freedom by Welch-Satterthwaite:
  ``se² = s_D²/(n_D D̄²) + s_H²/(n_H H̄²)`` (the variances of log D̄ and log H̄), degrees of freedom
  by Welch-Satterthwaite ``df = se⁴ / ((s_D²/(n_D D̄²))²/(n_D-1) + (s_H²/(n_H H̄²))²/(n_H-1))``,
  interval ``exp(log(D̄/H̄) ± t(1 - α/2, df) × se)``. That one interval is stated on every scale:
  ×BM is it, ``Diff% = (1 - D̄/H̄) × 100 ∈ (1 - [hi, lo]) × 100``, and in the metric's unit
  ``D̄ - H̄ ∈ H̄ × ([lo, hi] - 1)``.
  Why the log ratio and not Fieller's interval: both are built for a ratio of means, cover the
  true ratio equally often at the spreads benchmarks have (simulated, n = 3 and 5, CV 1-20 %:
  95-97 % both) and at CV <= 2 % their ends agree within 0.2 % of the ratio (the tests check
  one such case against Fieller's closed form); but Fieller's interval is unbounded, or the
  whole line, whenever H̄ is not significantly different from 0: a third of the n = 3 draws at
  CV 50 %, which is what a loaded machine produces. The log-ratio interval is always a positive, finite
  range, is symmetric in relative terms (the interval of H̄/D̄ is the reciprocal of that of D̄/H̄,
  so the choice of baseline does not move it) and fits what benchmark metrics are: positive
  rates and times whose spread grows with their size. It needs both means positive (all
  compared metrics are; a zero mean, e.g. a counter that stayed at 0, is not compared). It does
  not assume equal variances (a container and bare metal rarely have them).
- **Verdict** at :data:`DEFAULT_CONFIDENCE` (95 %) against a practical **equivalence margin**
  (the run's ``equivalence_margin_pct``, default :data:`EQUIVALENCE_MARGIN` ±3 %: the ratio
  within [1/1.03, 1.03]): ``equivalent`` when the ratio interval lies inside the margin (two
  one-sided tests at 2.5 % each: "the same within 3 %"); ``better`` or ``worse`` when it lies
  wholly beyond the margin on one side (by the metric's direction: images/s, more is better;
  seconds, less); ``different_within_margin`` when it excludes 1 but reaches into the margin (a
  difference, not shown to matter); ``inconclusive`` when it holds 1 and reaches past a margin
  bound. The last two carry the repetitions that would resolve them
  (:func:`repetitions_to_decide`). "No significant difference" is not a verdict: an interval of
  ±11 % that holds 1 says nothing about sameness. Over a report's many comparisons the verdicts
  are corrected for multiplicity by Holm's step-down method (:func:`holm`, applied by
  ``compare.statistics`` to every compared row: with identical platforms, a false claim in at
  most 5 % of reports, where 90 uncorrected verdicts gave 3-4 per report); each row keeps its own
  (unadjusted) interval and its p-values. Fewer than :data:`MIN_REPETITIONS` repetitions on
  either side: ``too_few_repetitions``, no verdict and no interval at all (with n = 2 the
  interval rests on one degree of freedom per side, t = 12.7, and on a standard deviation
  estimated from two points: stating it invites reading it).
- Noise flags: ``cv > CV_THRESHOLD``; a step-time distribution with points beyond Tukey's outer
  fences (``Q1 - 3 IQR``, ``Q3 + 3 IQR``: "far out"); a job that ran on a loaded machine
  (:func:`dlbench.reports.analysis.machine_load.load_flag`: other processes' CPU or hypervisor steal while it ran,
  beyond what the run's own controller was measured to add).

Distributions come from SciPy (``scipy.stats.t``), a maintained library; the tests check it
against printed tables, closed forms and a numerical integration of the density, and the ratio
interval against a hand-worked example, Fieller's closed form and a Monte-Carlo coverage run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

DEFAULT_CONFIDENCE = 0.95
MIN_REPETITIONS = 3
"""A verdict needs at least this many repetitions on each side."""
ROBUST_MIN_N = 5
"""MLPerf-style robust mean (drop the minimum and the maximum) from this many repetitions."""
EQUIVALENCE_MARGIN = 0.03
"""±3 %: two platforms whose ratio interval lies within [1/1.03, 1.03] are ``equivalent``. The
studies' platform differences that matter to a planner are a few per cent (containers 0-2 %,
VMs 2-10 %, docs/statistics.md); a margin is symmetric on the log scale, so swapping the
baseline does not change a verdict."""
CV_THRESHOLD = 0.05
"""A coefficient of variation above 5 % is flagged noisy: the platform differences the studies
report are a few per cent, a spread larger than that buries them."""
TUKEY_K = 3.0
"""Step times beyond Q1 - 3 IQR or Q3 + 3 IQR (Tukey's "far out") are outliers."""
MIN_STEPS_FOR_OUTLIERS = 4
DRIFT_THRESHOLD = 0.05
"""A measured window whose step time changes by more than 5 % from its first to its last step (the
least-squares line) is not steady: still warming up (falling) or slowing down (rising)."""
DRIFT_P = 0.01
"""...and only when that slope is significant at 1 % (a noisy flat window is not flagged)."""
MIN_STEPS_FOR_DRIFT = 8


class Verdict(StrEnum):
    BETTER = "better"
    WORSE = "worse"
    """BETTER / WORSE: the whole ratio interval lies beyond the equivalence margin, on one side."""
    EQUIVALENT = "equivalent"
    """The ratio interval lies inside the equivalence margin (:data:`EQUIVALENCE_MARGIN`)."""
    DIFFERENT_WITHIN_MARGIN = "different_within_margin"
    """The interval excludes 1 but reaches into the margin: a difference is shown, not that it
    matters (it may be smaller than the margin)."""
    INCONCLUSIVE = "inconclusive"
    """The interval holds 1 and reaches past a margin bound: neither a difference nor sameness shown."""
    TOO_FEW_REPETITIONS = "too_few_repetitions"
    BASELINE = "baseline"
    NOT_COMPARED = "not_compared"
    """No bare-metal result, or a metric that is already relative to a baseline (degradation %)."""


VERDICT_TEXT = {
    Verdict.BETTER: "better", Verdict.WORSE: "worse", Verdict.EQUIVALENT: "equivalent",
    Verdict.DIFFERENT_WITHIN_MARGIN: "different, within margin", Verdict.INCONCLUSIVE: "inconclusive",
    Verdict.TOO_FEW_REPETITIONS: "too few repetitions", Verdict.BASELINE: "baseline", Verdict.NOT_COMPARED: "-",
}


# -- descriptive -----------------------------------------------------------------------------------


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def std(values: Sequence[float]) -> float:
    """Sample standard deviation (n - 1); NaN below two values (one repetition has no spread)."""
    n = len(values)
    if n < 2:
        return math.nan
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1))


def cv(values: Sequence[float]) -> float:
    m = mean(values)
    return std(values) / m if values and m != 0 else math.nan


def robust_mean(values: Sequence[float]) -> float:
    """MLPerf's summary: the mean after dropping the minimum and the maximum; NaN below 5 values."""
    if len(values) < ROBUST_MIN_N:
        return math.nan
    return mean(sorted(values)[1:-1])


def diff_pct(value: float, baseline: float) -> float:
    """Study 001's Diff% = (H - D) / H x 100 (H = bare metal's mean, D = the platform's); NaN if H is 0."""
    return (baseline - value) / baseline * 100.0 if baseline else math.nan


def normalized(value: float, baseline: float) -> float:
    """D / H, the core study's figures (bare metal = 1.0); NaN if H is 0."""
    return value / baseline if baseline else math.nan


def is_noisy(coefficient: float, threshold: float = CV_THRESHOLD) -> bool:
    return coefficient == coefficient and abs(coefficient) > threshold


# -- Student t (SciPy) -----------------------------------------------------------------------------


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` (any positive real, or infinity) degrees of freedom."""
    from scipy import stats as distributions  # heavy (0.4 s on top of pandas): only where an interval is computed

    return float(distributions.t.ppf(p, df))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (one-sided tests: regressions)."""
    from scipy import stats as distributions  # heavy (0.4 s on top of pandas): only where a test is computed

    return float(distributions.t.cdf(t, df))


# -- platform vs bare metal ------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """A platform's values D against bare metal's H: the ratio of the means D̄/H̄, its delta-method
    interval on the log scale (df by Welch-Satterthwaite), the two p-values the verdict reads and
    the verdict. The interval and p-values are NaN where they are not stated: fewer than
    :data:`MIN_REPETITIONS` repetitions on a side, or a mean that is not positive."""

    n: int
    baseline_n: int
    ratio: float
    """D̄/H̄ (×BM, "normalized")."""
    ratio_low: float
    ratio_high: float
    """Interval of D̄/H̄ at ``confidence``: ``exp(log(D̄/H̄) ± t × se)``, always positive."""
    df: float
    """Welch-Satterthwaite degrees of freedom of the log ratio."""
    confidence: float
    verdict: Verdict
    margin: float = EQUIVALENCE_MARGIN
    p_difference: float = math.nan
    """Two-sided p of "the ratio is 1" (Welch's t on the log scale): below 1 - confidence, a difference."""
    p_equivalence: float = math.nan
    """The larger p of the two one-sided tests "the ratio is at or beyond a margin end": below
    (1 - confidence) / 2, the interval lies inside the margin (equivalent)."""
    p_beyond: float = math.nan
    """One-sided p of "the ratio is within the margin end on its side": below (1 - confidence) / 2,
    the whole interval lies beyond the margin (better or worse)."""
    repetitions_to_decide: int = 0
    """For a verdict that is not resolved (inconclusive, different within margin): about how many
    repetitions per side would resolve it to equivalent, better or worse (0 when resolved)."""

    def scaled(self, baseline_mean: float) -> dict[str, float]:
        """The one ratio interval on every scale the report states: ×BM (``normalized_ci_*``) is
        the interval itself, Diff% = (1 - ratio) × 100, and ``ci_low``/``ci_high`` are D̄ - H̄ in
        the metric's unit, H̄ × (ratio - 1) (``baseline_mean`` = H̄: a ratio carries no unit)."""
        lo, hi = self.ratio_low, self.ratio_high
        return {"normalized_ci_low": lo, "normalized_ci_high": hi,
                "diff_pct_ci_low": (1.0 - hi) * 100.0, "diff_pct_ci_high": (1.0 - lo) * 100.0,
                "ci_low": baseline_mean * (lo - 1.0), "ci_high": baseline_mean * (hi - 1.0)}


def ratio_interval(values: Sequence[float], baseline: Sequence[float], confidence: float = DEFAULT_CONFIDENCE
                   ) -> tuple[float, float, float, float]:
    """(D̄/H̄, interval low, interval high, Welch-Satterthwaite df) for the platform's ``values``
    (D) over bare metal's ``baseline`` (H): a delta-method interval on log(D̄/H̄) with Student's t at
    the Welch-Satterthwaite df, exponentiated. The interval is NaN below two values on a side (no
    spread) and when a mean is not positive (no logarithm)."""
    ratio, se, df = _log_ratio_se(values, baseline)
    if math.isnan(se):
        return ratio, math.nan, math.nan, math.nan
    if se == 0:  # both sides repeat exactly: the ratio is what it is
        return ratio, ratio, ratio, math.inf
    half = t_quantile(1.0 - (1.0 - confidence) / 2.0, df) * se
    return ratio, ratio * math.exp(-half), ratio * math.exp(half), df


def _log_ratio_se(values: Sequence[float], baseline: Sequence[float]) -> tuple[float, float, float]:
    """(D̄/H̄, the standard error of log(D̄/H̄) by the delta method, Welch-Satterthwaite df); se and df
    NaN below two values on a side or with a mean that is not positive."""
    n_d, n_h = len(values), len(baseline)
    m_d, m_h = mean(values), mean(baseline)
    ratio = normalized(m_d, m_h)
    if n_d < 2 or n_h < 2 or not (m_d > 0 and m_h > 0):
        return ratio, math.nan, math.nan
    v_d, v_h = std(values) ** 2 / (n_d * m_d * m_d), std(baseline) ** 2 / (n_h * m_h * m_h)
    se2 = v_d + v_h
    if se2 == 0:
        return ratio, 0.0, math.inf
    return ratio, math.sqrt(se2), se2 ** 2 / (v_d ** 2 / (n_d - 1) + v_h ** 2 / (n_h - 1))


def p_values(ratio: float, se: float, df: float, margin: float = EQUIVALENCE_MARGIN) -> tuple[float, float, float]:
    """(p of a difference, p of equivalence, p of beyond the margin) for a ratio whose logarithm
    has standard error ``se`` (Welch's t with ``df`` on the log scale). Difference: two-sided, log
    ratio = 0. Equivalence: Schuirmann's two one-sided tests of log ratio <= -log(1 + margin) and
    >= log(1 + margin), their larger p. Beyond: one-sided, that the log ratio is not past the
    margin on its own side. Each is an exact counterpart of the interval at confidence c: it
    excludes 1 iff p_difference < 1 - c, lies inside the margin iff p_equivalence < (1 - c) / 2,
    lies wholly beyond it iff p_beyond < (1 - c) / 2."""
    log_r, bound = math.log(ratio), math.log1p(margin)
    if se == 0:
        return (0.0 if log_r != 0 else 1.0), (0.0 if abs(log_r) < bound else 1.0), (0.0 if abs(log_r) > bound else 1.0)
    p_difference = 2.0 * (1.0 - t_cdf(abs(log_r) / se, df))
    p_low = 1.0 - t_cdf((log_r + bound) / se, df)  # H0: ratio at or below 1 / (1 + margin)
    p_high = t_cdf((log_r - bound) / se, df)  # H0: ratio at or above 1 + margin
    p_beyond = 1.0 - t_cdf((abs(log_r) - bound) / se, df)  # H0: |log ratio| <= log(1 + margin)
    return min(1.0, p_difference), max(p_low, p_high), p_beyond


def decide(ratio: float, p_difference: float, p_equivalence: float, p_beyond: float, higher_is_better: bool,
           confidence: float = DEFAULT_CONFIDENCE) -> Verdict:
    """The verdict from the three (possibly multiplicity-adjusted) p-values: equivalent (a 0.6 %
    slowdown measured to ±0.2 % is the same within 3 %), better or worse (wholly beyond the
    margin), different within margin (1 excluded, the margin not), else inconclusive."""
    alpha = 1.0 - confidence
    if p_equivalence < alpha / 2:
        return Verdict.EQUIVALENT
    if p_beyond < alpha / 2:
        return Verdict.BETTER if (ratio > 1.0) == higher_is_better else Verdict.WORSE
    if p_difference < alpha:
        return Verdict.DIFFERENT_WITHIN_MARGIN
    return Verdict.INCONCLUSIVE


UNRESOLVED = frozenset({Verdict.INCONCLUSIVE, Verdict.DIFFERENT_WITHIN_MARGIN})
"""Verdicts a planner cannot act on yet: more repetitions would resolve them."""


REPETITIONS_CAP = 1000
"""Above this, "about N repetitions would decide" means "not with repetitions": the ratio sits on
the margin's end."""


def repetitions_to_decide(ratio: float, low: float, high: float, n: int, margin: float = EQUIVALENCE_MARGIN) -> int:
    """About how many repetitions per side would resolve an unresolved comparison, if the ratio
    and the spread stayed what they are: the interval's half-width (log scale) shrinks as
    1/sqrt(n); it must fit between the ratio and the margin's end on its side (inside: equivalent;
    beyond: better or worse). Rounded up, at least n + 1, at most :data:`REPETITIONS_CAP`."""
    half = (math.log(high) - math.log(low)) / 2.0
    room = abs(math.log1p(margin) - abs(math.log(ratio)))
    if room <= 0 or half <= 0:
        return REPETITIONS_CAP
    return max(n + 1, min(REPETITIONS_CAP, math.ceil(n * (half / room) ** 2)))


def holm(p: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979): sorted ascending, the i-th (from 0) of m is
    multiplied by m - i, then made monotone; NaN stays NaN and does not count in m. Rejecting
    where the adjusted p < alpha keeps the chance of any false claim in the family <= alpha, under
    any dependence between the tests (a cell's throughput and elapsed time are nearly one)."""
    order = sorted((v, i) for i, v in enumerate(p) if v == v)
    m = len(order)
    out = [math.nan] * len(p)
    running = 0.0
    for rank, (value, index) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * value))
        out[index] = running
    return out


def compare(values: Sequence[float], baseline: Sequence[float], higher_is_better: bool,
            confidence: float = DEFAULT_CONFIDENCE, min_repetitions: int = MIN_REPETITIONS,
            margin: float = EQUIVALENCE_MARGIN) -> Comparison:
    """The platform's ``values`` against bare metal's ``baseline``: the ratio interval, the two
    p-values and the verdict they give on their own (``compare.statistics`` re-decides it after
    Holm's correction over the report). Too few repetitions: no interval at all, so no reader
    takes one for a result."""
    n, baseline_n = len(values), len(baseline)
    if n < min_repetitions or baseline_n < min_repetitions:
        return Comparison(n=n, baseline_n=baseline_n, ratio=normalized(mean(values), mean(baseline)),
                          ratio_low=math.nan, ratio_high=math.nan, df=math.nan, confidence=confidence,
                          verdict=Verdict.TOO_FEW_REPETITIONS, margin=margin)
    ratio, low, high, df = ratio_interval(values, baseline, confidence)
    if math.isnan(low):  # a mean of 0 or below: a ratio on the log scale does not exist
        return Comparison(n=n, baseline_n=baseline_n, ratio=ratio, ratio_low=low, ratio_high=high, df=df,
                          confidence=confidence, verdict=Verdict.NOT_COMPARED, margin=margin)
    _, se, _ = _log_ratio_se(values, baseline)
    p_difference, p_equivalence, p_beyond = p_values(ratio, se, df, margin)
    verdict = decide(ratio, p_difference, p_equivalence, p_beyond, higher_is_better, confidence)
    return Comparison(n=n, baseline_n=baseline_n, ratio=ratio, ratio_low=low, ratio_high=high, df=df,
                      confidence=confidence, verdict=verdict, margin=margin, p_difference=p_difference,
                      p_equivalence=p_equivalence, p_beyond=p_beyond,
                      repetitions_to_decide=repetitions_to_decide(ratio, low, high, max(n, baseline_n), margin)
                      if verdict in UNRESOLVED else 0)


# -- noise: step-time outliers, a loaded machine ---------------------------------------------------


def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default, Hyndman-Fan type 7)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class StepCheck:
    """What a job's measured step times (warm-up excluded, in step order) say about themselves."""

    outliers: int = 0
    """Steps beyond Tukey's outer fences (:func:`tukey_outliers`)."""
    drift: float = 0.0
    """Relative change of the step time across the window when it is not steady (:func:`drift`), else 0."""


def drift(values: Sequence[float]) -> tuple[float, float]:
    """(relative change, p) of a window of step times in step order: the least-squares line's
    change from the first to the last step over the mean step time, and the two-sided p of its
    slope (SciPy's ``linregress``). NaN below :data:`MIN_STEPS_FOR_DRIFT` steps."""
    from scipy import stats as distributions  # heavy (0.4 s on top of pandas): only where steps are checked

    if len(values) < MIN_STEPS_FOR_DRIFT or mean(values) <= 0:
        return math.nan, math.nan
    fit = distributions.linregress(range(len(values)), values)
    p = float(fit.pvalue) if fit.pvalue == fit.pvalue else (0.0 if fit.slope else 1.0)  # a perfect line: NaN p
    return float(fit.slope) * (len(values) - 1) / mean(values), p


def unsteady(values: Sequence[float]) -> float:
    """The drift of a window that is not steady (more than :data:`DRIFT_THRESHOLD`, significant at
    :data:`DRIFT_P`), else 0: a warm-up of a fixed step count may end before the job is steady
    (a cold cache, a JIT, a clock ramping up), and its first "measured" steps then bias the mean."""
    change, p = drift(values)
    return change if change == change and abs(change) > DRIFT_THRESHOLD and p < DRIFT_P else 0.0


def check_steps(values: Sequence[float]) -> StepCheck:
    return StepCheck(outliers=len(tukey_outliers(values)), drift=unsteady(values))


def tukey_outliers(values: Sequence[float], k: float = TUKEY_K) -> list[float]:
    """Values beyond Tukey's fences ``Q1 - k IQR``, ``Q3 + k IQR`` (k = 3: "far out")."""
    if len(values) < MIN_STEPS_FOR_OUTLIERS:
        return []
    q1, q3 = quantile(values, 0.25), quantile(values, 0.75)
    iqr = q3 - q1
    return [v for v in values if v < q1 - k * iqr or v > q3 + k * iqr]

