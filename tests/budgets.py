"""The CI time budget, per tier, per stream and for the whole run: read from docs/testing.md.

Why a budget per tier: CI has a hard limit (90 minutes, beyond which nothing lands) and a budget
(40 minutes for ``.ci/run`` on a fresh clone). Every issue that adds a suite or a test adds time; a
budget per tier says at once which tier grew and by how much, so the next issue sees what it added
instead of finding the whole run over the limit. The budgets are stated once, in the table of
docs/testing.md's section "Budgets" (seconds, set from measured runs with the machine's noise as
headroom); ``tests/streams.py`` compares each tier and stream with it at the end of ``make test``,
and ``.ci/run`` the prerequisites and the whole run (``python -m tests.budgets``).

A budget exceeded is reported, not failed: this machine's run-to-run noise reaches 15 %, and a red
CI for a slow hour would teach people to ignore it. The line says ``OVER`` with the seconds.

    python -m tests.budgets [--prerequisites S] [--whole S]
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "testing.md"
BEGIN, END = "<!-- budgets: begin -->", "<!-- budgets: end -->"
"""The table's bounds in :data:`DOC` (the markers keep the rest of the page free prose)."""
ROW = re.compile(r"^\|\s*(?P<kind>tier|stream|ci)\s+`(?P<name>[^`]+)`\s*\|\s*(?P<budget>[\d,]+)\s*\|")


@dataclass(frozen=True)
class Budget:
    kind: str
    """``tier`` (tests/<tier>: summed test time), ``stream`` (wall time) or ``ci`` (a phase of .ci/run)."""
    name: str
    seconds: int


def load(doc: Path = DOC) -> dict[tuple[str, str], Budget]:
    """Every budget of the table, by (kind, name). A table without rows is an error, not 'no budget'."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{doc}: the budget table's markers {BEGIN} ... {END} are missing")
    rows = text.split(BEGIN, 1)[1].split(END, 1)[0].splitlines()
    budgets = {}
    for line in rows:
        if match := ROW.match(line.strip()):
            budget = Budget(match["kind"], match["name"], int(match["budget"].replace(",", "")))
            budgets[(budget.kind, budget.name)] = budget
    if not budgets:
        raise ValueError(f"{doc}: no budget rows between {BEGIN} and {END}")
    return budgets


@dataclass(frozen=True)
class Verdict:
    """A measured time against its budget (``budget`` None: a new tier or stream without a row)."""

    seconds: float
    budget: Budget | None

    @property
    def over(self) -> bool:
        return self.budget is not None and self.seconds > self.budget.seconds

    def __str__(self) -> str:
        """``of 1,200 s (87 %)``, ``OVER its 1,200 s by 130 s (111 %)`` or ``no budget (...)``."""
        if self.budget is None:
            return "no budget (add a row to docs/testing.md's budget table)"
        share = self.seconds / self.budget.seconds if self.budget.seconds else float("inf")
        if self.over:
            return f"OVER its {self.budget.seconds:,} s by {self.seconds - self.budget.seconds:,.0f} s ({share:.0%})"
        return f"of {self.budget.seconds:,} s ({share:.0%})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prerequisites", type=float, help="seconds .ci/run spent before the tests")
    parser.add_argument("--whole", type=float, help="seconds of the whole .ci/run")
    args = parser.parse_args(argv)
    budgets = load()
    for name, seconds in (("prerequisites", args.prerequisites), ("whole", args.whole)):
        if seconds is not None:
            print(f"== budget: {name} {seconds:,.0f} s {Verdict(seconds, budgets.get(('ci', name)))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
