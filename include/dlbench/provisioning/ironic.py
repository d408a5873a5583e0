"""Bare metal through OpenStack Ironic, standalone (metalsmith-style, no Nova).

Lifecycle of one node: an **allocation** picks a free node of the resource class (and traits) and
makes it ours (so two runs can never take the same node); we write our tags in the node's
``extra`` and the image in ``instance_info``; deploy with a **config drive** carrying the run's
SSH public key; poll until ``active`` (``deploy failed``/``error`` surface Ironic's
``last_error``). Release: undeploy (``deleted`` -> ``available``), drop our tags, delete the
allocation. Every wait has a deadline and its own polling interval; transient API errors are
retried (see :mod:`dlbench.provisioning.polling`).

Failure rule (Airflow 3 does not run a teardown whose setup failed): :meth:`IronicProvisioner.create`
and :meth:`IronicProvisioner.wait` release everything they were given before they raise.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dlbench.provisioning.base import Instance, Provisioner, RunIsActive, SweepAction, Tags, resource_name
from dlbench.provisioning.polling import Deadline, WaitTimeout, poll, retry_call

log = logging.getLogger(__name__)

PROVIDER = "ironic"
FAILED_STATES = frozenset({"deploy failed", "error", "clean failed", "inspect failed"})
STABLE_STATES = frozenset({"active", "available", "manageable", "enroll", "deploy failed", "error",
                           "clean failed", "inspect failed", "rescue", "rescue failed", "adopt failed"})
UNDEPLOYABLE = frozenset({"active", "deploy failed", "error", "wait call-back", "rescue", "rescue failed"})
NO_CAPACITY = ("no available nodes", "no nodes", "not found any")


class ProvisioningError(RuntimeError):
    """Ironic refused or failed; the message carries Ironic's own ``last_error``."""


class NoCapacity(ProvisioningError):
    """No free node matches right now (others hold them); worth retrying until the deadline."""


@dataclass
class IronicSpec:
    """What to ask Ironic for; mirrors :class:`dlbench.config.IronicSettings` (no secrets)."""

    resource_class: str = "dlbench-bm"
    traits: list[str] = field(default_factory=list)
    image_source: str = "dlbench-bare-metal-image"
    image_checksum: str | None = None
    root_gb: int = 10
    address_source: str = "extra"
    address_extra_key: str = "test_host_address"
    inventory: dict[str, str] = field(default_factory=dict)
    poll_interval: float = 1.0
    allocate_timeout: float = 120
    api_retry_seconds: float = 120

    @classmethod
    def from_settings(cls, settings: Any) -> IronicSpec:
        return cls(**{k: getattr(settings, k) for k in cls.__dataclass_fields__ if hasattr(settings, k)})


class IronicProvisioner(Provisioner):
    """See the module docstring. ``conn`` is an openstacksdk Connection (:mod:`dlbench.hooks.openstack`)."""

    provider = PROVIDER

    def __init__(self, conn: Any, spec: IronicSpec | None = None) -> None:
        self.conn = conn
        self.spec = spec or IronicSpec()
        self.last_undeploy: dict[str, float] = {}

    def __repr__(self) -> str:  # the connection object may know credentials: never print it
        return f"IronicProvisioner(resource_class={self.spec.resource_class!r})"

    # -- API access with retries --------------------------------------------------------------
    @property
    def bm(self) -> Any:
        return self.conn.baremetal

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return retry_call(lambda: fn(*args, **kwargs), Deadline(self.spec.api_retry_seconds, what),
                          first_delay=self.spec.poll_interval, what=what)

    # -- preflight -----------------------------------------------------------------------------
    def matching_nodes(self) -> list[Any]:
        """Nodes of our resource class carrying every requested trait, not in maintenance."""
        nodes = self._call("list nodes",
                           lambda: list(self.bm.nodes(details=True, resource_class=self.spec.resource_class)))
        wanted = set(self.spec.traits)
        return [n for n in nodes if not n.is_maintenance and wanted <= set(n.traits or [])]

    def preflight(self, count: int) -> None:
        """Fail before provisioning when the resource class cannot ever hold ``count`` nodes."""
        try:
            nodes = self.matching_nodes()
        except Exception as exc:  # noqa: BLE001 - any failure here means: cannot reach the cloud
            raise ProvisioningError(f"cannot list bare-metal nodes: {type(exc).__name__}: {exc}") from None
        traits = f" with traits {', '.join(self.spec.traits)}" if self.spec.traits else ""
        if not nodes:
            raise ProvisioningError(f"ironic.resource_class: no nodes in resource class "
                                    f"{self.spec.resource_class!r}{traits}")
        if len(nodes) < count:
            raise ProvisioningError(f"ironic.nodes: the run needs {count} nodes but resource class "
                                    f"{self.spec.resource_class!r}{traits} has only {len(nodes)}")

    # -- create / wait -------------------------------------------------------------------------
    def create(self, count: int, tags: Tags, **spec: object) -> list[Instance]:
        """Allocate ``count`` nodes and start their deployment (config drive from ``spec``:
        ``public_key``, ``user_data``, ``role``, ``platform``). Releases its partial work on error.

        All or nothing: when the resource class runs out of free nodes half-way, the allocations
        made so far are given back and the whole set is retried (jittered backoff) until
        ``allocate_timeout``, so two runs that each hold half of what they need cannot deadlock."""
        role = str(spec.get("role", "bm"))
        platform = str(spec.get("platform", "bare_metal"))
        deadline = Deadline(self.spec.allocate_timeout, f"allocating {count} node(s) for run {tags.run_id}")
        instances: list[Instance] = []
        try:
            attempt = 0
            while True:
                attempt += 1
                try:
                    for index in range(count):
                        instances.append(self._allocate(resource_name(tags.run_id, role, index), tags, platform,
                                                        deadline))
                    break
                except NoCapacity as exc:
                    self.delete(instances, timeout=max(60.0, self.spec.allocate_timeout))
                    instances = []
                    pause = min(self.spec.poll_interval * 2 ** min(attempt, 5), 10.0) * random.uniform(0.5, 1.5)
                    if deadline.remaining() <= pause:
                        raise ProvisioningError(f"{deadline.what}: not enough free nodes in resource class "
                                                f"{self.spec.resource_class!r} within {deadline.seconds:.0f} s "
                                                f"(other runs hold them): {exc}") from None
                    log.info("not enough free nodes (%s); retrying the whole set in %.1f s", exc, pause)
                    time.sleep(pause)
            for instance in instances:
                self._deploy(instance, tags, str(spec.get("public_key", "")), str(spec.get("user_data", "")))
        except BaseException as exc:
            log.error("provisioning failed (%s); releasing %d allocation(s) made so far", exc, len(instances))
            self._release_quietly(instances, tags)
            raise
        return instances

    def _allocate(self, name: str, tags: Tags, platform: str, deadline: Deadline) -> Instance:
        started = time.monotonic()
        alloc = self._call("create allocation", self.bm.create_allocation, name=name,
                           resource_class=self.spec.resource_class, traits=list(self.spec.traits) or None,
                           extra=tags.as_dict())
        try:
            alloc = poll(lambda: self.bm.get_allocation(alloc.id), lambda a: a.state != "allocating",
                         deadline, self.spec.poll_interval, lambda a: f"state {a.state}")
        except BaseException:
            self._call("delete allocation", self.bm.delete_allocation, alloc.id, ignore_missing=True)
            raise
        if alloc.state == "active":
            log.info("allocation %s -> node %s", name, alloc.node_id)
            return Instance(id=alloc.node_id, name=name, platform=platform, provider=PROVIDER, tags=tags,
                            details={"allocation_id": alloc.id, "node_id": alloc.node_id,
                                     "timings": {"allocate": time.monotonic() - started}})
        error = alloc.last_error or f"allocation ended in state {alloc.state}"
        self._call("delete allocation", self.bm.delete_allocation, alloc.id, ignore_missing=True)
        if any(word in error.lower() for word in NO_CAPACITY):
            raise NoCapacity(error)
        raise ProvisioningError(f"allocation {name} failed: {error}")

    def _deploy(self, instance: Instance, tags: Tags, public_key: str, user_data: str) -> None:
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
                          "public_keys": {"dlbench": public_key} if public_key else {}},
            "user_data": user_data or "#cloud-config\n{}\n",
        }
        instance.details["deploy_started"] = time.monotonic()
        self._call("deploy", self.bm.set_node_provision_state, node_id, "active", config_drive=config_drive, wait=False)
        log.info("deploying %s on node %s", instance.name, node_id)

    def wait(self, instances: list[Instance], timeout: float) -> list[Instance]:
        """Poll every node until ``active``; a failed node raises with its ``last_error`` after
        every given instance has been released."""
        try:
            deadline = Deadline(timeout, f"deploy of {len(instances)} node(s)")
            pending = {inst.id: inst for inst in instances}
            while pending:
                for node_id, inst in list(pending.items()):
                    node = retry_call(lambda n=node_id: self.bm.get_node(n), deadline,
                                      first_delay=self.spec.poll_interval, what="deploy wait")
                    if node.provision_state == "active":
                        started = float(inst.details.get("deploy_started", time.monotonic()))
                        inst.details.setdefault("timings", {})["deploy_to_active"] = time.monotonic() - started
                        inst.address = self.address_of(node)
                        del pending[node_id]
                    elif node.provision_state in FAILED_STATES:
                        raise ProvisioningError(f"node {node.name or node_id} ({inst.name}): "
                                                f"{node.provision_state}: {node.last_error or 'no last_error'}")
                if pending:
                    if deadline.expired():
                        states = ", ".join(f"{i.name}" for i in pending.values())
                        raise WaitTimeout(f"deploy not active within {timeout:.0f} s: {states}")
                    time.sleep(min(self.spec.poll_interval, deadline.remaining()))
        except BaseException as exc:
            log.error("deploy failed (%s); releasing all %d node(s) of this step", exc, len(instances))
            self._release_quietly(instances, instances[0].tags if instances else None)
            raise
        return instances

    # -- addresses -----------------------------------------------------------------------------
    def address(self, instance: Instance) -> str:
        if instance.address:
            return instance.address
        return self.address_of(self._call("get node", self.bm.get_node, instance.id))

    def address_of(self, node: Any) -> str:
        source = self.spec.address_source
        if source == "inventory":
            for key in (node.name, node.id):
                if key and key in self.spec.inventory:
                    return self.spec.inventory[key]
            raise ProvisioningError(f"ironic.inventory has no address for node {node.name or node.id}")
        if source == "port":
            return self._port_address(node)
        value = (node.extra or {}).get(self.spec.address_extra_key)
        if not value:
            raise ProvisioningError(f"node {node.name or node.id} has no extra.{self.spec.address_extra_key} "
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
        raise ProvisioningError(f"node {node.name or node.id}: no port carries an address (extra.ip_address or a VIF)")

    # -- delete / sweep ------------------------------------------------------------------------
    def delete(self, instances: Iterable[Instance], timeout: float) -> None:
        """Undeploy -> ``available`` -> drop our tags -> delete the allocation. Idempotent."""
        deadline = Deadline(timeout, "release")
        errors = []
        for inst in instances:
            try:
                self._release_one(inst.id, str(inst.details.get("allocation_id") or ""), inst.tags.run_id, deadline)
            except Exception as exc:  # noqa: BLE001 - release the others, then report all
                errors.append(f"{inst.name}: {exc}")
        if errors:
            raise ProvisioningError("release incomplete: " + "; ".join(errors))

    def _release_one(self, node_id: str, allocation_id: str, run_id: str, deadline: Deadline) -> None:
        node = self._get_node(node_id, deadline) if node_id else None
        if node is not None and self._ours(node, run_id, allocation_id):
            started = time.monotonic()
            if node.provision_state not in STABLE_STATES | UNDEPLOYABLE:  # e.g. deploying: let it settle
                node = poll(lambda: self.bm.get_node(node_id), lambda n: n.provision_state in STABLE_STATES,
                            deadline, self.spec.poll_interval, lambda n: f"state {n.provision_state}")
            if node.provision_state in UNDEPLOYABLE:
                retry_call(lambda: self.bm.set_node_provision_state(node_id, "deleted", wait=False), deadline,
                           first_delay=self.spec.poll_interval, what="undeploy")
                node = poll(lambda: self.bm.get_node(node_id),
                            lambda n: n.provision_state in ("available", "manageable", "clean failed", "error"),
                            deadline, self.spec.poll_interval, lambda n: f"state {n.provision_state}")
                self.last_undeploy[node_id] = time.monotonic() - started
                if node.provision_state not in ("available", "manageable"):
                    raise ProvisioningError(f"node {node.name or node_id} undeploy ended in {node.provision_state}: "
                                            f"{node.last_error or 'no last_error'}")
            self._untag(node, deadline)
            allocation_id = allocation_id or (node.allocation_id or "")
        if allocation_id:
            retry_call(lambda: self.bm.delete_allocation(allocation_id, ignore_missing=True), deadline,
                       first_delay=self.spec.poll_interval, what="delete allocation")

    def _get_node(self, node_id: str, deadline: Deadline) -> Any:
        from openstack import exceptions

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
        patch = [{"op": "remove", "path": f"/extra/{k}"} for k in Tags("x").as_dict() if k in (node.extra or {})]
        if node.provision_state == "available" and node.instance_info:
            patch.append({"op": "remove", "path": "/instance_info"})
        if patch:
            retry_call(lambda: self.bm.patch_node(node.id, patch), deadline, first_delay=self.spec.poll_interval,
                       what="untag node")

    def _release_quietly(self, instances: list[Instance], tags: Tags | None) -> None:
        try:
            self.delete(instances, timeout=max(600.0, self.spec.allocate_timeout))
        except Exception as exc:  # noqa: BLE001 - the original error is what the caller must see
            log.error("partial release failed (the janitor will retry by tag): %s", exc)

    def owned(self, run_id: str | None = None) -> dict[str, list[Instance]]:
        """Our resources by run id (nodes by extra tags, allocations by extra tags); untagged
        resources are never listed."""
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
        return {run: list(items.values()) for run, items in by_run.items()}

    def release_run(self, run_id: str, timeout: float) -> list[str]:
        """Release every resource tagged with ``run_id`` (the teardown; works with no targets)."""
        instances = self.owned(run_id).get(run_id, [])
        self.delete(instances, timeout)
        return [i.name for i in instances]

    def sweep(self, is_active: RunIsActive, now: datetime | None = None, dry_run: bool = False,
              timeout: float = 1800) -> list[SweepAction]:
        now = now or datetime.now(UTC)
        actions = []
        for instances in self.owned().values():
            tags = min((i.tags for i in instances), key=lambda t: t.expires_at)
            if tags.expired(now):
                reason = f"expired at {tags.expires_at.isoformat()}"
            elif not is_active(tags):
                reason = f"DAG run {tags.dag_id}/{tags.dag_run_id} is no longer running"
            else:
                continue
            error = ""
            if not dry_run:
                try:
                    self.delete(instances, timeout)
                except Exception as exc:  # noqa: BLE001 - reported per resource, the sweep goes on
                    error = str(exc)
            for inst in instances:
                actions.append(SweepAction(resource_id=inst.id or str(inst.details.get("allocation_id")),
                                           name=inst.name, reason=reason, released=not dry_run and not error,
                                           error=error))
        return actions
