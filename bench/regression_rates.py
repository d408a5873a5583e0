"""False alarms per run and detection power of regression detection, as the product runs it.

Issue 39, item 3: the per-case figures (tests/reports/test_regression.py: one case at a time) are
not what an operator sees. A scheduled run tests every case it ran at once (``regression.detect``:
the prediction-t test of each case against its last 8 runs, then Benjamini-Hochberg over the
run's family at alpha 1 %, and the 2 % minimum change), with run-to-run noise (another node,
another week) on top of the repetitions' noise. This simulates that whole path with the
product's own functions (``regression.assess``, ``regression.benjamini_hochberg``) and prints:

- the share of stationary runs that raise **any** alarm (what an operator experiences as a false
  alarm), for families of 10, 40 and 90 cases;
- the power to flag one case that dropped by 3, 5, 10 or 15 % among 40 stationary ones.

Noise as measured on this project's machines: run effect sd 1 %, repetition sd 2 % (docs/
regressions.md), 3 repetitions, 8 baseline runs. Usage: ``python bench/regression_rates.py
[runs]`` (default 400 simulated runs per figure; a few seconds).
"""

from __future__ import annotations

import random
import statistics
import sys

from dlbench.reports import regression

WINDOW, REPS, RUN_SD, REP_SD = 8, 3, 0.01, 0.02


def case(rng: random.Random, step: float = 1.0) -> tuple[list[float], list[float], list[float]]:
    runs = []
    for i in range(WINDOW + 1):
        effect = rng.gauss(1.0, RUN_SD) * (step if i == WINDOW else 1.0)
        runs.append([100.0 * effect * rng.gauss(1.0, REP_SD) for _ in range(REPS)])
    base = runs[:WINDOW]
    return [statistics.fmean(r) for r in base], [v for r in base for v in r], runs[WINDOW]


def one_run(rng: random.Random, cases: int, dropped: float | None = None) -> tuple[int, bool]:
    """(alarms in the run, whether the dropped case, the first, was flagged), the product's way."""
    outcomes = []
    for i in range(cases):
        means, samples, current = case(rng, dropped if (dropped is not None and i == 0) else 1.0)
        outcomes.append(regression.assess(means, samples, current, higher_is_better=True, alpha=1.0))
    q = regression.benjamini_hochberg([o.p_value if o else None for o in outcomes])
    flagged = [bool(o and o.regressed and (p is None or p < regression.ALPHA))
               for o, p in zip(outcomes, q, strict=True)]
    return sum(flagged), flagged[0]


def main(runs: int = 400) -> None:
    rng = random.Random(39)
    print(f"{runs} simulated runs per figure; run effect sd {RUN_SD:.0%}, repetition sd {REP_SD:.0%}, "
          f"{REPS} repetitions, {WINDOW} baseline runs, BH at alpha {regression.ALPHA}, "
          f"minimum change {regression.MIN_CHANGE_PCT} %")
    for cases in (10, 40, 90):
        alarmed = sum(one_run(rng, cases)[0] > 0 for _ in range(runs))
        print(f"stationary, {cases:3d} cases per run: runs with any alarm {alarmed / runs:.3f}")
    for drop in (3, 5, 10, 15):
        found = sum(one_run(rng, 40, 1 - drop / 100)[1] for _ in range(runs))
        print(f"one case {drop:2d} % slower among 40: flagged in {found / runs:.3f} of runs")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
