"""What every OpenStack driver shares: one connection, opened on first use, and API calls
retried on transient errors (5xx, connection refused or reset) until ``api_retry_seconds``.

The connection opens lazily because the validate task's preflight and the janitor build drivers
too; it is guarded by a lock because the lease thread and the lifecycle share it.
"""

from __future__ import annotations

import threading
from typing import Any

from dlbench.provisioning.base import Driver
from dlbench.provisioning.polling import Deadline, retry_call
from dlbench.provisioning.settings import OpenStackSettings


class OpenStackDriver(Driver):
    """Base of the Ironic and Nova drivers (openstacksdk)."""

    def __init__(self, settings: OpenStackSettings, conn: Any = None) -> None:
        self.spec = settings
        self._conn = conn
        self._lock = threading.Lock()

    @property
    def conn(self) -> Any:
        with self._lock:
            if self._conn is None:
                self._conn = self.spec.connect()
            return self._conn

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return retry_call(lambda: fn(*args, **kwargs), Deadline(self.spec.api_retry_seconds, what),
                          first_delay=self.spec.poll_interval, what=what)
