"""Change points over a whole series of run means: E-divisive means, as Hunter (now Apache Otava)
and MongoDB's performance CI use it.

The split: E-divisive (Matteson & James 2014) places a change point where the energy distance
between the points before and after it, scaled by ``m n / (m + n)``, is largest (exponent 1:
sensitive to a shift of the mean without assuming a distribution). The series is cut
hierarchically: the best split of every current segment is found, the most significant one is
kept when significant, and the search goes on in the pieces, so under no change at all a series
reports nothing unless its first, best split is significant.

The significance: as in Hunter's modification, a t test of the points before against the points
after the split (between the neighbouring change points), two-sided, with a Bonferroni factor for
the number of candidate splits the energy statistic chose among. Student's pooled-variance test,
not Hunter's Welch test: with no change the two levels have one variance, and Welch's test on a
level of 3 points next to 27 is anticonservative after the split is chosen (measured: a false
change point in 2.9 % of stationary 30-run series at alpha 1 %; pooled: 0.35 %, and 0.25-0.65 % at
10-90 runs; bench/regression_rates.py). Why not the original permutation test: its smallest
p-value is ``1 / (permutations + 1)``, and these p-values join the Benjamini-Hochberg family of a
run's cases (hundreds): with 199 permutations no change point could survive the adjustment. Why
not a library: MongoDB's ``signal-processing-algorithms`` 2.1.6 (the E-divisive Hunter used) pins
``numpy<2``, ``structlog<25`` and ``setuptools<71``, against Airflow 3's NumPy 2 and structlog 25+;
``ruptures`` finds splits but has no significance test. The t test is SciPy's
(``scipy.stats.ttest_ind``).

Points are run means (issue 39, item 2): a run's repetitions are not independent draws of the
run-to-run noise, so the t test counts runs, never repetitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MIN_SEGMENT = 3
"""Points a level needs on each side of a change point: fewer cannot show a level (the test of the
latest run, :func:`dlbench.reports.analysis.regression.assess`, covers a change in the last runs)."""


@dataclass(frozen=True)
class ChangePoint:
    index: int
    """The first point of the new level."""
    start: int
    """The first point of the level before (the previous change point, or 0)."""
    p_value: float
    """The t test's two-sided p-value of the level before against the level after when the point
    was found, times the number of candidate splits (at most 1)."""
    before: float
    """Mean of the points since the previous change point (or the series' start)."""
    after: float
    """Mean of the points up to the next change point (or the series' end)."""

    @property
    def change_pct(self) -> float:
        return (self.after - self.before) / abs(self.before) * 100.0 if self.before else 0.0


def _best_split(values: Sequence[float], min_size: int) -> tuple[int, float] | None:
    """(split index within ``values``, scaled energy statistic) of the best split, None when the
    segment is too short for two levels."""
    import numpy as np  # numpy: heavy, and only where a series is long enough to test

    n = len(values)
    if n < 2 * min_size:
        return None
    x = np.asarray(values, dtype=float)
    d = np.abs(x[:, None] - x[None, :])
    s = np.zeros((n + 1, n + 1))
    s[1:, 1:] = d.cumsum(0).cumsum(1)  # s[a, b] = sum of d[:a, :b]

    def block(a: int, b: int, c: int, e: int) -> float:
        return float(s[b, e] - s[a, e] - s[b, c] + s[a, c])

    best: tuple[int, float] | None = None
    for tau in range(min_size, n - min_size + 1):
        m, k = tau, n - tau
        between = block(0, tau, tau, n) / (m * k)
        within_left = block(0, tau, 0, tau) / (m * (m - 1))  # each pair counted twice: /2 and /C(m,2)
        within_right = block(tau, n, tau, n) / (k * (k - 1))
        q = m * k / (m + k) * (2 * between - within_left - within_right)
        if best is None or q > best[1]:
            best = (tau, q)
    return best


def _t_p(before: Sequence[float], after: Sequence[float]) -> float:
    from scipy import stats  # scipy: heavy, only where a split is tested

    if min(before) == max(before) and min(after) == max(after):  # no noise at all: any shift is certain
        return 0.0 if before[0] != after[0] else 1.0
    return float(stats.ttest_ind(before, after, equal_var=True).pvalue)


def e_divisive(values: Sequence[float], *, alpha: float, min_size: int = MIN_SEGMENT) -> list[ChangePoint]:
    """The change points of ``values`` (oldest first), in order; each significant at ``alpha``
    (Bonferroni over its candidate splits) against its neighbouring levels."""
    cuts = [0, len(values)]
    found: dict[int, float] = {}
    tested: dict[tuple[int, int], tuple[float, int] | None] = {}  # segment -> (p, split): once each

    def test(a: int, b: int) -> tuple[float, int] | None:
        split = _best_split(values[a:b], min_size)
        if split is None:
            return None
        tau = a + split[0]
        return min(1.0, _t_p(values[a:tau], values[tau:b]) * ((b - a) - 2 * min_size + 1)), tau

    while True:
        for segment in zip(cuts, cuts[1:], strict=False):
            if segment not in tested:
                tested[segment] = test(*segment)
        candidates = [c for c in (tested[s] for s in zip(cuts, cuts[1:], strict=False)) if c is not None]
        significant = [c for c in candidates if c[0] < alpha]
        if not significant:
            break
        p, tau = min(significant)
        found[tau] = p
        cuts = sorted([*cuts, tau])
    out = []
    for tau in sorted(found):
        a = cuts[cuts.index(tau) - 1]
        b = cuts[cuts.index(tau) + 1]
        before, after = values[a:tau], values[tau:b]
        out.append(ChangePoint(index=tau, start=a, p_value=found[tau], before=sum(before) / len(before),
                               after=sum(after) / len(after)))
    return out
