"""Deadlines, polling and retries for cloud APIs.

Why our own loop: openstacksdk's ``wait_for_*`` poll every 2 s and retry nothing, which both
dominates test time and turns a 30-second API restart into a failed run. Here every wait has a
deadline, the interval is configurable, and transient API errors (5xx, connection refused or
reset) are retried with exponential backoff until the deadline; client errors (4xx) are not. A plain 500
is retried only a few times: Ironic also answers 500 for conductor-side refusals (e.g. "image
href is not a UUID") that no retry can fix, and a two-minute retry would only hide the message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from dlbench.errors import WaitTimeout

log = logging.getLogger(__name__)
T = TypeVar("T")


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

    def __init__(self, seconds: float, what: str) -> None:
        if seconds <= 0:
            raise ValueError(f"timeout for {what} must be > 0 (got {seconds})")
        self.what = what
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return self.remaining() <= 0


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
            time.sleep(min(delay, deadline.remaining()))
            delay = min(delay * 2, max_delay)


def poll(fetch: Callable[[], T], done: Callable[[T], bool], deadline: Deadline, interval: float,
         describe: Callable[[T], str] = str) -> T:
    """Call ``fetch`` every ``interval`` s until ``done(value)``; transient errors are retried
    (the API may restart mid-wait); raise :class:`WaitTimeout` with the last state seen."""
    last: T | None = None
    while True:
        try:
            value = retry_call(fetch, deadline, first_delay=interval, what=deadline.what)
        except Exception as exc:
            if is_transient(exc) and deadline.expired():
                seen = describe(last) if last is not None else "nothing (API unreachable)"
                raise WaitTimeout(f"{deadline.what}: no answer within {deadline.seconds:.0f} s; "
                                  f"last seen: {seen}; last error: {_short(exc)}") from None
            raise
        if done(value):
            return value
        last = value
        if deadline.expired():
            raise WaitTimeout(f"{deadline.what}: not done within {deadline.seconds:.0f} s; "
                              f"last seen: {describe(value)}")
        time.sleep(min(interval, deadline.remaining()))


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"
