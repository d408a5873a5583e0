"""The one small provisioning interface every platform driver implements.

Modelled on metalsmith's provisioner and PerfKit Benchmarker's resource lifecycle:
``preflight`` checks the cloud before anything is made, ``create`` reserves and starts machines
(undoing its own partial work), ``wait_ready`` blocks until they are usable, ``delete`` releases
and returns per-instance timings, and ``find`` lists what belongs to us by tag (release by tag,
the janitor). Every resource carries :class:`Tags` (run id, DAG run, expiry) so that the janitor
can find it and never touches anything that is not ours.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import ClassVar, Literal

from dlbench import settings
from dlbench.polling import Deadline
from dlbench.settings import DEFAULT_EXPIRY

RESOURCE_PREFIX = "dlbench"
TAG_KEY = "dlbench"
LEASE_KEY = "dlbench_lease_until"
TAG_KEYS = (TAG_KEY, "dlbench_run_id", "dlbench_dag_id", "dlbench_dag_run_id", "dlbench_expires_at", LEASE_KEY)
"""Every key we may write on a resource (what a release removes again)."""

PARALLELISM_ENV = settings.PROVISION_THREADS.env


def parallelism(count: int, *, strict: bool = False) -> int:
    """Threads for a per-machine phase (allocate, deploy, make ready, release) of ``count`` machines.

    One per machine up to a cap, so a 100-node fleet does not open 100 API sessions and SSH
    handshakes at once from one worker: ``DLBENCH_PROVISION_THREADS`` (default 16, 1-256) in the
    worker's environment. One place for the cap, read at each phase, so every driver and the
    lifecycle agree. A value that is not a whole number in range raises naming the variable when
    ``strict`` (the lifecycle's preflight, before anything exists); a release never fails on it:
    it logs and uses the default (:func:`dlbench.settings.provision_threads`).
    """
    return max(1, min(settings.provision_threads(strict=strict), count))


@dataclass(frozen=True)
class Tags:
    """What we write on every resource we create."""

    run_id: str
    dag_id: str = ""
    dag_run_id: str = ""
    expires_at: datetime = field(default_factory=lambda: datetime.now(UTC) + DEFAULT_EXPIRY)
    lease_until: datetime | None = None
    """Renewed by the run's live tasks (:mod:`dlbench.providers.leases`): past it, nothing of the run
    is alive and the janitor releases the resource, whatever Airflow's metadata says."""

    def as_dict(self) -> dict[str, str]:
        tags = {
            TAG_KEY: "1",
            "dlbench_run_id": self.run_id,
            "dlbench_dag_id": self.dag_id,
            "dlbench_dag_run_id": self.dag_run_id,
            "dlbench_expires_at": self.expires_at.astimezone(UTC).isoformat(),
        }
        if self.lease_until is not None:
            tags[LEASE_KEY] = self.lease_until.astimezone(UTC).isoformat()
        return tags

    @classmethod
    def from_dict(cls, data: dict[str, object] | None) -> Tags | None:
        """The tags on a resource, or None when it is not ours."""
        if not data or str(data.get(TAG_KEY)) != "1" or not data.get("dlbench_run_id"):
            return None
        try:
            expires = datetime.fromisoformat(str(data["dlbench_expires_at"]))
        except (KeyError, ValueError):
            expires = datetime.fromtimestamp(0, UTC)  # unreadable expiry: treat as expired
        lease = None
        if data.get(LEASE_KEY):
            try:
                lease = datetime.fromisoformat(str(data[LEASE_KEY]))
            except ValueError:
                lease = datetime.fromtimestamp(0, UTC)  # unreadable lease: lapsed
        return cls(
            run_id=str(data["dlbench_run_id"]),
            dag_id=str(data.get("dlbench_dag_id", "")),
            dag_run_id=str(data.get("dlbench_dag_run_id", "")),
            expires_at=expires,
            lease_until=lease,
        )

    def expired(self, now: datetime | None = None) -> bool:
        return (now or datetime.now(UTC)) >= self.expires_at


def resource_name(run_id: str, role: str, index: int) -> str:
    """``dlbench-<run>-<role>-<n>``: readable in any cloud console, unique per run."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in run_id)[:40]
    return f"{RESOURCE_PREFIX}-{safe}-{role}-{index}"


@dataclass
class Instance:
    """A provisioned machine that jobs can target. ``details`` and ``timings`` are JSON-able."""

    id: str
    name: str
    platform: str
    provider: str
    tags: Tags
    role: str = ""
    address: str | None = None
    details: dict[str, object] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    """Provisioning phases measured by the driver (s), named by the driver (e.g. ``allocate``)."""


@dataclass(frozen=True)
class Demand:
    """``count`` machines in role ``role`` (a short name part: ``bm``, ``vm``...) for ``platform``.

    ``placement`` is what the run's scenarios need from the cloud's scheduler: ``spread`` (one
    machine per host: the distributed scenario's roles must not share a hypervisor), ``pack``
    (on one host), or ``""`` (no preference). Drivers whose machines are whole hosts ignore it."""

    role: str
    platform: str
    count: int
    placement: Literal["", "spread", "pack"] = ""
    ports: tuple[tuple[str, int, int], ...] = ()
    """(protocol, from, to) the run's machines must reach each other on beyond what a provider
    opens for every run (the run's own profile's distributed port: a user profile may choose
    any): a cloud with a firewall between machines opens them for the run."""


@dataclass(frozen=True)
class BootConfig:
    """What every machine of the run boots with: the run's public key and cloud-init user data."""

    public_key: str
    user_data: str = ""
    key_name: str = "dlbench"


@dataclass(frozen=True)
class SweepAction:
    resource_id: str
    name: str
    reason: str
    released: bool
    error: str = ""
    run_id: str = ""
    dag_id: str = ""
    dag_run_id: str = ""
    """The Airflow DAG run the resource was made for (its tags): the janitor marks it failed when it
    released the run's resources while Airflow still shows it running."""


RunIsActive = Callable[[Tags], bool]

HOST_ID = "host_id"
"""``Instance.details`` key a driver fills with the physical host under a virtual machine (Nova's
``hostId``): instances with the same value share a host (the shared-resource scenario's pair)."""


class Driver(abc.ABC):
    """One cloud's machines behind the one lifecycle (PerfKit's BaseResource, metalsmith's API).

    The generic lifecycle (:class:`dlbench.providers.machines.MachineBackend`) owns run keys,
    rollback, reachability, the prepare stage, timings and release by tag; a driver only fills in
    these hooks. No other driver method is called by generic code.
    """

    name: ClassVar[str] = ""
    timing_phases: ClassVar[tuple[str, ...]] = ()
    """The phases this driver measures, in order (document it for the warehouse)."""

    @abc.abstractmethod
    def preflight(self, demands: list[Demand]) -> None:
        """Raise (naming the settings field) when the cloud can never satisfy ``demands``:
        unknown cloud, missing credentials, too few machines of the kind. Provisions nothing."""

    @abc.abstractmethod
    def create(self, demand: Demand, tags: Tags, boot: BootConfig, deadline: Deadline) -> list[Instance]:
        """Reserve and start ``demand.count`` machines, named with :func:`resource_name` and
        tagged with ``tags``. Undo its own partial work before raising."""

    @abc.abstractmethod
    def wait_ready(self, instances: list[Instance], deadline: Deadline) -> list[Instance]:
        """Block until every instance is up and has an address; raise with the cloud's own
        error otherwise (the lifecycle releases)."""

    @abc.abstractmethod
    def delete(self, instances: list[Instance], deadline: Deadline) -> dict[str, float]:
        """Release the instances and wait until gone; seconds per instance id. Idempotent."""

    @abc.abstractmethod
    def renew(self, instances: list[Instance], until: datetime) -> None:
        """Write the lease ``until`` on the instances' tags (the run is alive until then)."""

    def needs_operator(self) -> list[str]:
        """This cloud's machines that failed where only an operator can give them back (Ironic's
        ``clean failed`` after a release), each named with the cloud's own reason: the janitor
        reports them. A cloud whose released machines simply disappear has none."""
        return []

    @abc.abstractmethod
    def find(self, run_id: str | None = None) -> dict[str, list[Instance]]:
        """Our resources (by tag) grouped by run id; only ``run_id``'s when given. Never lists
        anything without our tag."""
