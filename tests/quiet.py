"""A quiet moment for the tests that check a timing bound of the product.

``make test`` runs the suite as concurrent pytest streams (``tests/streams.py``). A bound that is
about the product's precision (a clock within 50 ms, a heartbeat within 0.18 s) must keep its
value, so the test that checks it runs while no test of another stream runs: it is marked
``@pytest.mark.quiet``. Every test holds ``DLBENCH_TEST_QUIET_LOCK`` while it runs (setup, call
and teardown): shared for an ordinary test, exclusive for a quiet one. A turnstile lock in front
gives the quiet test priority: once it waits, the other streams start no new test, so it waits at
most for the tests running at that moment, never for a stream that keeps taking turns.

Without ``DLBENCH_TEST_QUIET_LOCK`` (a plain ``pytest`` run, one process) nothing is locked.

The same turn, on another lock, keeps the devcloud's Ironic up for the streams that deploy on it
at the same time (``DLBENCH_TEST_IRONIC_LOCK``, :data:`IRONIC_ENV`): the tests of the stream on the
second node pool hold it shared, a test that stops or restarts Ironic (``ironic_wide``: every
deploy in flight, in any pool, fails on a conductor restart) holds it exclusively.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

ENV = "DLBENCH_TEST_QUIET_LOCK"
IRONIC_ENV = "DLBENCH_TEST_IRONIC_LOCK"


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


@contextlib.contextmanager
def turn(quiet: bool, env: str = ENV) -> Iterator[float]:
    """Hold this test's turn while the block runs; yields the seconds it waited for it. ``quiet``:
    exclusively, before any test that comes after it; else shared. ``env`` names the lock."""
    lock = os.environ.get(env)
    if not lock:
        yield 0.0
        return
    path = Path(lock)
    start = time.monotonic()
    turnstile, main = _open(path.with_name(path.name + ".turnstile")), _open(path)
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(main, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        if not quiet:  # through: a quiet test that waits behind us goes next
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield time.monotonic() - start
    finally:
        os.close(main)  # closing releases the locks
        os.close(turnstile)
