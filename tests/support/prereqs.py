"""The checkout's root and the prerequisite rule every tier uses.

A tier that needs something this machine may lack (root, Docker, the PostgreSQL server binaries,
the devcloud) calls :func:`require`. On a user's machine it skips with the reason printed; with
``DLBENCH_REQUIRE_ALL=1`` (set by ``.ci/run``) it fails instead, so CI can never go green by
skipping.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIRE_ALL = os.environ.get("DLBENCH_REQUIRE_ALL", "") not in ("", "0", "false", "no")


def require(condition: bool, reason: str) -> None:
    """Skip (or, under DLBENCH_REQUIRE_ALL, fail) when a prerequisite is missing."""
    if condition:
        return
    if REQUIRE_ALL:
        pytest.fail(f"prerequisite missing and DLBENCH_REQUIRE_ALL is set: {reason}", pytrace=False)
    pytest.skip(f"prerequisite missing: {reason}")
