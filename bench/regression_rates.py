"""False alarms per run and detection power of regression detection, as the product runs it.

Issue 39, item 3: the per-case figures (tests/reports/test_regression.py: one case at a time) are
not what an operator sees. A scheduled run tests every case it ran at once (``regression.detect``
through ``regression.check_series``: per case, the prediction-t test of the run against its last 8
runs since the last change point, and E-divisive change points over the case's whole series; then
Benjamini-Hochberg over the run's family at alpha 1 %, and the 2 % minimum change), with
run-to-run noise (another node, another week) on top of the repetitions' noise. This simulates
that whole path with the product's own functions and prints:

- the share of stationary runs that raise **any** alarm (what an operator experiences as a false
  alarm), for families of 10, 40 and 90 cases, with 9 and 30 runs of history;
- the power to flag one case that dropped by 3, 5, 10 or 15 % in the run under test, among 40;
- the power to flag a lasting 4 % step among 40 cases, 1, 3 and 6 runs after it (30 runs of
  history): the change points' part.

Noise as measured on this project's machines: run effect sd 1 %, repetition sd 2 % (docs/
regressions.md), 3 repetitions. Usage: ``python bench/regression_rates.py [runs]`` (default 200
simulated runs per figure; about a minute).
"""

from __future__ import annotations

import random
import sys

from dlbench.reports.analysis import regression

REPS, RUN_SD, REP_SD = 3, 0.01, 0.02


def series(rng: random.Random, length: int, step: float = 1.0, lasting: int = 1) -> list[list[float]]:
    """One case's runs, oldest first: the last ``lasting`` runs x ``step``."""
    out = []
    for i in range(length):
        effect = rng.gauss(1.0, RUN_SD) * (step if i >= length - lasting else 1.0)
        out.append([100.0 * effect * rng.gauss(1.0, REP_SD) for _ in range(REPS)])
    return out


def one_run(rng: random.Random, cases: int, length: int, step: float = 1.0, lasting: int = 1) -> tuple[int, bool]:
    """(cases alarmed in the run, whether the stepped case, the first, was), the product's way."""
    tested = []
    for i in range(cases):
        history = series(rng, length, step if i == 0 else 1.0, lasting)
        tested += [(i, f.outcome) for f in regression.check_series(history, higher_is_better=True)]
    q = regression.benjamini_hochberg([o.p_value for _, o in tested])
    alarmed = {i for (i, o), p in zip(tested, q, strict=True) if o.regressed and (p is None or p < regression.ALPHA)}
    return len(alarmed), 0 in alarmed


def main(runs: int = 200) -> None:
    rng = random.Random(39)
    print(f"{runs} simulated runs per figure; run effect sd {RUN_SD:.0%}, repetition sd {REP_SD:.0%}, "
          f"{REPS} repetitions, BH at alpha {regression.ALPHA}, minimum change {regression.MIN_CHANGE_PCT} %")
    for length in (9, 30):
        for cases in (10, 40, 90):
            alarmed = sum(one_run(rng, cases, length)[0] > 0 for _ in range(runs))
            print(f"stationary, {length:2d} runs of history, {cases:3d} cases per run: "
                  f"runs with any alarm {alarmed / runs:.3f}")
    for drop in (3, 5, 10, 15):
        found = sum(one_run(rng, 40, 9, 1 - drop / 100)[1] for _ in range(runs))
        print(f"one case {drop:2d} % slower in the run under test, among 40: flagged in {found / runs:.3f} of runs")
    for lasting in (1, 3, 6):
        found = sum(one_run(rng, 40, 30, 0.96, lasting)[1] for _ in range(runs))
        print(f"one case 4 % slower for the last {lasting} run(s) of 30, among 40: "
              f"flagged in {found / runs:.3f} of runs")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
