"""The one small provisioning interface every platform driver implements.

Modelled on metalsmith's provisioner: ``create`` reserves and starts instances, ``wait``
blocks until they are usable, ``address`` says how to reach one, ``delete`` releases, and
``sweep`` finds what belongs to us and has expired or lost its DAG run. Every resource carries
:class:`Tags` (run id, DAG run, expiry) so that the janitor can find it and never touches
anything that is not ours.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

RESOURCE_PREFIX = "dlbench"
DEFAULT_EXPIRY = timedelta(hours=6)
"""How long a run's resources live before the janitor may release them (unless the run says otherwise)."""
TAG_KEY = "dlbench"


@dataclass(frozen=True)
class Tags:
    """What we write on every resource we create."""

    run_id: str
    dag_id: str = ""
    dag_run_id: str = ""
    expires_at: datetime = field(default_factory=lambda: datetime.now(UTC) + DEFAULT_EXPIRY)

    def as_dict(self) -> dict[str, str]:
        return {
            TAG_KEY: "1",
            "dlbench_run_id": self.run_id,
            "dlbench_dag_id": self.dag_id,
            "dlbench_dag_run_id": self.dag_run_id,
            "dlbench_expires_at": self.expires_at.astimezone(UTC).isoformat(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, object] | None) -> Tags | None:
        """The tags on a resource, or None when it is not ours."""
        if not data or str(data.get(TAG_KEY)) != "1" or not data.get("dlbench_run_id"):
            return None
        try:
            expires = datetime.fromisoformat(str(data["dlbench_expires_at"]))
        except (KeyError, ValueError):
            expires = datetime.fromtimestamp(0, UTC)  # unreadable expiry: treat as expired
        return cls(
            run_id=str(data["dlbench_run_id"]),
            dag_id=str(data.get("dlbench_dag_id", "")),
            dag_run_id=str(data.get("dlbench_dag_run_id", "")),
            expires_at=expires,
        )

    def expired(self, now: datetime | None = None) -> bool:
        return (now or datetime.now(UTC)) >= self.expires_at


def resource_name(run_id: str, role: str, index: int) -> str:
    """``dlbench-<run>-<role>-<n>``: readable in any cloud console, unique per run."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in run_id)[:40]
    return f"{RESOURCE_PREFIX}-{safe}-{role}-{index}"


@dataclass
class Instance:
    """A provisioned machine (or container host) that jobs can target."""

    id: str
    name: str
    platform: str
    provider: str
    tags: Tags
    address: str | None = None
    details: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepAction:
    resource_id: str
    name: str
    reason: str
    released: bool
    error: str = ""


RunIsActive = Callable[[Tags], bool]


class Provisioner(abc.ABC):
    """create -> wait -> address -> (benchmark) -> delete; sweep for leftovers."""

    provider: str = ""

    @abc.abstractmethod
    def create(self, count: int, tags: Tags, **spec: object) -> list[Instance]:
        """Reserve and start ``count`` instances. Undo partial work before raising."""

    @abc.abstractmethod
    def wait(self, instances: list[Instance], timeout: float) -> list[Instance]:
        """Block until every instance is usable; raise with the cloud's own error otherwise."""

    @abc.abstractmethod
    def address(self, instance: Instance) -> str:
        """Where to reach the instance (IP or host name)."""

    @abc.abstractmethod
    def delete(self, instances: Iterable[Instance], timeout: float) -> None:
        """Release the instances and wait until they are gone. Idempotent."""

    @abc.abstractmethod
    def sweep(self, is_active: RunIsActive, now: datetime | None = None, dry_run: bool = False) -> list[SweepAction]:
        """Release our resources that expired or whose run is no longer active."""
