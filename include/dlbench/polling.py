"""Deadlines, polling and retries: every wait of dlbench (cloud APIs, machines, processes, locks) goes through here.

Why our own loop: openstacksdk's ``wait_for_*`` poll every 2 s and retry nothing, which both
dominates test time and turns a 30-second API restart into a failed run. Here every wait has a
deadline, the interval is configurable, and transient API errors (5xx, connection refused or
reset) are retried with exponential backoff until the deadline; client errors (4xx) are not. A plain 500
is retried only a few times: Ironic also answers 500 for conductor-side refusals (e.g. "image
href is not a UUID") that no retry can fix, and a two-minute retry would only hide the message.

The helpers, from the bottom up: :class:`Deadline` (a point in time; :meth:`Deadline.pause`
never sleeps past it), :func:`retry_call` (one call, transient errors retried),
:func:`retry_while` (a whole attempt again after a jittered :func:`backoff` while the caller
says the failure is worth another try, e.g. no free node right now), :func:`poll` (one resource
until done), :func:`wait_for_status` (one resource until a status, a failure status raising the
cloud's own reason, like openstacksdk's ``wait_for_status``) and :func:`poll_each` (several
resources in rounds, one :class:`~dlbench.errors.WaitTimeout` naming those still pending). A
``WaitTimeout`` names what was awaited and the last state seen.

The execution layer waits for machines, processes, pods and locks with the same helpers: a wait
that raises its own error at the deadline passes :func:`poll` a ``give_up``; one that only wants
to know whether the condition came in time (to escalate a signal, to report what is left) asks
:func:`until`. ``time.sleep`` elsewhere in dlbench marks a pause that is no wait (a guard test
holds it to a ``# not a wait:`` comment), so every wait has one home for its interval and deadline.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Iterable
from typing import TypeVar

from dlbench.errors import WaitTimeout

log = logging.getLogger(__name__)
T = TypeVar("T")
ItemT = TypeVar("ItemT")


MAX_INTERNAL_ERROR_RETRIES = 2



def is_transient(exc: BaseException) -> bool:
    """5xx and connection-level failures are worth retrying; 4xx and everything else are not."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status >= 500
    names = {cls.__name__ for cls in type(exc).__mro__}
    transient = {"ConnectFailure", "ConnectTimeout", "ConnectionError", "RetriableConnectionFailure",
                 "DiscoveryFailure", "EndpointNotFound", "SSLError", "ConnectionResetError",
                 "ConnectionRefusedError", "RemoteDisconnected", "ProtocolError"}
    if names & transient:
        return True
    # openstacksdk wraps transport errors in SDKException without a status code.
    return "SDKException" in names and status is None and any(
        word in str(exc).lower() for word in ("connection", "refused", "reset", "unavailable", "timed out"))


class Deadline:
    """A point in monotonic time; ``remaining`` never goes negative."""

    def __init__(self, seconds: float, what: str, *, may_be_spent: bool = False) -> None:
        """``may_be_spent``: ``seconds`` <= 0 is the rest of a budget already used up, not a
        configuration error (a wait then checks once and gives up), e.g. the second of several
        claims sharing one wait, or a caller's own timeout passed through as it is."""
        if seconds <= 0 and not may_be_spent:
            raise ValueError(f"timeout for {what} must be > 0 (got {seconds})")
        self.what = what
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return self.remaining() <= 0

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` between two tries, or less when the deadline comes first (a wait
        never oversleeps its deadline)."""
        time.sleep(min(seconds, self.remaining()))


def retry_call(fn: Callable[[], T], deadline: Deadline, *, first_delay: float = 0.2, max_delay: float = 5.0,
               what: str = "") -> T:
    """``fn()``, retrying transient errors with exponential backoff until ``deadline``."""
    delay = first_delay
    attempt = internal_errors = 0
    while True:
        attempt += 1
        try:
            return fn()
        except Exception as exc:
            if not is_transient(exc) or deadline.expired():
                raise
            if getattr(exc, "status_code", None) == 500:
                internal_errors += 1
                if internal_errors > MAX_INTERNAL_ERROR_RETRIES:
                    raise
            log.warning("transient API error%s (attempt %d, retrying in %.1fs): %s", f" during {what}" if what else "",
                        attempt, delay, _short(exc))
            deadline.pause(delay)
            delay = min(delay * 2, max_delay)


def backoff(attempt: int, base: float, cap: float, *, doublings: int = 5, jitter: float = 0.5) -> float:
    """Seconds before try ``attempt + 1``: ``base`` doubled per attempt (at most ``doublings``
    times), at most ``cap``, times a random factor in [1 - jitter, 1 + jitter], so callers that
    compete for the same thing (runs that want the same nodes) do not retry in step."""
    return min(base * 2 ** min(attempt, doublings), cap) * random.uniform(1 - jitter, 1 + jitter)


def retry_while(fn: Callable[[], T], retryable: Callable[[Exception], bool], deadline: Deadline, *,
                pause: Callable[[int], float], give_up: Callable[[Exception], BaseException],
                on_retry: Callable[[Exception, float], None] | None = None) -> T:
    """``fn()``, tried again after ``pause(attempt)`` s while it fails with an error that
    ``retryable`` says another try may cure (e.g. no free node right now; transient API errors
    are :func:`retry_call`'s) and the deadline leaves room for that pause; when it does not,
    ``give_up(error)`` is raised (from None: it says what ran out). Any other error propagates
    at once. ``on_retry(error, pause)`` reports each retry (default: a log line)."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except Exception as exc:
            if not retryable(exc):
                raise
            seconds = pause(attempt)
            if deadline.remaining() <= seconds:
                raise give_up(exc) from None
            if on_retry is not None:
                on_retry(exc, seconds)
            else:
                log.info("%s: %s; trying again in %.1f s", deadline.what, _short(exc), seconds)
            deadline.pause(seconds)


def _fetch(fetch: Callable[[], T], deadline: Deadline, interval: float, what: str | None, retry: bool,
           unanswered: Callable[[BaseException], str]) -> T:
    """One poll's fetch: transient errors retried until the deadline when ``retry``; an API
    still unreachable at the deadline is a :class:`WaitTimeout` with ``unanswered(error)``."""
    if not retry:
        return fetch()
    try:
        return retry_call(fetch, deadline, first_delay=interval, what=what or deadline.what)
    except Exception as exc:
        if is_transient(exc) and deadline.expired():
            raise WaitTimeout(unanswered(exc)) from None
        raise


def poll(fetch: Callable[[], T], done: Callable[[T], bool], deadline: Deadline, interval: float,
         describe: Callable[[T], str] = str, *, retry: bool = True, what: str | None = None,
         timeout: Callable[[T], str] | None = None, give_up: Callable[[T], BaseException] | None = None) -> T:
    """Call ``fetch`` every ``interval`` s until ``done(value)``; raise :class:`WaitTimeout` with
    the last state seen once the deadline passes.

    ``done`` may raise to end the wait with an error (a failure state: the cloud's reason in it).
    ``retry``: transient errors of ``fetch`` are retried (the API may restart mid-wait; logged
    as ``what``, default the deadline's); False where ``fetch`` retries its own calls or cannot
    fail transiently, so its errors propagate as they are. ``timeout(last value)``: the
    WaitTimeout's text (default: what was awaited, for how long, and ``describe(last)``).
    ``give_up(last value)``: the error raised at the deadline instead of a WaitTimeout, where the
    caller's callers expect its own (a peer that does not serve, a machine still claimed)."""
    last: T | None = None

    def unanswered(exc: BaseException) -> str:
        if last is not None and timeout is not None:
            return f"{timeout(last)}; last error: {_short(exc)}"
        seen = describe(last) if last is not None else "nothing (API unreachable)"
        return (f"{deadline.what}: no answer within {deadline.seconds:.0f} s; last seen: {seen}; "
                f"last error: {_short(exc)}")

    while True:
        value = _fetch(fetch, deadline, interval, what, retry, unanswered)
        if done(value):
            return value
        last = value
        if deadline.expired():
            if give_up is not None:
                raise give_up(value)
            raise WaitTimeout(timeout(value) if timeout is not None else
                              f"{deadline.what}: not done within {deadline.seconds:.0f} s; "
                              f"last seen: {describe(value)}")
        deadline.pause(interval)


def until(condition: Callable[[], bool], deadline: Deadline | None, interval: float,
          wake: threading.Event | None = None) -> bool:
    """True as soon as ``condition()`` is, asked every ``interval`` s; False once the deadline has
    passed first (a last ask at the deadline). For the waits whose running out is no error of its
    own: the caller escalates (SIGTERM, then SIGKILL), reports what is left, or tries another way.
    ``deadline`` None: no deadline, the condition itself ends the wait (a child process that runs
    as long as its work, or a signal). The condition's own errors propagate. ``wake``: an event
    someone sets when the condition may have changed (a watch on the resource): the condition is
    asked again at once instead of at the next interval, which stays the fallback."""
    while True:
        if wake is not None:
            wake.clear()  # before asking: a change during the ask sets it again
        if condition():
            return True
        if deadline is not None and deadline.expired():
            return False
        if wake is not None:
            wake.wait(interval if deadline is None else max(0.0, min(interval, deadline.remaining())))
        elif deadline is None:
            time.sleep(interval)
        else:
            deadline.pause(interval)


def wait_for_status(fetch: Callable[[], T], status: Callable[[T], object], deadline: Deadline, interval: float, *,
                    ready: str, failed: Collection[str], error: Callable[[T], BaseException],
                    timeout: Callable[[T], str] | None = None, describe: Callable[[T], str] = str,
                    retry: bool = True) -> T:
    """:func:`poll` until ``status(value)`` is ``ready``; a status in ``failed`` raises
    ``error(value)`` at once (openstacksdk's ``wait_for_status`` with its failures list, with our
    deadline, interval and retries). Statuses compare as strings: a provider's ``StrEnum`` or the
    API's own text."""

    def done(value: T) -> bool:
        state = status(value)
        if state in failed:
            raise error(value)
        return state == ready

    return poll(fetch, done, deadline, interval, describe, retry=retry, timeout=timeout)


def poll_each(items: Iterable[ItemT], fetch: Callable[[ItemT], T], done: Callable[[ItemT, T], bool],
              deadline: Deadline, interval: float, *, timeout: Callable[[list[ItemT]], str], retry: bool = True,
              what: str | None = None) -> None:
    """Several resources at once, in rounds: each round fetches every pending item once and asks
    ``done(item, value)`` whether it arrived (it may raise: a failure state ends the whole wait);
    the rest wait ``interval`` s for the next round. One :class:`WaitTimeout` with
    ``timeout(pending items)`` once the deadline passes with items pending. ``retry`` and
    ``what``: as in :func:`poll`, per fetch."""
    pending = list(items)

    def arrived(item: ItemT) -> bool:
        value = _fetch(lambda: fetch(item), deadline, interval, what, retry,
                       lambda exc: f"{timeout(pending)}; last error: {_short(exc)}")
        return done(item, value)

    while pending:
        pending = [item for item in pending if not arrived(item)]
        if pending:
            if deadline.expired():
                raise WaitTimeout(timeout(pending))
            deadline.pause(interval)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"
