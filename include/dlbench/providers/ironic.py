"""Bare metal through OpenStack Ironic, standalone (metalsmith-style, no Nova).

Lifecycle of one node: an **allocation** picks a free node of the resource class (and traits) and
makes it ours (so two runs can never take the same node); we write our tags in the node's
``extra`` and the image in ``instance_info``; deploy with a **config drive** carrying the run's
SSH public key; poll until ``active`` (``deploy failed``/``error`` surface Ironic's
``last_error``). Release: drop our tags, undeploy, return once Ironic has taken the node over
(``cleaning`` or ``available``: never waiting for the cleaning), the allocation gone. Every
wait has a deadline and its own polling interval; transient API errors are retried (see
:mod:`dlbench.polling`).

This module is one provider of the machine lifecycle: :class:`IronicSettings` (what the request
says) and :class:`IronicDriver` (the :class:`~dlbench.providers.base.Driver` hooks). Failure
rule: :meth:`IronicDriver.create` releases what it allocated before it raises; everything after
(a failed deploy, SSH, prepare) is released by the generic lifecycle, by tag.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from dlbench.errors import NoCapacity, ProvisioningError, WaitTimeout
from dlbench.grammar import Checksum, Host, ImageSource, Name, ResourceClass, Trait
from dlbench.polling import Deadline, backoff, poll, poll_each, retry_call, retry_while
from dlbench.providers.base import (
    LEASE_KEY,
    TAG_KEYS,
    BootConfig,
    Demand,
    Instance,
    Tags,
    parallelism,
    resource_name,
)
from dlbench.providers.openstack import OpenStackDriver, OpenStackSettings
from dlbench.providers.settings import Runtime
from dlbench.providers.sweep import RELEASED_ELSEWHERE
from dlbench.workloads.result import Platform

log = logging.getLogger(__name__)


class IronicError(ProvisioningError):
    """Ironic refused or failed; the message carries Ironic's own ``last_error``."""


class IronicNoCapacity(IronicError, NoCapacity):
    """Too few nodes of the resource class can take the run; the message names every node that
    could not and why (maintenance, its provision state, held by another run...)."""

PROVIDER = "ironic"


class ProvisionState(StrEnum):
    """The node provision states this driver tells apart (a StrEnum: equal to the API's strings)."""

    ENROLL = "enroll"
    MANAGEABLE = "manageable"
    AVAILABLE = "available"
    DEPLOYING = "deploying"
    WAIT_CALL_BACK = "wait call-back"
    ACTIVE = "active"
    DEPLOY_FAILED = "deploy failed"
    ERROR = "error"
    DELETING = "deleting"
    CLEANING = "cleaning"
    CLEAN_WAIT = "clean wait"
    CLEAN_FAILED = "clean failed"
    INSPECT_FAILED = "inspect failed"
    RESCUE = "rescue"
    RESCUE_FAILED = "rescue failed"
    ADOPT_FAILED = "adopt failed"


class ProvisionTarget(StrEnum):
    """What a node is asked to become (``set_node_provision_state``'s target)."""

    ACTIVE = "active"
    """Deploy."""
    DELETED = "deleted"
    """Undeploy (cleaning, then ``available``)."""


class AllocationState(StrEnum):
    """An allocation's states: ``allocating`` until Ironic picked a node (``active``) or none (``error``)."""

    ALLOCATING = "allocating"
    ACTIVE = "active"
    ERROR = "error"


FAILED_STATES = frozenset({ProvisionState.DEPLOY_FAILED, ProvisionState.ERROR, ProvisionState.CLEAN_FAILED,
                           ProvisionState.INSPECT_FAILED})
STABLE_STATES = frozenset({ProvisionState.ACTIVE, ProvisionState.AVAILABLE, ProvisionState.MANAGEABLE,
                           ProvisionState.ENROLL, ProvisionState.DEPLOY_FAILED, ProvisionState.ERROR,
                           ProvisionState.CLEAN_FAILED, ProvisionState.INSPECT_FAILED, ProvisionState.RESCUE,
                           ProvisionState.RESCUE_FAILED, ProvisionState.ADOPT_FAILED})
"""States a node stays in until asked otherwise (anything else is on its way: let it settle)."""
DEPLOYING_STATES = frozenset({ProvisionState.DEPLOYING, ProvisionState.WAIT_CALL_BACK})
"""On the way from a deploy request to ``active`` or a failure."""
UNDEPLOYABLE = frozenset({ProvisionState.ACTIVE, ProvisionState.DEPLOY_FAILED, ProvisionState.ERROR,
                          ProvisionState.WAIT_CALL_BACK, ProvisionState.RESCUE, ProvisionState.RESCUE_FAILED})
RELEASED_STATES = frozenset({ProvisionState.AVAILABLE, ProvisionState.MANAGEABLE})
RELEASING_STATES = frozenset({ProvisionState.CLEANING, ProvisionState.CLEAN_WAIT})
"""Undeployed, Ironic cleaning it (locked by its conductor): no longer a run's, not yet free."""
UNDEPLOYED = RELEASING_STATES | {ProvisionState.DELETING}
"""An undeploy is under way or done and Ironic owns the node (locked by its conductor): whoever
finds a node here after reading it deployed, did not release it itself."""
UNDEPLOY_PENDING = frozenset({ProvisionState.ACTIVE, ProvisionState.DELETING})
"""An undeploy was accepted but Ironic has not torn the node down yet (a release waits for this only)."""
OPERATOR_STATES = frozenset({ProvisionState.ENROLL, ProvisionState.MANAGEABLE, ProvisionState.DEPLOY_FAILED,
                             ProvisionState.ERROR, ProvisionState.CLEAN_FAILED, ProvisionState.INSPECT_FAILED,
                             ProvisionState.RESCUE, ProvisionState.RESCUE_FAILED, ProvisionState.ADOPT_FAILED})
"""States of a node no allocation will leave by itself: only an operator makes it ``available`` again."""


class NodeUse(StrEnum):
    """What a node of the resource class is to a run that wants nodes (the capacity messages' words)."""

    FREE = "free"
    """``available``, not in maintenance, carries the traits, nobody holds it: an allocation may take it now."""
    HELD = "held"
    """Another allocation or instance holds it, or it is on its way between states: free once that ends."""
    UNUSABLE = "not usable"
    """Needs an operator (maintenance, a failed or unmanaged state) or lacks a requested trait."""


def node_use(node: Any, traits: list[str] | tuple[str, ...] = ()) -> tuple[NodeUse, str]:
    """(use, why) of one Ironic node for a run asking for ``traits``: why says what Ironic says
    about it (maintenance and its reason, provision state and ``last_error``, the holder), so a
    capacity message names the cause instead of a bare count."""
    if node.is_maintenance:
        reason = f" ({node.maintenance_reason!r})" if node.maintenance_reason else ""
        return NodeUse.UNUSABLE, f"in maintenance{reason}"
    missing = sorted(set(traits) - set(node.traits or []))
    if missing:
        return NodeUse.UNUSABLE, f"lacks trait(s) {', '.join(missing)}"
    state = node.provision_state
    if node.allocation_id or node.instance_id:
        tags = Tags.from_dict(node.extra)
        holder = (f"run {tags.run_id}" if tags else f"allocation {node.allocation_id}" if node.allocation_id
                  else f"instance {node.instance_id}")
        return NodeUse.HELD, f"held by {holder}"
    if state == ProvisionState.AVAILABLE:
        if node.reservation:
            return NodeUse.HELD, f"locked by conductor {node.reservation} (an operation in progress)"
        return NodeUse.FREE, "free"
    if state in OPERATOR_STATES:
        error = f": {node.last_error}" if node.last_error else ""
        return NodeUse.UNUSABLE, f"provision state {state}{error} (an operator must make it available)"
    if state == ProvisionState.ACTIVE:
        return NodeUse.UNUSABLE, "active without an allocation (deployed outside Ironic's allocations)"
    return NodeUse.HELD, f"provision state {state} (on its way: usable once it is available)"


def describe_node(node: Any, why: str) -> str:
    """``<name>: <why> [<provision state>, <power state>]``: one node in a capacity message."""
    power = node.power_state or "power state unknown"
    return f"{node.name or node.id}: {why} [{node.provision_state or 'no provision state'}, {power}]"


def capacity_text(nodes: list[Any], traits: list[str] | tuple[str, ...] = ()) -> tuple[int, int, str]:
    """(nodes that can serve a run now or once released, nodes free now, the others named with why)
    for the nodes of a resource class."""
    usable = free = 0
    others = []
    for node in sorted(nodes, key=lambda n: str(n.name or n.id)):
        use, why = node_use(node, traits)
        usable += use is not NodeUse.UNUSABLE
        free += use is NodeUse.FREE
        if use is not NodeUse.FREE:
            others.append(describe_node(node, why))
    return usable, free, "; ".join(others)
NO_CAPACITY = ("no available nodes", "no nodes", "not found any", "no suitable nodes",
               "none of the requested nodes are available", "could not reserve any of",
               "filtered out during reservation")
"""Ironic's words (ironic/conductor/allocations.py) for "no free node right now", each leading to
the wait for capacity: none `available` in the resource class (the first three), none of those
with the traits (``no suitable nodes have the requested traits``), none of the candidates; and
the two ways an allocation loses a race with another one: ``could not reserve any of N suitable
nodes`` (every candidate was locked by a concurrent allocation through Ironic's retries: two
runs started together, issue 38) and ``all nodes were filtered out during reservation`` (another
allocation took them first). A node that can never serve the run (maintenance, wrong class) is
refused before provisioning by the capacity check, so waiting here is only ever for nodes that
can come free."""


def is_no_capacity(error: str) -> bool:
    """Whether an allocation's ``last_error`` is one of Ironic's :data:`NO_CAPACITY` answers."""
    return any(word in error.lower() for word in NO_CAPACITY)


ALLOCATE_BACKOFF_CAP_S = 10.0
"""Longest pause (before jitter) between two tries of a run's whole set of allocations."""
NODE_HISTORY_MICROVERSION = "1.78"
"""The Bare Metal API version that serves a node's history (Ironic 2023.1 and later)."""
DEPLOY_FAILURE_SETTLE_S = 10.0
"""After one node of a set failed to deploy, how long the others may take to fail too (or finish)
before the failure is reported, so that it names every failed node (they fail seconds apart)."""
LATE_LAST_ERROR_S = 3.0
LATE_LAST_ERROR_INTERVAL_S = 0.3
"""How long and how often a failed node's ``last_error`` is re-read when Ironic has not written it yet."""


_DONE, _GONE, _RELEASED = "done", "gone", "released elsewhere"
"""Outcomes of the waits after a refused call (anything else is the state that keeps it waiting)."""


def _accepted(action: Callable[[], Any], refusals: tuple[type[Exception], ...]) -> bool:
    """``action()`` -> True, or False when Ironic refused it with one of ``refusals``: a refusal
    comes back to the caller at once, where :func:`~dlbench.polling.retry_call` would retry a
    409 (a locked node) with backoff like any transient error."""
    try:
        action()
    except refusals:
        return False
    return True


class _ReleasedElsewhere(Exception):  # noqa: N818 - internal control flow, never leaves the driver
    """Another caller (a concurrent janitor sweep, the run's own teardown) released this node first."""


class _PartialAllocation(Exception):  # noqa: N818 - internal control flow, never leaves the driver
    def __init__(self, instances: list[Instance], error: BaseException, no_capacity: NoCapacity | None) -> None:
        super().__init__(str(error))
        self.instances, self.error, self.no_capacity = instances, error, no_capacity


class IronicSettings(OpenStackSettings):
    """Bare-metal nodes from Ironic (standalone, metalsmith-style: allocations, no Nova)."""

    name: Literal["ironic"] = "ironic"
    platforms: ClassVar[dict[Platform, Runtime]] = {
        Platform.BARE_METAL: "host", Platform.CONTAINER_ON_BARE_METAL: "docker"}

    resource_class: ResourceClass = "dlbench-bm"
    traits: list[Trait] = Field(default_factory=list)
    image_source: ImageSource = Field(default="dlbench-node", description="Glance image or URL to deploy")
    image_checksum: Checksum | None = None
    root_gb: int = Field(default=10, ge=1, le=100_000)
    address_source: Literal["extra", "port", "inventory"] = "extra"
    address_extra_key: Name = "test_host_address"
    inventory: dict[Name, Host] = Field(default_factory=dict, description="node name or uuid -> address")
    allocate_timeout: float = Field(default=120, gt=0, le=6 * 3600)

    @model_validator(mode="after")
    def _inventory(self) -> IronicSettings:
        if self.address_source == "inventory" and not self.inventory:
            raise ValueError("address_source inventory needs an inventory map (node name or uuid -> address)")
        return self


class IronicDriver(OpenStackDriver):
    """See the module docstring. The connection is opened on first use (lazily: the validate
    task's preflight and the janitor build drivers too)."""

    name = PROVIDER
    timing_phases = ("allocate", "deploy_to_active", "undeploy")

    spec: IronicSettings

    def __repr__(self) -> str:  # the connection object may know credentials: never print it
        return f"IronicDriver(resource_class={self.spec.resource_class!r})"

    @property
    def bm(self) -> Any:
        return self.conn.baremetal

    # -- preflight -----------------------------------------------------------------------------
    def matching_nodes(self) -> list[Any]:
        """Nodes of our resource class carrying every requested trait, not in maintenance."""
        nodes = self._call("list nodes",
                           lambda: list(self.bm.nodes(details=True, resource_class=self.spec.resource_class)))
        wanted = set(self.spec.traits)
        return [n for n in nodes if not n.is_maintenance and wanted <= set(n.traits or [])]

    def class_nodes(self) -> list[Any]:
        """Every node of our resource class, whatever its state (what capacity messages describe)."""
        return self._call("list nodes",
                          lambda: list(self.bm.nodes(details=True, resource_class=self.spec.resource_class)))

    def preflight(self, demands: list[Demand]) -> None:
        """Fail before provisioning when the resource class cannot ever hold the nodes: nodes
        held by other runs count (they come back), nodes that need an operator do not, and the
        message names each of those with its cause."""
        count = sum(d.count for d in demands)
        self.conn  # noqa: B018 - an unknown cloud or missing credentials raise CloudConfigError as is
        try:
            nodes = self.class_nodes()
        except Exception as exc:  # noqa: BLE001 - any failure here means: cannot reach the cloud
            raise IronicError(f"cannot list bare-metal nodes: {type(exc).__name__}: {exc}") from None
        traits = f" with traits {', '.join(self.spec.traits)}" if self.spec.traits else ""
        if not nodes:
            raise IronicError(f"ironic.resource_class: no nodes in resource class "
                              f"{self.spec.resource_class!r}")
        usable, _, others = capacity_text(nodes, self.spec.traits)
        if usable < count:
            raise IronicNoCapacity(f"ironic.nodes: the run needs {count} nodes but resource class "
                                   f"{self.spec.resource_class!r}{traits} has only {usable} usable of "
                                   f"{len(nodes)}; {others}")

    def capacity_now(self) -> str:
        """The resource class right now, for a message about too few free nodes: how many are
        free and every other node with why (never raises: it only explains another error)."""
        try:
            nodes = self.class_nodes()
        except Exception as exc:  # noqa: BLE001 - the caller's error is the one to raise
            return f"the nodes could not be listed ({type(exc).__name__}: {exc})"
        _, free, others = capacity_text(nodes, self.spec.traits)
        return f"{free} of {len(nodes)} node(s) free now" + (f"; {others}" if others else "")

    def needs_operator(self) -> list[str]:
        """The resource class's nodes that failed and that no allocation will ever take again
        (``clean failed`` after a run's release, ``error``...), each named with Ironic's
        ``last_error``: a release returns before cleaning ends, so the janitor reports these."""
        return [describe_node(n, f"provision state {n.provision_state}: {self.recorded_error(n) or 'no last_error'}")
                for n in sorted(self.class_nodes(), key=lambda n: str(n.name or n.id))
                if n.provision_state in FAILED_STATES and not n.allocation_id]

    def recorded_error(self, node: Any) -> str:
        """What Ironic said when the node failed: its ``last_error``, or, once Ironic cleared that
        (a failed cleaning's is gone about 20 s later, before any sweep reads it), the latest
        error event of the node's history (API 1.78: Ironic keeps every error there)."""
        if node.last_error:
            return str(node.last_error)
        try:
            response = self.bm.get(f"/nodes/{node.id}/history", microversion=NODE_HISTORY_MICROVERSION)
            response.raise_for_status()
            events = response.json().get("history") or []
        except Exception as exc:  # noqa: BLE001 - an older Ironic or a policy without history: say so, go on
            log.info("history of node %s not readable: %s", node.name or node.id, exc)
            return ""
        errors = [e for e in events if str(e.get("severity", "")).upper() == "ERROR" and e.get("event")]
        if not errors:
            return ""
        latest = max(errors, key=lambda e: str(e.get("created_at") or ""))
        return f"{latest['event']} (node history, {latest.get('created_at') or 'undated'})"

    # -- create / wait -------------------------------------------------------------------------
    def create(self, demand: Demand, tags: Tags, boot: BootConfig, deadline: Deadline) -> list[Instance]:
        """Allocate ``demand.count`` nodes (:meth:`allocate`: all or nothing, waiting for capacity)
        and start their deployment with a config drive carrying ``boot``. Releases its partial
        work on error."""
        instances = self.allocate(demand, tags, deadline)
        try:
            with ThreadPoolExecutor(max_workers=parallelism(len(instances)),
                                    thread_name_prefix="ironic-deploy") as pool:
                list(pool.map(lambda inst: self._deploy(inst, tags, boot), instances))
        except BaseException as exc:
            log.error("provisioning failed (%s); releasing %d allocation(s) made so far", exc, len(instances))
            self._release_quietly(instances)
            raise
        return instances

    def allocate(self, demand: Demand, tags: Tags, deadline: Deadline) -> list[Instance]:
        """Reserve ``demand.count`` nodes (Ironic allocations, nothing deployed yet).

        All or nothing: when the resource class runs out of free nodes half-way, or an allocation
        loses a race with another run's (:data:`NO_CAPACITY`), the allocations made so far are
        given back and the whole set is retried (jittered backoff) until ``allocate_timeout``, so
        two runs that each hold half of what they need cannot deadlock, and two runs started at
        the same moment wait for each other instead of failing. Releases its partial work on error."""
        allocate = Deadline(min(self.spec.allocate_timeout, max(deadline.remaining(), 0.1)),
                            f"allocating {demand.count} node(s) for run {tags.run_id}")
        instances: list[Instance] = []

        def allocate_all() -> list[Instance]:
            """One try at the whole set; a partial set is given back before NoCapacity asks for another."""
            nonlocal instances
            try:
                instances = self._allocate_all(demand, tags, allocate)
                return instances
            except _PartialAllocation as partial:
                instances = partial.instances  # released below, or before the next try
                capacity = partial.no_capacity
                if capacity is None:
                    raise partial.error from None
                self._release_quietly(instances)
                instances = []
                raise capacity from None

        def out_of_time(exc: Exception) -> IronicError:
            return IronicNoCapacity(f"{allocate.what}: not enough free nodes in resource class "
                                    f"{self.spec.resource_class!r} within {allocate.seconds:.0f} s: {exc}; "
                                    f"{self.capacity_now()}")

        try:
            return retry_while(
                allocate_all, lambda exc: isinstance(exc, NoCapacity), allocate,
                pause=lambda attempt: backoff(attempt, self.spec.poll_interval, ALLOCATE_BACKOFF_CAP_S),
                give_up=out_of_time,
                # Why it waits, node by node (e.g. "provision state cleaning (on its way...)": the
                # previous run's nodes still cleaning, or "allocated to run ...": a run started
                # beside this one; Ironic allocates only `available` nodes).
                on_retry=lambda exc, pause: log.info("not enough free nodes (%s): %s; retrying the whole set in "
                                                     "%.1f s", exc, self.capacity_now(), pause))
        except BaseException as exc:
            log.error("allocation failed (%s); releasing %d allocation(s) made so far", exc, len(instances))
            self._release_quietly(instances)
            raise

    def _allocate_all(self, demand: Demand, tags: Tags, deadline: Deadline) -> list[Instance]:
        """Every allocation of the demand at once (each its own request and poll, in parallel, so
        K nodes take about as long as one). Raises :class:`_PartialAllocation` carrying what was
        allocated when any of them fails."""
        names = [resource_name(tags.run_id, demand.role, index) for index in range(demand.count)]
        results: dict[str, Instance | BaseException] = {}

        def one(name: str) -> None:
            try:
                results[name] = self._allocate(name, tags, demand, deadline)
            except BaseException as exc:  # noqa: BLE001 - collected, re-raised by the caller's thread
                results[name] = exc

        with ThreadPoolExecutor(max_workers=parallelism(len(names)), thread_name_prefix="ironic-allocate") as pool:
            list(pool.map(one, names))
        made = [r for r in results.values() if isinstance(r, Instance)]
        errors = [r for r in results.values() if isinstance(r, BaseException)]
        if errors:
            capacity = next((e for e in errors if isinstance(e, NoCapacity)), None)
            other = next((e for e in errors if not isinstance(e, NoCapacity)), None)
            if other is not None:
                raise _PartialAllocation(made, other, None)
            raise _PartialAllocation(made, errors[0], capacity)  # every error is NoCapacity: errors[0] is capacity
        return [r for r in (results[name] for name in names) if isinstance(r, Instance)]  # in the names' order

    def _allocate(self, name: str, tags: Tags, demand: Demand, deadline: Deadline) -> Instance:
        started = time.monotonic()
        alloc = self._call("create allocation", self.bm.create_allocation, name=name,
                           resource_class=self.spec.resource_class, traits=list(self.spec.traits) or None,
                           extra=tags.as_dict())
        try:
            # Still `allocating` when the allocation time is up: Ironic placed it on no node in time.
            # To the run that is no capacity within its allocate_timeout (the caller then names every
            # node and why it could not be taken), not a bare timeout: on a busy conductor an
            # allocation that will fail for want of nodes stays `allocating` for seconds.
            alloc = poll(lambda: self.bm.get_allocation(alloc.id), lambda a: a.state != AllocationState.ALLOCATING,
                         deadline, self.spec.poll_interval, lambda a: f"state {a.state}",
                         give_up=lambda a: NoCapacity(
                             f"allocation {name} still {a.state} after {deadline.seconds:.0f} s: Ironic placed it "
                             "on no node in that time (no free node, or its conductor is slow to answer)"))
        except BaseException:
            self._call("delete allocation", self.bm.delete_allocation, alloc.id, ignore_missing=True)
            raise
        if alloc.state == AllocationState.ACTIVE:
            log.info("allocation %s -> node %s", name, alloc.node_id)
            return Instance(id=alloc.node_id, name=name, platform=demand.platform, provider=PROVIDER, tags=tags,
                            role=demand.role, details={"allocation_id": alloc.id, "node_id": alloc.node_id},
                            timings={"allocate": time.monotonic() - started})
        error = alloc.last_error or f"allocation ended in state {alloc.state}"
        self._call("delete allocation", self.bm.delete_allocation, alloc.id, ignore_missing=True)
        if is_no_capacity(error):
            raise NoCapacity(error)
        raise IronicError(f"allocation {name} failed: {error}")

    def _deploy(self, instance: Instance, tags: Tags, boot: BootConfig) -> None:
        node_id = instance.id
        instance_info = {"image_source": self.spec.image_source, "root_gb": str(self.spec.root_gb),
                         "display_name": instance.name, **tags.as_dict()}
        if self.spec.image_checksum:
            instance_info["image_checksum"] = self.spec.image_checksum
        patch = [{"op": "add", "path": f"/instance_info/{k}", "value": v} for k, v in instance_info.items()]
        patch += [{"op": "add", "path": f"/extra/{k}", "value": v} for k, v in tags.as_dict().items()]
        self._call("tag node", self.bm.patch_node, node_id, patch)
        config_drive = {
            "meta_data": {"uuid": node_id, "name": instance.name, "hostname": instance.name,
                          "public_keys": {boot.key_name: boot.public_key} if boot.public_key else {}},
            "user_data": boot.user_data or "#cloud-config\n{}\n",
        }
        instance.details["deploy_started"] = time.monotonic()
        self._call("deploy", self.bm.set_node_provision_state, node_id, ProvisionTarget.ACTIVE,
                   config_drive=config_drive, wait=False)
        log.info("deploying %s on node %s", instance.name, node_id)

    def wait_ready(self, instances: list[Instance], deadline: Deadline) -> list[Instance]:
        """Poll every node until ``active``; a failed node raises with its ``last_error`` (the
        lifecycle then releases the run)."""

        def deployed(inst: Instance, node: Any) -> bool:
            if node.provision_state == ProvisionState.ACTIVE:
                started = inst.details.get("deploy_started")  # set by _deploy
                inst.timings["deploy_to_active"] = time.monotonic() - started if isinstance(started, float) else 0.0
                inst.address = self.address_of(node)
                return True
            if node.provision_state in FAILED_STATES:
                raise IronicError(self._deploy_failures(instances, inst, node))
            return False

        poll_each(instances, lambda inst: self.bm.get_node(inst.id), deployed, deadline, self.spec.poll_interval,
                  what="deploy wait", timeout=lambda pending: f"deploy not active within {deadline.seconds:.0f} s: "
                  + ", ".join(i.name for i in pending))
        return instances

    def _deploy_failures(self, instances: list[Instance], first: Instance, node: Any) -> str:
        """Every failed node of the set, each with Ironic's ``last_error``: the first one found
        (``node``), then the others, each given :data:`DEPLOY_FAILURE_SETTLE_S` to leave its
        deploy states (nodes deployed together often fail together, seconds apart; naming only the
        first sent the operator to one node of several). Nodes still deploying are named as such."""
        failed = [(first, node, node.last_error or self._late_last_error(first.id))]
        others = [inst for inst in instances if inst is not first]
        last: dict[str, Any] = {}

        def settled(inst: Instance, now: Any) -> bool:
            last[inst.id] = now
            return now.provision_state not in DEPLOYING_STATES

        try:
            poll_each(others, lambda inst: self.bm.get_node(inst.id), settled,
                      Deadline(DEPLOY_FAILURE_SETTLE_S, "the other nodes after a failed deploy"),
                      self.spec.poll_interval, timeout=lambda pending: ", ".join(i.name for i in pending))
        except Exception as exc:  # noqa: BLE001 - the first failure is reported whatever this says
            log.info("after a failed deploy: %s", exc)
        deploying = []
        for inst in others:
            now = last.get(inst.id)
            if now is not None and now.provision_state in FAILED_STATES:
                failed.append((inst, now, now.last_error or self._late_last_error(inst.id)))
            elif now is not None and now.provision_state in DEPLOYING_STATES:
                deploying.append(f"{now.name or inst.id} ({inst.name})")
        named = "; ".join(f"node {n.name or i.id} ({i.name}): {n.provision_state}: {error or 'no last_error'}"
                          for i, n, error in failed)
        if len(failed) > 1:
            named = f"{len(failed)} of {len(instances)} nodes failed to deploy: {named}"
        return named + (f"; still deploying: {', '.join(deploying)}" if deploying else "")

    def _late_last_error(self, node_id: str) -> str:
        """Ironic may show ``deploy failed`` a moment before it writes ``last_error``: re-read."""
        try:
            node = poll(lambda: self._call("get node", self.bm.get_node, node_id), lambda n: bool(n.last_error),
                        Deadline(LATE_LAST_ERROR_S, f"last_error of node {node_id}"), LATE_LAST_ERROR_INTERVAL_S,
                        retry=False)
        except WaitTimeout:
            return ""
        return str(node.last_error)

    # -- addresses -----------------------------------------------------------------------------
    def address_of(self, node: Any) -> str:
        source = self.spec.address_source
        if source == "inventory":
            for key in (node.name, node.id):
                if key and key in self.spec.inventory:
                    return self.spec.inventory[key]
            raise IronicError(f"ironic.inventory has no address for node {node.name or node.id}")
        if source == "port":
            return self._port_address(node)
        value = (node.extra or {}).get(self.spec.address_extra_key)
        if not value:
            raise IronicError(f"node {node.name or node.id} has no extra.{self.spec.address_extra_key} "
                                    "(ironic.address_extra_key); set it or use address_source port/inventory")
        return str(value)

    def _port_address(self, node: Any) -> str:
        """A port's address: port ``extra.ip_address``, else the fixed IP of its Neutron VIF."""
        ports = self._call("list ports", lambda: list(self.bm.ports(details=True, node=node.id)))
        for port in ports:
            if (port.extra or {}).get("ip_address"):
                return str(port.extra["ip_address"])
        for port in ports:
            vif = (port.internal_info or {}).get("tenant_vif_port_id")
            if vif:
                fixed = self._call("get VIF port", self.conn.network.get_port, vif).fixed_ips or []
                if fixed:
                    return str(fixed[0]["ip_address"])
        raise IronicError(f"node {node.name or node.id}: no port carries an address (extra.ip_address or a VIF)")

    # -- delete / find -------------------------------------------------------------------------
    def delete(self, instances: list[Instance], deadline: Deadline) -> dict[str, float]:
        """Drop our tags -> undeploy -> wait until Ironic took it over (cleaning or ``available``)
        -> the allocation gone, all nodes in parallel (each within the deadline); see
        :meth:`_release_one`. Idempotent; seconds of undeploy per node id. A node another caller
        released meanwhile is marked ``details[RELEASED_ELSEWHERE]`` (a sweep reports it once)."""
        instances = list(instances)
        if not instances:
            return {}
        timings: dict[str, float] = {}
        errors: list[str] = []

        def one(inst: Instance) -> None:
            try:
                seconds = self._release_one(inst.id, str(inst.details.get("allocation_id") or ""),
                                            inst.tags.run_id, deadline)
                if seconds is not None:
                    timings[inst.id] = seconds
            except _ReleasedElsewhere:
                inst.details[RELEASED_ELSEWHERE] = True
                log.info("%s: already released by another caller", inst.name)
            except Exception as exc:  # noqa: BLE001 - release the others, then report all
                errors.append(f"{inst.name}: {exc}")

        with ThreadPoolExecutor(max_workers=parallelism(len(instances)), thread_name_prefix="ironic-release") as pool:
            list(pool.map(one, instances))
        if errors:
            raise IronicError("release incomplete: " + "; ".join(errors))
        return timings

    def _release_one(self, node_id: str, allocation_id: str, run_id: str, deadline: Deadline) -> float | None:
        """Give one node back: untag it, ask Ironic to undeploy it and return once Ironic has
        accepted (the node left ``deleting``: it cleans or is ``available``), then make sure the
        allocation is gone. Never waits for the cleaning (minutes on a real cloud, and Ironic, not
        us, owns the node from then: it deletes the allocation itself on tear-down and will not
        allocate the node before it is ``available``). Untagging comes first because a cleaning
        node is locked by its conductor (a PATCH then fails). Seconds of undeploy, or None when
        this call undeployed nothing; marks ``instance.details[RELEASED_ELSEWHERE]`` (through the
        caller) when another caller (a concurrent sweep) had already released it."""
        node = self._get_node(node_id, deadline) if node_id else None
        seconds = None
        if node is not None and self._ours(node, run_id, allocation_id):
            started = time.monotonic()
            if node.provision_state not in STABLE_STATES | UNDEPLOYABLE | UNDEPLOYED:  # e.g. deploying
                node = poll(lambda: self.bm.get_node(node_id),
                            lambda n: n.provision_state in STABLE_STATES | UNDEPLOYED,
                            deadline, self.spec.poll_interval, lambda n: f"state {n.provision_state}")
            if node.provision_state in UNDEPLOYED:
                raise _ReleasedElsewhere(node_id)  # undeployed by another caller: cleaning, locked
            self._untag(node, deadline)
            allocation_id = allocation_id or (node.allocation_id or "")
            if node.provision_state in UNDEPLOYABLE:
                self._undeploy(node, deadline)
                seconds = time.monotonic() - started
        if allocation_id and not self._delete_allocation(allocation_id, deadline) and seconds is None:
            raise _ReleasedElsewhere(node_id or allocation_id)
        return seconds

    def _undeploy(self, node: Any, deadline: Deadline) -> None:
        """Ask for ``deleted`` and wait until the node has left ``deleting`` (tear-down done,
        allocation deleted by Ironic). Another caller's undeploy winning the race is
        :class:`_ReleasedElsewhere`; a tear-down that failed (``error``) raises; a cleaning that
        already failed is logged for the operator (the node is no longer ours)."""
        from openstack import exceptions  # openstack: heavy, and only where a cloud is used

        name = node.name or node.id
        def undeploy() -> None:
            # The proxy's set_node_provision_state retries a 409 for ~15 s inside keystoneauth (409
            # is in its retriable codes, with no way to opt out): the same PUT, without that.
            response = self.bm.put(f"nodes/{node.id}/states/provision", json={"target": ProvisionTarget.DELETED.value},
                                   retriable_status_codes=[])
            exceptions.raise_from_response(response)

        refused = (exceptions.BadRequestException, exceptions.ConflictException)
        if not retry_call(lambda: _accepted(undeploy, refused), deadline, first_delay=self.spec.poll_interval,
                          what="undeploy"):
            self._after_conflict(node, undeploy, deadline, "undeploy")
        node = poll(lambda: self.bm.get_node(node.id), lambda n: n.provision_state not in UNDEPLOY_PENDING,
                    deadline, self.spec.poll_interval, lambda n: f"state {n.provision_state}")
        if node.provision_state == ProvisionState.CLEAN_FAILED:
            log.error("node %s: cleaning failed after our undeploy (%s); Ironic will not allocate it until an "
                      "operator makes it available", name, node.last_error or "no last_error")
        elif node.provision_state not in RELEASED_STATES | RELEASING_STATES:
            raise IronicError(f"node {name} undeploy ended in {node.provision_state}: "
                              f"{node.last_error or 'no last_error'}")
        log.info("node %s undeployed: %s (Ironic cleans it; it is free once available)", name, node.provision_state)

    def _delete_allocation(self, allocation_id: str, deadline: Deadline) -> bool:
        """Delete the allocation; False when it was already gone (Ironic's tear-down or another
        caller). Refused (409) while its node is locked: when another caller's undeploy holds the
        lock, Ironic deletes the allocation itself within the tear-down, so the allocation is
        watched (a read needs no lock) until it is gone or deletable, never retried through the
        lock, which lasts the whole cleaning (seen: a concurrent sweep held 15 s)."""
        from openstack import exceptions  # openstack: heavy, and only where a cloud is used

        def attempt() -> str:
            try:
                self.bm.delete_allocation(allocation_id, ignore_missing=False)
                return _DONE
            except exceptions.NotFoundException:
                return _GONE
            except exceptions.ConflictException:
                pass
            try:
                self.bm.get_allocation(allocation_id)
            except exceptions.NotFoundException:
                return _GONE
            return "refused: its node is locked"

        return poll(attempt, lambda outcome: outcome in (_DONE, _GONE), deadline, self.spec.poll_interval,
                    what=f"delete allocation {allocation_id}") == _DONE

    def _get_node(self, node_id: str, deadline: Deadline) -> Any:
        from openstack import exceptions  # openstack: heavy, and only where a cloud is used

        try:
            return retry_call(lambda: self.bm.get_node(node_id), deadline, first_delay=self.spec.poll_interval,
                              what="get node")
        except exceptions.NotFoundException:
            return None

    @staticmethod
    def _ours(node: Any, run_id: str, allocation_id: str) -> bool:
        """Only touch a node that carries this run's tags or holds this run's allocation."""
        tags = Tags.from_dict(node.extra)
        return bool((tags and tags.run_id == run_id) or (allocation_id and node.allocation_id == allocation_id))

    def _untag(self, node: Any, deadline: Deadline) -> None:
        """Drop our tags from ``extra`` (one replace of the whole dict, so a concurrent untag cannot
        make it fail as a JSON-patch remove of a missing key would) and a never-deployed node's
        ``instance_info`` (Ironic clears it itself on tear-down)."""
        extra = node.extra or {}
        patch = []
        if any(k in extra for k in TAG_KEYS):
            patch.append({"op": "replace", "path": "/extra",
                          "value": {k: v for k, v in extra.items() if k not in TAG_KEYS}})
        if node.provision_state == ProvisionState.AVAILABLE and node.instance_info:
            patch.append({"op": "remove", "path": "/instance_info"})
        if not patch:
            return
        from openstack import exceptions  # openstack: heavy, and only where a cloud is used

        # A conflict at once, not after the SDK's own ~15 s of retries nor retry_call's backoff on a
        # 409: it may be another caller's undeploy, whose lock lasts the whole cleaning.
        untag = lambda: self.bm.patch_node(node.id, patch, retry_on_conflict=False)  # noqa: E731
        if not retry_call(lambda: _accepted(untag, (exceptions.ConflictException,)), deadline,
                          first_delay=self.spec.poll_interval, what="untag node"):
            self._after_conflict(node, untag, deadline, "untag node")

    def _after_conflict(self, node: Any, action: Callable[[], Any], deadline: Deadline, what: str) -> None:
        """``action`` was refused (node locked, or not in a state that allows it). Whose lock? An
        undeploy another caller started (a concurrent sweep, the run's own teardown) shows as the
        node leaving ``active`` for ``deleting``/``cleaning``, where its conductor keeps the lock
        for the whole cleaning: that is :class:`_ReleasedElsewhere`, at once, instead of waiting
        the cleaning out (seen: 17.7 s for a 15 s cleaning). The lock is taken a moment before the
        state changes, so the node is watched until it either moves (released elsewhere) or is
        unlocked and still ``active`` (a short lock, a power sync: ``action`` again). A node we read
        deployed that is ``available`` already was cleaned after another caller's undeploy."""
        from openstack import exceptions  # openstack: heavy, and only where a cloud is used

        node_id = node.id
        undeployed = UNDEPLOYED | RELEASED_STATES if node.provision_state in UNDEPLOYABLE else UNDEPLOYED

        def settle() -> str:
            now = self.bm.get_node(node_id)
            if now.provision_state in undeployed:
                return _RELEASED
            if now.reservation:
                return f"locked by {now.reservation} in state {now.provision_state}"
            try:
                action()
            except (exceptions.BadRequestException, exceptions.ConflictException) as exc:
                return f"{what} refused in state {now.provision_state}: {exc}"
            return _DONE

        if poll(settle, lambda outcome: outcome in (_RELEASED, _DONE), deadline, self.spec.poll_interval,
                what=f"{what} of node {node.name or node_id}") == _RELEASED:
            raise _ReleasedElsewhere(node_id)

    def _release_quietly(self, instances: list[Instance]) -> None:
        try:
            self.delete(instances, Deadline(min(600.0, max(60.0, self.spec.allocate_timeout)), "release after failure"))
        except Exception as exc:  # noqa: BLE001 - the original error is what the caller must see
            log.error("partial release failed (the janitor will retry by tag): %s", exc)

    def renew(self, instances: list[Instance], until: datetime) -> None:
        """The lease lives in node ``extra`` (always writable, also on an active node)."""
        value = until.astimezone(UTC).isoformat()
        for inst in instances:
            if inst.id:
                self._call("renew lease", self.bm.patch_node, inst.id,
                           [{"op": "add", "path": f"/extra/{LEASE_KEY}", "value": value}])

    def find(self, run_id: str | None = None) -> dict[str, list[Instance]]:
        """Our resources by run id (allocations and nodes by their extra tags); untagged
        resources are never listed. A node's tags (which carry the renewed lease) win over its
        allocation's."""
        by_run: dict[str, dict[str, Instance]] = {}
        for alloc in self._call("list allocations", lambda: list(self.bm.allocations())):
            tags = Tags.from_dict(alloc.extra)
            if tags is None or (run_id and tags.run_id != run_id):
                continue
            key = alloc.node_id or f"allocation:{alloc.id}"
            by_run.setdefault(tags.run_id, {})[key] = Instance(
                id=alloc.node_id or "", name=alloc.name or alloc.id, platform="", provider=PROVIDER, tags=tags,
                details={"allocation_id": alloc.id})
        for node in self._call("list nodes", lambda: list(self.bm.nodes(details=True))):
            tags = Tags.from_dict(node.extra)
            if tags is None or (run_id and tags.run_id != run_id):
                continue
            known = by_run.setdefault(tags.run_id, {})
            if node.id not in known:
                known[node.id] = Instance(id=node.id, name=node.name or node.id, platform="", provider=PROVIDER,
                                          tags=tags, details={"allocation_id": node.allocation_id or ""})
            else:
                known[node.id].tags = tags
        return {run: list(items.values()) for run, items in by_run.items()}
