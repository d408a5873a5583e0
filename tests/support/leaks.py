"""One leak guard for every provider tier (Ironic, Nova, Magnum): the tiers differ in what a leak
is and how to scrub it, not in the rule.

The rule: before the test, wait for what earlier tests released (a cloud releases asynchronously:
Ironic's cleaning, Nova's deletes) and scrub what a test outside the guard left, so a leak fails one
test, not every later one (the CI of stop 44: one leaked node, 37 later tests failed waiting for
it); after the test, every knob back to normal, then wait for this test's releases and fail it
with what it left, scrubbing it for the next test either way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LeakGuard:
    where: str
    """The cloud, as the failure message names it ("the devcloud's Nova")."""
    leaks: Callable[[Any], list[str]]
    """Everything of ours still on the cloud, each as a line for the failure message."""
    scrub: Callable[[Any], None]
    """Give back what a test left (only after a check has reported it)."""
    reset: Callable[[], None]
    """Every fault knob of this cloud back to normal (a failed test must not leave one turned)."""
    poll: float
    before_s: float = 60
    """How long what earlier tests released may take to become free."""
    after_s: float = 120
    """How long this test's own releases may take after it ended."""

    def wait_clean(self, conn: Any, timeout: float) -> list[str]:
        """What is still leaked after waiting up to ``timeout`` s for it to go ([] when clean)."""
        deadline = time.monotonic() + timeout
        left = self.leaks(conn)
        while left and time.monotonic() < deadline:
            time.sleep(self.poll)
            left = self.leaks(conn)
        return left

    def around(self, conn: Any) -> Iterator[Any]:
        """A fixture's body: ``yield from GUARD.around(conn)``."""
        if self.wait_clean(conn, self.before_s):
            self.scrub(conn)  # an earlier test's leak (its own check failed): not this test's
            left = self.wait_clean(conn, self.before_s)
            assert not left, f"{self.where} is not clean before the test, even after a scrub: {left}"
        yield conn
        self.reset()
        left = self.wait_clean(conn, self.after_s)
        if left:
            self.scrub(conn)
        assert not left, f"leaked on {self.where}: {left}"
