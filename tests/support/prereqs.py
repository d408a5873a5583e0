"""The checkout's root and the prerequisite rule every tier uses.

A tier that needs something this machine may lack (root, Docker, the PostgreSQL server binaries,
the devcloud) calls :func:`require`. On a user's machine it skips with the reason printed; with
``DLBENCH_REQUIRE_ALL=1`` (set by ``.ci/run``) it fails instead, so CI can never go green by
skipping.
"""

from __future__ import annotations

import fcntl
import os
import time
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


def wait_for_build(lock: Path, what: str, timeout: float = 1200) -> None:
    """Wait (bounded) for a build that holds ``lock`` to end: .ci/run builds what only late tests
    use beside the tests (the Makefile's ``CI_BACKGROUND``: the VM image, the serving suite's
    environment and image), each holding its lock, so those tests start once their prerequisite is
    there instead of finding it half-built. No lock file: no build runs (or ran)."""
    if not lock.exists():
        return
    fd = os.open(lock, os.O_RDONLY)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the build of {what} holding {lock} did not end in {timeout:.0f} s")
                time.sleep(2)
    finally:
        os.close(fd)
