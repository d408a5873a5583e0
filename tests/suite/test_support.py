"""What tests share is code in tests/support, not conftests used as libraries (issue 40): no test
imports a conftest, and a tier's conftest holds only fixtures and pytest's hooks."""

from __future__ import annotations

import ast

from tests.support.imports import imported_modules
from tests.support.prereqs import ROOT

TESTS = ROOT / "tests"


def test_no_module_imports_a_conftest():
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in imported_modules(p) if m.split(".")[-1] == "conftest")
                 for p in TESTS.rglob("*.py")}
    assert not {p: m for p, m in offenders.items() if m}, "import it from tests/support instead"


def _what_it_holds(node: ast.stmt) -> str | None:
    """Why a top-level statement of a tier's conftest is not a fixture or a hook (None: it is one)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return None
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # the docstring
        return None
    if isinstance(node, ast.FunctionDef):
        fixture = any("fixture" in ast.unparse(d) for d in node.decorator_list)
        return None if fixture or node.name.startswith("pytest_") else f"function {node.name}"
    if isinstance(node, ast.If):  # pytest's collect_ignore_glob, set on a condition
        assigned = {t.id for n in ast.walk(node) if isinstance(n, ast.Assign) for t in n.targets
                    if isinstance(t, ast.Name)}
        return None if assigned <= {"collect_ignore", "collect_ignore_glob"} else f"if setting {sorted(assigned)}"
    return f"{type(node).__name__} at line {node.lineno}"


def test_a_tiers_conftest_holds_only_fixtures_and_hooks():
    found = {}
    for conftest in TESTS.glob("*/conftest.py"):
        extra = [w for node in ast.parse(conftest.read_text()).body if (w := _what_it_holds(node))]
        if extra:
            found[str(conftest.relative_to(ROOT))] = extra
    assert not found, f"move these to tests/support: {found}"


def test_the_guard_would_see_a_helper_in_a_conftest():
    """The rule above, on a conftest that keeps a helper and a constant beside its fixture."""
    tree = ast.parse("import pytest\n\nPOLL = 0.2\n\n\ndef helper():\n    pass\n\n\n@pytest.fixture\n"
                     "def thing():\n    return 1\n")
    assert [_what_it_holds(n) for n in tree.body] == [None, "Assign at line 3", "function helper", None]
