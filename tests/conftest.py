"""Shared test plumbing.

Prerequisite skips: a tier that needs something this machine may lack (root, Docker, the
PostgreSQL server binaries, the devcloud) calls :func:`require`. On a user's machine it skips
with the reason printed; with ``DLBENCH_REQUIRE_ALL=1`` (set by ``.ci/run``) it fails instead,
so CI can never go green by skipping.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REQUIRE_ALL = os.environ.get("DLBENCH_REQUIRE_ALL", "") not in ("", "0", "false", "no")

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if str(ROOT / "include") not in sys.path:
    sys.path.insert(0, str(ROOT / "include"))


def require(condition: bool, reason: str) -> None:
    """Skip (or, under DLBENCH_REQUIRE_ALL, fail) when a prerequisite is missing."""
    if condition:
        return
    if REQUIRE_ALL:
        pytest.fail(f"prerequisite missing and DLBENCH_REQUIRE_ALL is set: {reason}", pytrace=False)
    pytest.skip(f"prerequisite missing: {reason}")


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


def pytest_report_header(config: pytest.Config) -> str:
    mode = "fail" if REQUIRE_ALL else "skip"
    return f"dlbench: missing prerequisites will {mode} (DLBENCH_REQUIRE_ALL={'1' if REQUIRE_ALL else '0'})"
