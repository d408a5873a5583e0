"""The CI time budget (tests/budgets.py, the table in docs/testing.md): every tier of the suite and
every stream has a budget, the phases of .ci/run have theirs, and the summary of ``make test``
compares each with its budget and says OVER, with the seconds, where one is exceeded."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import budgets, streams
from tests.support.prereqs import ROOT

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.reports.test_a" name="test_ok" time="{reports}"/>
<testcase classname="tests.ironic.test_b" name="test_ok" time="3.0"/>
</testsuite></testsuites>"""


def test_every_tier_stream_and_ci_phase_has_a_budget():
    table = budgets.load()
    tiers = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert tiers and {name for kind, name in table if kind == "tier"} == tiers
    assert {name for kind, name in table if kind == "stream"} == {*streams.STREAMS, streams.CLUSTER, streams.LAST}
    assert {name for kind, name in table if kind == "ci"} == {"prerequisites", "tests", "whole"}
    assert all(b.seconds > 0 for b in table.values())
    # the tests' step is inside the whole run, the streams inside the tests' step
    assert table[("ci", "prerequisites")].seconds + table[("ci", "tests")].seconds <= table[("ci", "whole")].seconds
    every = (*streams.STREAMS, streams.CLUSTER)
    assert max(table[("stream", s)].seconds for s in every) <= table[("ci", "tests")].seconds


def test_a_verdict_says_over_with_the_seconds_and_a_missing_row_is_named():
    budget = budgets.Budget("tier", "ironic", 1000)
    assert str(budgets.Verdict(870, budget)) == "of 1,000 s (87%)" and not budgets.Verdict(870, budget).over
    assert str(budgets.Verdict(1130, budget)) == "OVER its 1,000 s by 130 s (113%)"
    assert budgets.Verdict(1130, budget).over
    assert "add a row to docs/testing.md" in str(budgets.Verdict(5, None)) and not budgets.Verdict(5, None).over


def test_a_table_without_its_markers_or_rows_is_an_error(tmp_path: Path):
    doc = tmp_path / "testing.md"
    doc.write_text("| tier `ironic` | 900 |\n")
    with pytest.raises(ValueError, match="markers"):
        budgets.load(doc)
    doc.write_text(f"{budgets.BEGIN}\n| what | budget |\n{budgets.END}\n")
    with pytest.raises(ValueError, match="no budget rows"):
        budgets.load(doc)


@pytest.mark.parametrize(("seconds", "line"), [
    (2.0, "budgets: every tier and stream within its budget"),
    (1e6, "budgets: tier reports OVER its"),
])
def test_the_summary_compares_each_tier_with_its_budget(tmp_path: Path, capsys, seconds: float, line: str):
    (tmp_path / "local.xml").write_text(JUNIT.format(reports=seconds))
    (tmp_path / "local.log").write_text("")
    step = streams.Step("local", ["pytest"], {}, tmp_path / "local.xml", tmp_path / "local.log", rc=0)
    assert streams.report({"local": [step]}, 10.0, tmp_path) == 0  # a budget exceeded is said, not failed
    out = capsys.readouterr().out
    written = (tmp_path / "budget.txt").read_text()
    assert written.startswith(line) and line in out
    limit = budgets.load()[("tier", "ironic")].seconds
    assert f"of {limit:,} s" in next(row for row in out.splitlines() if row.startswith("  ironic"))


def test_ci_runs_disk_summary_survives_a_long_run_under_pipefail(tmp_path: Path):
    """.ci/run's last words on disk use (its ``disk_summary``) ran under ``set -euo pipefail`` as a
    ``sort | head -n 1``: once the sample file outgrew one pipe write, sort died of SIGPIPE and a run
    whose tests all passed ended with exit 141 (stop 52's landing, after 3,938 s). The function, as
    .ci/run defines it, runs here on a day's worth of samples and must name the lowest one."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    begin = lines.index("disk_summary() {")
    body = "\n".join(lines[begin : lines.index("}", begin) + 1])
    samples = tmp_path / "build" / "ci-disk.txt"
    samples.parent.mkdir()
    # 8,640 samples (24 h at one per 10 s), the lowest in the middle; one torn last line
    rows = [f"{10 * i} {40000 - (i if i <= 4000 else 8000 - i)}" for i in range(1, 8641)]
    samples.write_text("\n".join(rows) + "\n86410\n")
    script = f"""set -euo pipefail
cd {tmp_path}
start=$(date +%s); free_at_start=51200; sampler=$$
free_mib() {{ echo 99999; }}
kill() {{ :; }}
{body}
disk_summary
echo "status $?"
"""
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "== disk: 50 GiB free at the start, 35 GiB at the lowest (after 40000 s): this run used up to 14 GiB",
        "status 0",
    ]
