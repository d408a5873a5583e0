"""What the report computes from the warehouse: statistics and verdicts, the comparison and its
headline, the answer's groups and decision grade, regressions and change points, capacity and
cost, gates, the machine-load flag, machine classes, and what a run recorded. No HTML here."""
