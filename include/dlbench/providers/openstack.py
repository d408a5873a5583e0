"""What every OpenStack driver shares: one connection, opened on first use, and API calls
retried on transient errors (5xx, connection refused or reset) until ``api_retry_seconds``.

The connection opens lazily because the validate task's preflight and the janitor build drivers
too; it is guarded by a lock because the lease thread and the lifecycle share it.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import Field, model_validator

from dlbench.grammar import AbsolutePath, Name
from dlbench.hooks.openstack import resolve
from dlbench.polling import Deadline, retry_call
from dlbench.providers.base import Driver
from dlbench.providers.settings import MachineSettings


class OpenStackSettings(MachineSettings):
    """Machines from an OpenStack cloud: a clouds.yaml cloud or an Airflow connection."""

    cloud: Name | None = Field(default=None, description="clouds.yaml cloud name")
    conn_id: Name | None = Field(default=None, description="Airflow connection (conn_type openstack); wins over cloud")
    clouds_file: AbsolutePath | None = Field(default=None, description="clouds.yaml path (default: standard places)")
    api_retry_seconds: float = Field(default=120, gt=0, le=3600,
                                     description="s to retry an API call that fails transiently (5xx, refused)")

    def location(self) -> str:
        return self.conn_id or self.cloud or ""

    @model_validator(mode="after")
    def _cloud_named(self) -> OpenStackSettings:
        if not self.cloud and not self.conn_id:
            raise ValueError("set cloud (a clouds.yaml cloud name) or conn_id (an Airflow connection id)")
        return self

    def connect(self) -> object:
        """An openstacksdk Connection (raises CloudConfigError for an unknown cloud or missing
        credentials, before any API call)."""
        spec = resolve(None if self.conn_id else self.cloud, conn_id=self.conn_id, config_file=self.clouds_file)
        return spec.connect()


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
