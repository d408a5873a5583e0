"""Turns on the devcloud's Ironic, which two test streams use at the same time.

``make test`` runs the suite as concurrent pytest streams (``tests/streams.py``). The devcloud
stream and the Kubernetes stream deploy nodes of two disjoint pools through one Ironic. A test
that stops, freezes, kills or restarts it (``@pytest.mark.ironic_wide``) fails every deploy in
flight, in any pool, so it holds ``DLBENCH_TEST_IRONIC_LOCK`` exclusively while it runs (setup,
call and teardown) and the Kubernetes stream's tests hold it shared. A turnstile lock in front
gives the exclusive test priority: once it waits, the Kubernetes stream starts no new test, so it
waits at most for the test running at that moment, never for a stream that keeps taking turns.

Without ``DLBENCH_TEST_IRONIC_LOCK`` (a plain ``pytest`` run, one process) nothing is locked.

Such a test also starts on a settled Ironic (:func:`settle`): no node of any pool still deploying
or cleaning from an earlier test, which the outage would fail too (stop 36's CI: a node the
previous test had released was cleaning when ``api-kill`` hit and came back ``clean failed``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.knobs import fault

ENV = "DLBENCH_TEST_IRONIC_LOCK"


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


@contextlib.contextmanager
def turn(exclusive: bool) -> Iterator[float]:
    """Hold this test's turn on Ironic while the block runs; yields the seconds it waited for it.
    ``exclusive``: alone, before any test that comes after it; else shared."""
    lock = os.environ.get(ENV)
    if not lock:
        yield 0.0
        return
    path = Path(lock)
    start = time.monotonic()
    turnstile, main = _open(path.with_name(path.name + ".turnstile")), _open(path)
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(main, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if not exclusive:  # through: an exclusive test that waits behind us goes next
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield time.monotonic() - start
    finally:
        os.close(main)  # closing releases the locks
        os.close(turnstile)


def settle() -> None:
    """Wait (the devcloud's ``settle`` knob, bounded) until no node deploys or cleans; a no-op
    when no Ironic answers. Raises, naming the nodes, when one stays in flight."""
    fault("settle", timeout=300)
