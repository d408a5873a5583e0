"""The suite registry (issue 40, item 2): a suite is declared whole in its own module of
``dlbench/suites/`` plus its line in the registry, and the controller reads its facts from there.

The rule, checked on the suites whose ids are unambiguous words (``tf_cnn``, ``dltools``,
``fathom``, ``transformer``, ``deepbench``; ``serving``, ``cpu`` or ``network`` are also plain words): outside
the workloads (the benchmarked machine's code) and the registry, no module's code names them
(prose in docstrings and comments may, as an example); :data:`NOT_YET` lists exceptions, and stays
empty. The warehouse's migrations are exempt: each is SQL frozen at its revision (the id in
``0004`` is the data of that day, never read from today's code), and a profile's ``tf_cnn`` field
(the profile schema's, under ``workloads/``) is read only through ``Profile.training``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from dlbench.jobs import Job
from dlbench.request import BenchmarkRequest, plan_jobs
from dlbench.suites import DEFAULT_SUITES, OPT_IN_SUITES, SCENARIO_SUITES, SUITES, Suite, spec_of
from dlbench.workloads.profiles import Framework, Scenario
from tests.support.prereqs import ROOT

PACKAGE = ROOT / "include" / "dlbench"
NAMED = ("tf_cnn", "dltools", "fathom", "transformer", "deepbench")
PROSE_KEYWORDS = ("description", "help")
"""Keyword arguments whose strings are prose for the user (pydantic's and Airflow's ``description``,
argparse's ``help``), read as docs by the scan."""
NOT_YET: dict[str, set[str]] = {}
"""Modules that still name a suite in their code, and which (none left: the list may only stay empty)."""


def code_text(source: str) -> str:
    """The module's code without its comments and docstrings (prose may name a suite as an example:
    the rule is about what the code knows)."""
    prose: list[tuple[tuple[int, int], tuple[int, int]]] = []  # spans of prose keyword arguments
    docstrings = set()  # every string statement: the docstrings and the attribute docstrings after assignments
    for node in ast.walk(ast.parse(source)):
        for body in (getattr(node, "body", None), getattr(node, "orelse", None)):
            if isinstance(body, list):
                docstrings |= {(stmt.value.lineno, stmt.value.col_offset) for stmt in body
                               if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)}
        # A field's or an option's description is prose the user reads (the trigger form, --help).
        if isinstance(node, ast.keyword) and node.arg in PROSE_KEYWORDS:
            prose.append(((node.value.lineno, node.value.col_offset),
                          (node.value.end_lineno or node.value.lineno, node.value.end_col_offset or 0)))
    kept = [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type != tokenize.COMMENT and not (tok.type == tokenize.STRING and (
                tok.start in docstrings or any(start <= tok.start < end for start, end in prose)))]
    return " ".join(kept)


def _naming() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        where = str(path.relative_to(PACKAGE))
        if where.startswith(("workloads/", "suites/", "warehouse/migrations/")):
            continue
        text = code_text(path.read_text())  # the ids as written (Suite.TF_CNN reads the registry)
        names = {name for name in NAMED if re.search(rf"\b{name}\b", text)}
        if names:
            found[where] = names
    return found


def test_the_scan_reads_code_not_prose():
    source = ('"""About fathom."""\nX = 1\n"""The transformer\'s."""\n# dltools\nY = "deepbench"\n'
              'Z = Field(default="tf_cnn", description="rows of tf_cnn (" "fathom too)")\n')
    assert re.findall(r"\b(fathom|transformer|dltools|deepbench|tf_cnn)\b", code_text(source)) == ["deepbench",
                                                                                                "tf_cnn"]


def test_a_suite_is_named_only_by_its_module_and_the_registry():
    found = _naming()
    new = {where: names - NOT_YET.get(where, set()) for where, names in found.items()}
    assert not {w: n for w, n in new.items() if n}, "read the suite's facts from dlbench.suites instead"
    gone = {where: names - found.get(where, set()) for where, names in NOT_YET.items()}
    assert not {w: n for w, n in gone.items() if n}, "moved behind the registry: drop them from NOT_YET"


def test_every_suite_has_its_spec_under_its_own_id():
    assert set(SUITES) == set(Suite)
    assert all(spec.name == suite.value for suite, spec in SUITES.items())
    assert set(DEFAULT_SUITES) | set(OPT_IN_SUITES) == set(Suite) and not set(DEFAULT_SUITES) & set(OPT_IN_SUITES)
    assert set(SCENARIO_SUITES) == {Suite.TF_CNN, Suite.TRANSFORMER, Suite.SERVING}
    assert len({spec.command for spec in SUITES.values()}) == len(SUITES)


def test_planning_reads_the_registry():
    """Each planned job runs its suite's command with the suite's own cells, and stages the data
    directory exactly when the suite's rule says so."""
    request = BenchmarkRequest.model_validate({
        "suites": [s.value for s in Suite], "models": ["alexnet"], "data": ["synthetic", "real"],
        "frameworks": ["tensorflow", "pytorch"], "repetitions": 1, "platforms": ["bare_metal"]})
    jobs = plan_jobs(request, "t-registry")
    by_suite: dict[str, list[Job]] = {}
    for job in jobs:
        by_suite.setdefault(job.suite, []).append(job)
    assert set(by_suite) == {s.value for s in Suite}
    for suite, spec in SUITES.items():
        planned = by_suite[suite.value]
        assert {j.command for j in planned} == {spec.command}
        assert [j.args for j in planned] == spec.cells(request, Scenario.SINGLE)
        for job in planned:
            staged = "--data-dir" in job.workload_argv("/tmp/out.json", data_dir="/data")
            assert staged is spec.reads_data(job.args), (suite, job.args)
    assert spec_of("transformer").frameworks([Framework.JAX]) == {Framework.PYTORCH}
    assert spec_of("tf_cnn").frameworks([Framework.JAX]) == {Framework.JAX}
