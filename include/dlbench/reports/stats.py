"""Every statistic the report states, in one place (method and thresholds: docs/statistics.md).

Per case and platform, over the repetitions (one value per execution):

- ``mean``, sample ``std`` (n - 1), ``cv = std / mean``; with n >= :data:`ROBUST_MIN_N` also the
  MLPerf-style ``robust_mean``: the mean after dropping the minimum and the maximum.
- Against bare metal (H = bare metal's values, D = the platform's): **Welch's t interval** for the
  difference of the means ``D̄ - H̄``, ``se = sqrt(s_D²/n_D + s_H²/n_H)``, degrees of freedom by
  Welch-Satterthwaite ``df = se⁴ / ((s_D²/n_D)²/(n_D-1) + (s_H²/n_H)²/(n_H-1))``, half-width
  ``t(1 - α/2, df) × se``. It does not assume equal variances (a container and bare metal rarely
  have them). The interval is reported on the report's two scales, relative to bare metal's mean
  (the scale Diff% and normalized already use): ``normalized = D̄/H̄ ∈ 1 + [lo, hi]/H̄`` and
  ``Diff% = (H̄ - D̄)/H̄ × 100 ∈ -[hi, lo]/H̄ × 100``. Dividing by H̄ treats bare metal's mean as the
  fixed reference, as Diff% does; the verdict does not depend on it.
- **Verdict** at :data:`DEFAULT_CONFIDENCE` (95 %): ``no_significant_difference`` when the
  interval contains 0 (Welch's two-sided test does not reject equal means), otherwise ``better``
  or ``worse`` by the metric's direction (images/s: more is better; seconds: less is better).
  Fewer than :data:`MIN_REPETITIONS` repetitions on either side: ``too_few_repetitions``, no
  verdict (with n = 2 the interval rests on one degree of freedom per side, t = 12.7, and on a
  standard deviation estimated from two points).
- Noise flags: ``cv > CV_THRESHOLD``; a step-time distribution with points beyond Tukey's outer
  fences (``Q1 - 3 IQR``, ``Q3 + 3 IQR``: "far out"); a job that ran on a loaded machine
  (:func:`load_flag`: load per core before it started, CPU stolen by the hypervisor, or CPU used
  by other processes while it ran, above documented thresholds).

The t quantile is computed here (no SciPy in this project): the Student t CDF through the
regularized incomplete beta function (Lentz's continued fraction), inverted by bisection; the
tests check it against printed tables and an independent numerical integration of the density.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

DEFAULT_CONFIDENCE = 0.95
MIN_REPETITIONS = 3
"""A verdict needs at least this many repetitions on each side."""
ROBUST_MIN_N = 5
"""MLPerf-style robust mean (drop the minimum and the maximum) from this many repetitions."""
CV_THRESHOLD = 0.05
"""A coefficient of variation above 5 % is flagged noisy: the platform differences the studies
report are a few per cent, a spread larger than that buries them."""
TUKEY_K = 3.0
"""Step times beyond Q1 - 3 IQR or Q3 + 3 IQR (Tukey's "far out") are outliers."""
MIN_STEPS_FOR_OUTLIERS = 4
LOAD_PER_CORE_THRESHOLD = 1.0
"""1-minute load average / CPUs before the job: above 1, more threads wanted a CPU than there
were CPUs when the job started."""
STEAL_THRESHOLD = 0.05
"""Share of the machine's CPU time stolen by the hypervisor while the job ran."""
OTHER_CPU_THRESHOLD = 0.25
"""Share of the machine's CPU capacity used by processes other than the job while it ran."""


class Verdict(StrEnum):
    BETTER = "better"
    WORSE = "worse"
    NO_SIGNIFICANT_DIFFERENCE = "no_significant_difference"
    TOO_FEW_REPETITIONS = "too_few_repetitions"
    BASELINE = "baseline"
    NOT_COMPARED = "not_compared"
    """No bare-metal result, or a metric that is already relative to a baseline (degradation %)."""


VERDICT_TEXT = {
    Verdict.BETTER: "better", Verdict.WORSE: "worse", Verdict.NO_SIGNIFICANT_DIFFERENCE: "no significant difference",
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


# -- Student t -------------------------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = tiny if abs(d) < tiny else d
    d = 1.0 / d
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| > |t|) for Student's t with ``df`` (any positive real) degrees of freedom."""
    if math.isinf(df):
        return math.erfc(abs(t) / math.sqrt(2.0))
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (one-sided tests: regressions)."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * t_two_sided_p(t, df)
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile (0.5 < p < 1) of Student's t with ``df`` degrees of freedom."""
    if not 0.5 < p < 1.0:
        raise ValueError(f"p must be in (0.5, 1), got {p}")
    if not df > 0:
        raise ValueError(f"df must be positive, got {df}")
    tail = 2.0 * (1.0 - p)  # two-sided tail probability
    low, high = 0.0, 1.0
    while t_two_sided_p(high, df) > tail:
        high *= 2.0
        if high > 1e12:
            return math.inf
    for _ in range(200):
        mid = (low + high) / 2.0
        if t_two_sided_p(mid, df) > tail:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * max(1.0, high):
            break
    return (low + high) / 2.0


# -- platform vs bare metal ------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """A platform's values against bare metal's: the Welch interval of the difference of the means
    and what it is on the report's scales. NaN where not computable."""

    n: int
    baseline_n: int
    difference: float
    """D̄ - H̄"""
    ci_low: float
    ci_high: float
    """Welch t interval of D̄ - H̄ at ``confidence``."""
    df: float
    confidence: float
    verdict: Verdict

    def scaled(self, baseline_mean: float) -> dict[str, float]:
        """The interval on the normalized (D/H) and Diff% scales, relative to bare metal's mean."""
        if baseline_mean == 0 or math.isnan(self.ci_low):
            return {"normalized_ci_low": math.nan, "normalized_ci_high": math.nan,
                    "diff_pct_ci_low": math.nan, "diff_pct_ci_high": math.nan}
        lo, hi = sorted((self.ci_low / baseline_mean, self.ci_high / baseline_mean))
        return {"normalized_ci_low": 1.0 + lo, "normalized_ci_high": 1.0 + hi,
                "diff_pct_ci_low": -hi * 100.0, "diff_pct_ci_high": -lo * 100.0}


def welch(values: Sequence[float], baseline: Sequence[float], confidence: float = DEFAULT_CONFIDENCE
          ) -> tuple[float, float, float, float]:
    """(difference of means D̄ - H̄, interval low, interval high, Welch-Satterthwaite df)."""
    n_d, n_h = len(values), len(baseline)
    diff = mean(values) - mean(baseline)
    if n_d < 2 or n_h < 2:
        return diff, math.nan, math.nan, math.nan
    v_d, v_h = std(values) ** 2 / n_d, std(baseline) ** 2 / n_h
    se2 = v_d + v_h
    if se2 == 0:  # both sides repeat exactly: the difference is what it is
        return diff, diff, diff, math.inf
    df = se2 ** 2 / (v_d ** 2 / (n_d - 1) + v_h ** 2 / (n_h - 1))
    half = t_quantile(1.0 - (1.0 - confidence) / 2.0, df) * math.sqrt(se2)
    return diff, diff - half, diff + half, df


def compare(values: Sequence[float], baseline: Sequence[float], higher_is_better: bool,
            confidence: float = DEFAULT_CONFIDENCE, min_repetitions: int = MIN_REPETITIONS) -> Comparison:
    """The platform's ``values`` against bare metal's ``baseline``: Welch interval and verdict."""
    diff, low, high, df = welch(values, baseline, confidence)
    if len(values) < min_repetitions or len(baseline) < min_repetitions:
        verdict = Verdict.TOO_FEW_REPETITIONS
    elif low <= 0.0 <= high:
        verdict = Verdict.NO_SIGNIFICANT_DIFFERENCE
    else:
        verdict = Verdict.BETTER if (diff > 0) == higher_is_better else Verdict.WORSE
    return Comparison(n=len(values), baseline_n=len(baseline), difference=diff, ci_low=low, ci_high=high, df=df,
                      confidence=confidence, verdict=verdict)


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


def tukey_outliers(values: Sequence[float], k: float = TUKEY_K) -> list[float]:
    """Values beyond Tukey's fences ``Q1 - k IQR``, ``Q3 + k IQR`` (k = 3: "far out")."""
    if len(values) < MIN_STEPS_FOR_OUTLIERS:
        return []
    q1, q3 = quantile(values, 0.25), quantile(values, 0.75)
    iqr = q3 - q1
    return [v for v in values if v < q1 - k * iqr or v > q3 + k * iqr]


LOAD_LABELS = ("host_cpus", "host_load1_before", "host_load1_after", "host_steal_share", "host_other_cpu_share")
"""The execution labels the workload harness writes about the machine's load (strings, as all labels)."""


def _number(labels: Mapping[str, Any], key: str) -> float | None:
    try:
        value = float(labels[key])
    except (KeyError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def load_flag(labels: Mapping[str, Any] | None) -> str | None:
    """Why a job ran on a loaded machine (from its harness's load labels), or None: load per core
    before it started above :data:`LOAD_PER_CORE_THRESHOLD`, stolen CPU above
    :data:`STEAL_THRESHOLD`, other processes' CPU share above :data:`OTHER_CPU_THRESHOLD`."""
    labels = labels or {}
    reasons = []
    cpus, load = _number(labels, "host_cpus"), _number(labels, "host_load1_before")
    if cpus and load is not None and load / cpus > LOAD_PER_CORE_THRESHOLD:
        reasons.append(f"load {load:.2f} on {cpus:.0f} CPUs before it started")
    steal = _number(labels, "host_steal_share")
    if steal is not None and steal > STEAL_THRESHOLD:
        reasons.append(f"{steal * 100:.0f}% of the CPU time stolen by the hypervisor")
    other = _number(labels, "host_other_cpu_share")
    if other is not None and other > OTHER_CPU_THRESHOLD:
        reasons.append(f"other processes used {other * 100:.0f}% of the machine's CPU while it ran")
    return "; ".join(reasons) or None

