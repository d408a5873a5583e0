"""Virtual machines through OpenStack Nova (openstacksdk's compute, image and network proxies).

Per run, created in this order and deleted in the reverse one:

1. a **security group** ``dlbench-<run>``: SSH from ``ssh_cidr`` and the benchmark ports (the
   network suite's iperf3 pair, every built-in profile's distributed port and the run's own
   (:attr:`Demand.ports`: a user profile's), the collectives' ports, ICMP) *from the group
   itself only*, so a run's instances reach each other and nothing else does (enforced by the
   devcloud's Neutron with OVN, tests/nova/test_security_group.py). It is created first
   and deleted last and carries the run's :class:`~dlbench.providers.base.Tags` (Neutron tags
   + its description) and the lease: whatever else of a run is left, the janitor finds its tags
   there;
2. a **keypair** ``dlbench-<run>`` with the run's public key (Nova keypairs have no tags: found
   by name, deleted with the run's security group);
3. a **server group** ``dlbench-<run>-<role>-group`` when placement asks for one
   (``anti-affinity`` for the distributed scenario: one role per hypervisor; ``affinity`` to pack
   the shared-resource scenario's VMs on one hypervisor);
4. the **servers** ``dlbench-<run>-<role>-<n>``: metadata = the tags, server tags ``dlbench`` and
   ``dlbench-run-<run>`` (listable by tag), the network, the group as scheduler hint, user data.

Own polling with deadlines (openstacksdk's ``wait_for_server`` waits 120 s and knows only
ERROR): a server in ERROR raises with its ``fault`` message; NoValidHost and quota refusals are
explained (which quota, how many the run needs); 5xx and connection errors are retried with
backoff, 4xx are not (:mod:`dlbench.polling`). Timings (the PKB convention, a
planner's figure in its own right): ``create_to_active`` here, ``reachable_over_ssh`` /
``prepare`` by the generic lifecycle, ``delete`` (request -> gone) here.

GPUs by PCI passthrough: a flavor whose extra spec ``pci_passthrough:alias`` names an alias the
operator defined in nova.conf (``[pci] alias = {"name": "a100", "vendor_id": "10de",
"product_id": "20b0", "device_type": "type-PCI"}`` on the API and compute nodes, plus
``[pci] device_spec`` on the computes; docs/nova.md). The GPU the guest sees is recorded by the
workload's environment probe in every result document.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from dlbench.errors import ProvisioningError
from dlbench.execution.peer import SERVING_PORT
from dlbench.grammar import AbsolutePath, Name
from dlbench.polling import Deadline, poll, poll_each, retry_call
from dlbench.providers.base import (
    HOST_ID,
    LEASE_KEY,
    RESOURCE_PREFIX,
    BootConfig,
    Demand,
    Instance,
    Tags,
    parallelism,
    resource_name,
)
from dlbench.providers.openstack import OpenStackDriver, OpenStackSettings
from dlbench.providers.settings import Runtime
from dlbench.workloads.micro.network import DEFAULT_PORT
from dlbench.workloads.profiles import load_profiles
from dlbench.workloads.result import Platform

log = logging.getLogger(__name__)


class NovaError(ProvisioningError):
    """Nova refused or failed; the message carries Nova's own words (fault, quota, NoValidHost)."""

PROVIDER = "nova"
SERVER_TAG = RESOURCE_PREFIX
"""Every server of ours carries this Nova server tag (and ``dlbench-run-<run>``)."""
KIND = "kind"
"""``Instance.details[KIND]``: ``server`` or one of the run's supporting resources."""
SUPPORT_KINDS = ("server_group", "keypair", "security_group")
"""Deleted in this order, after the servers."""
Placement = Literal["auto", "none", "anti-affinity", "affinity", "soft-anti-affinity", "soft-affinity"]
DELETE_ERROR_GRACE_S = 30.0
"""A server in ERROR while being deleted fails the delete only after this long (Nova may still retry it)."""


class ServerStatus(StrEnum):
    """The server statuses this driver tells apart (a StrEnum: equal to the API's strings)."""

    BUILD = "BUILD"
    ACTIVE = "ACTIVE"
    ERROR = "ERROR"


class TaskState(StrEnum):
    """A server's ``OS-EXT-STS:task_state`` this driver tells apart."""

    DELETING = "deleting"


class ImageStatus(StrEnum):
    """Glance's image statuses this driver tells apart."""

    ACTIVE = "active"


class NovaSettings(OpenStackSettings):
    """Virtual machines from Nova; containers on VMs run on the VMs' own Docker engine."""

    name: Literal["nova"] = "nova"
    platforms: ClassVar[dict[Platform, Runtime]] = {
        Platform.VIRTUAL_MACHINE: "host", Platform.CONTAINER_ON_VM: "docker"}

    flavor: Name | None = Field(default=None, description="flavor name or id for every platform")
    flavors: dict[Platform, Name] = Field(default_factory=dict, description="flavor per platform (wins over flavor)")
    vcpus: int = Field(default=2, ge=1, le=1024, description="without a flavor: the smallest flavor with this many")
    ram_mb: int = Field(default=2048, ge=64, le=16 * 1024 * 1024)
    disk_gb: int = Field(default=10, ge=0, le=100_000)
    gpus: int = Field(  # type: ignore[assignment]  # Nova's own count (PCI passthrough); allot() takes an int too
        default=0, ge=0, le=16, description="PCI-passthrough GPUs per VM (flavor alias count)")
    gpu_alias: Name | None = Field(default=None, description="the nova.conf [pci] alias name of the GPUs")
    image: Name = Field(default="dlbench-node", description="Glance image name or id")
    image_file: AbsolutePath | None = Field(
        default=None, description="upload this disk image as `image` when Glance has none by that name (kept)")
    image_disk_format: Literal["qcow2", "raw"] = "qcow2"
    network: Name | None = Field(default=None, description="network name or id (default: the project's only one)")
    floating_ip_network: Name | None = Field(default=None, description="external network for a floating IP per VM")
    ssh_cidr: str = Field(default="0.0.0.0/0", pattern=r"^[0-9a-fA-F:.]+/\d{1,3}$",
                          description="who may SSH to the VMs (the Airflow workers' addresses)")
    placement: Placement = Field(
        default="auto", description="server group policy; auto: anti-affinity for the distributed scenario, "
        "none otherwise")
    config_drive: bool = Field(default=False, description="ask for a config drive (clouds without metadata service)")

    @model_validator(mode="after")
    def _gpu_alias(self) -> NovaSettings:
        if self.gpus and not self.gpu_alias and not (self.flavor or self.flavors):
            raise ValueError("nova.gpus needs nova.gpu_alias (the nova.conf [pci] alias) or a GPU flavor in "
                             "nova.flavor / nova.flavors")
        return self

    def flavor_for(self, platform: Platform) -> str | None:
        return self.flavors.get(platform) or self.flavor


COLLECTIVE_PORTS = (32768, 60999)
"""Linux's default ephemeral port range (``net.ipv4.ip_local_port_range``). PyTorch DDP (Gloo,
NCCL) and jax.distributed connect each pair of processes on ports the kernel picks from it,
besides the rendezvous port: a distributed PyTorch or JAX job between VMs needs it open between
the run's instances (only between them: the rule's remote is the run's own group)."""


def benchmark_ports() -> list[tuple[str, int, int]]:
    """(protocol, from, to) the run's instances open to each other: the network suite's iperf3
    server pair, the serving suite's server (its load generator on another instance), every
    profile's distributed role port and the collectives' ephemeral ports (one source for each fact)."""
    ports = {("tcp", DEFAULT_PORT, DEFAULT_PORT + 1), ("udp", DEFAULT_PORT, DEFAULT_PORT + 1),
             ("tcp", *COLLECTIVE_PORTS), ("tcp", SERVING_PORT, SERVING_PORT)}
    for profile in load_profiles().values():
        port = profile.scenarios.distributed.port
        ports.add(("tcp", port, port))
    return sorted(ports)


def support_name(run_id: str) -> str:
    """``dlbench-<run>``: the run's security group and keypair."""
    return resource_name(run_id, "run", 0).removesuffix("-run-0")


class NovaDriver(OpenStackDriver):
    """See the module docstring. The connection opens on first use (preflight, janitor)."""

    name = PROVIDER
    timing_phases = ("create_to_active", "delete")

    spec: NovaSettings

    def __init__(self, settings: NovaSettings, conn: Any = None) -> None:
        super().__init__(settings, conn)
        self._support_lock = threading.Lock()
        self._resolved: dict[str, Any] = {}

    def __repr__(self) -> str:  # the connection may know credentials: never print it
        return f"NovaDriver(image={self.spec.image!r}, network={self.spec.network!r})"

    # -- names the request gives -> cloud objects ------------------------------------------------
    def _flavor(self, platform: Platform) -> Any:
        key = f"flavor:{platform.value}"
        if key not in self._resolved:
            self._resolved[key] = self._pick_flavor(platform)
        return self._resolved[key]

    def _pick_flavor(self, platform: Platform) -> Any:
        flavors = self._call("list flavors", lambda: list(self.conn.compute.flavors(details=True)))
        wanted = self.spec.flavor_for(platform)
        field = f"nova.flavors.{platform.value}" if platform in self.spec.flavors else "nova.flavor"
        if wanted:
            for flavor in flavors:
                if wanted in (flavor.name, flavor.id):
                    return flavor
            raise NovaError(f"{field}: no flavor {wanted!r} (flavors: {_names(flavors)})")
        fits = [f for f in flavors if f.vcpus >= self.spec.vcpus and f.ram >= self.spec.ram_mb
                and (f.disk or 0) >= self.spec.disk_gb and self._gpus_of(f) >= self.spec.gpus
                and (self.spec.gpus or not self._gpus_of(f))]
        if not fits:
            gpus = f", {self.spec.gpus} x {self.spec.gpu_alias} GPU" if self.spec.gpus else ""
            raise NovaError(f"nova.vcpus/ram_mb/disk_gb/gpus: no flavor has {self.spec.vcpus} vCPUs, "
                            f"{self.spec.ram_mb} MB RAM, {self.spec.disk_gb} GB disk{gpus} "
                            f"(flavors: {_describe_flavors(flavors)})")
        return min(fits, key=lambda f: (self._gpus_of(f), f.vcpus, f.ram, f.disk or 0))

    def _gpus_of(self, flavor: Any) -> int:
        """GPUs a flavor passes through: the count of our alias in ``pci_passthrough:alias``
        (``a100:2`` or ``a100:1,t4:1``); any alias when ``gpu_alias`` is unset."""
        spec = str((flavor.extra_specs or {}).get("pci_passthrough:alias", ""))
        total = 0
        for part in filter(None, (p.strip() for p in spec.split(","))):
            alias, _, count = part.partition(":")
            if self.spec.gpu_alias in (None, alias):
                total += int(count or 1)
        return total

    def _image(self) -> Any:
        if "image" not in self._resolved:
            image = self._call("find image", self.conn.image.find_image, self.spec.image, ignore_missing=True)
            if image is None and self.spec.image_file:
                image = self._upload_image()
            if image is None:
                images = self._call("list images", lambda: list(self.conn.image.images()))
                raise NovaError(f"nova.image: no image {self.spec.image!r} in Glance (images: {_names(images)}); "
                                "set nova.image_file to upload one (docs/vm-image.md)")
            if image.status != ImageStatus.ACTIVE:
                raise NovaError(f"nova.image: image {self.spec.image!r} is {image.status}, not active")
            self._resolved["image"] = image
        return self._resolved["image"]

    def _upload_image(self) -> Any:
        """The project's VM image into Glance once (kept for later runs, tagged, never swept)."""
        log.info("uploading %s to Glance as %s", self.spec.image_file, self.spec.image)
        started = time.monotonic()
        image = self.conn.image.create_image(
            name=self.spec.image, filename=str(self.spec.image_file), disk_format=self.spec.image_disk_format,
            container_format="bare", tags=[f"{RESOURCE_PREFIX}-image"], wait=True, timeout=1800)
        log.info("image %s uploaded in %.0f s", image.id, time.monotonic() - started)
        return image

    def _network(self) -> Any:
        if "network" not in self._resolved:
            networks = self._call("list networks", lambda: list(self.conn.network.networks()))
            if self.spec.network:
                found = [n for n in networks if self.spec.network in (n.name, n.id)]
                if not found:
                    raise NovaError(f"nova.network: no network {self.spec.network!r} (networks: {_names(networks)})")
            else:
                found = [n for n in networks if not n.is_router_external]
                if len(found) != 1:
                    raise NovaError(f"nova.network: the project has {len(found)} networks; name one "
                                    f"(networks: {_names(networks)})")
            self._resolved["network"] = found[0]
        return self._resolved["network"]

    # -- preflight ------------------------------------------------------------------------------
    def preflight(self, demands: list[Demand]) -> None:
        """Names, then quota: an unknown flavor/image/network or a quota the run exceeds is named
        before anything is created."""
        self.conn  # noqa: B018 - an unknown cloud or missing credentials raise CloudConfigError as is
        try:
            self._image()
            self._network()
            if self.spec.floating_ip_network:
                self._external_network()
            flavors = {Platform(d.platform): self._flavor(Platform(d.platform)) for d in demands}
            limits = self._call("read limits", self.conn.compute.get_limits).absolute
        except NovaError:
            raise
        except Exception as exc:  # noqa: BLE001 - any other failure here means: cannot use the cloud
            raise NovaError(f"cannot read the cloud: {type(exc).__name__}: {_first_line(exc)}") from None
        count = sum(d.count for d in demands)
        cores = sum(d.count * flavors[Platform(d.platform)].vcpus for d in demands)
        ram = sum(d.count * flavors[Platform(d.platform)].ram for d in demands)
        for what, need, limit, used in (("instances", count, limits.instances, limits.instances_used),
                                        ("cores", cores, limits.total_cores, limits.total_cores_used),
                                        ("ram (MB)", ram, limits.total_ram, limits.total_ram_used)):
            if limit is not None and limit >= 0 and need > limit - (used or 0):
                raise NovaError(f"nova quota: the run needs {need} {what} but the project has "
                                f"{max(limit - (used or 0), 0)} of {limit} left; lower nova.nodes or ask for "
                                "a larger quota")

    def _external_network(self) -> Any:
        if "external" not in self._resolved:
            name = self.spec.floating_ip_network
            net = self._call("find network", self.conn.network.find_network, name, ignore_missing=True)
            if net is None:
                raise NovaError(f"nova.floating_ip_network: no network {name!r}")
            self._resolved["external"] = net
        return self._resolved["external"]

    # -- create ---------------------------------------------------------------------------------
    def create(self, demand: Demand, tags: Tags, boot: BootConfig, deadline: Deadline) -> list[Instance]:
        """The run's support resources (once per run), then ``demand.count`` create requests; the
        wait is :meth:`wait_ready`. Deletes its own servers before raising."""
        platform = Platform(demand.platform)
        flavor, image, network = self._flavor(platform), self._image(), self._network()
        group, keypair, secgroup = self._support(demand, tags, boot)
        user_data = base64.b64encode((boot.user_data or "#cloud-config\n{}\n").encode()).decode()
        metadata = tags.as_dict()
        instances: list[Instance] = []
        try:
            for index in range(demand.count):
                name = resource_name(tags.run_id, demand.role, index)
                attrs: dict[str, Any] = dict(
                    name=name, flavor_id=flavor.id, image_id=image.id, networks=[{"uuid": network.id}],
                    key_name=keypair, security_groups=[{"name": secgroup}], user_data=user_data, metadata=metadata,
                    tags=[SERVER_TAG, f"{SERVER_TAG}-run-{tags.run_id}"[:60]])
                if self.spec.config_drive:
                    attrs["config_drive"] = True
                if group is not None:
                    attrs["scheduler_hints"] = {"group": group.id}
                started = time.monotonic()
                server = self._call("create server", self.conn.compute.create_server, **attrs)
                instances.append(Instance(
                    id=server.id, name=name, platform=demand.platform, provider=PROVIDER, tags=tags, role=demand.role,
                    details={KIND: "server", "flavor": flavor.name, "image": image.name, "network": network.name,
                             "server_group": group.name if group is not None else "",
                             "placement": group.policy if group is not None else "none",
                             "create_started": started,
                             # recorded in every result document of the VM (the lifecycle passes them on)
                             "labels": {"flavor": flavor.name, "image": image.name,
                                        "placement": group.policy if group is not None else "none"}}))
        except BaseException as exc:  # noqa: BLE001 - cleaned up, then re-raised (explained when a quota)
            log.error("creating servers failed (%s); deleting the %d created so far", _first_line(exc),
                      len(instances))
            self._delete_quietly(instances)
            raise _explained(exc) from None
        return instances

    def _support(self, demand: Demand, tags: Tags, boot: BootConfig) -> tuple[Any, str, str]:
        """(server group or None, keypair name, security group name), made once per run."""
        with self._support_lock:
            name = support_name(tags.run_id)
            secgroup = self._security_group(name, tags, demand.ports)
            keypair = self._call("find keypair", self.conn.compute.find_keypair, name, ignore_missing=True)
            if keypair is None:
                self._call("create keypair", self.conn.compute.create_keypair, name=name, public_key=boot.public_key,
                           type="ssh")
            policy = self._policy(demand)
            group = None
            if policy != "none":
                group_name = f"{resource_name(tags.run_id, demand.role, 0).removesuffix('-0')}-group"
                group = self._call("find server group", self.conn.compute.find_server_group, group_name,
                                   ignore_missing=True)
                if group is None:
                    group = self._call("create server group", self.conn.compute.create_server_group,
                                       name=group_name, policy=policy)
            return group, name, secgroup.name

    def _policy(self, demand: Demand) -> str:
        if self.spec.placement != "auto":
            return self.spec.placement
        return {"spread": "anti-affinity", "pack": "affinity"}.get(demand.placement, "none")

    def _security_group(self, name: str, tags: Tags, ports: tuple[tuple[str, int, int], ...]) -> Any:
        """The run's group, made by the first demand; a later demand's own ports (the run's
        distributed port) are added to it when missing."""
        net = self.conn.network
        found = [g for g in self._call("list security groups", lambda: list(net.security_groups(
            tags=_run_tag(tags.run_id)))) if g.name == name and Tags.from_dict(_tags_of(g)) is not None]
        if found:
            group = found[0]
            have = {(r["protocol"], r.get("port_range_min"), r.get("port_range_max"))
                    for r in group.security_group_rules if r.get("remote_group_id") == group.id}
            for proto, low, high in sorted(set(ports)):
                if (proto, low, high) not in have:
                    self._call("create security group rule", net.create_security_group_rule,
                               security_group_id=group.id, direction="ingress", ethertype="IPv4", protocol=proto,
                               port_range_min=low, port_range_max=high, remote_group_id=group.id)
            return group
        group = self._call("create security group", net.create_security_group, name=name,
                           description=_description(tags))
        try:
            self._call("tag security group", net.set_tags, group, _neutron_tags(tags))
            rules: list[dict[str, Any]] = [
                {"protocol": "tcp", "port_range_min": 22, "port_range_max": 22, "remote_ip_prefix": self.spec.ssh_cidr},
                {"protocol": "icmp", "remote_group_id": group.id}]
            rules += [{"protocol": proto, "port_range_min": low, "port_range_max": high, "remote_group_id": group.id}
                      for proto, low, high in sorted(set(benchmark_ports()) | set(ports))]
            for rule in rules:
                self._call("create security group rule", net.create_security_group_rule, security_group_id=group.id,
                           direction="ingress", ethertype="IPv4", **rule)
        except BaseException:
            self._call("delete security group", net.delete_security_group, group.id, ignore_missing=True)
            raise
        return group

    # -- wait -----------------------------------------------------------------------------------
    def wait_ready(self, instances: list[Instance], deadline: Deadline) -> list[Instance]:
        """Every server ACTIVE with an address (a floating IP when asked); ERROR raises with the
        server's fault (NoValidHost explained)."""

        def active(inst: Instance, server: Any) -> bool:
            if server.status == ServerStatus.ACTIVE:
                started = inst.details.pop("create_started", None)  # set by create
                inst.timings["create_to_active"] = time.monotonic() - started if isinstance(started, float) else 0.0
                inst.address = self._address(server, inst)
                inst.details.update({HOST_ID: server.host_id or "", "hypervisor": server.hypervisor_hostname or ""})
                return True
            if server.status == ServerStatus.ERROR:
                raise NovaError(f"server {inst.name}: ERROR: {_fault(server)}")
            return False

        servers = [inst for inst in instances if inst.details.get(KIND, "server") == "server"]
        poll_each(servers, lambda inst: self.conn.compute.get_server(inst.id), active, deadline,
                  self.spec.poll_interval, what="server wait",
                  timeout=lambda pending: f"servers not ACTIVE within {deadline.seconds:.0f} s: "
                  + ", ".join(i.name for i in pending))
        return instances

    def _address(self, server: Any, inst: Instance) -> str:
        network = self._network()
        fixed = [a["addr"] for a in (server.addresses or {}).get(network.name, [])
                 if a.get("OS-EXT-IPS:type", "fixed") == "fixed" and a.get("version", 4) == 4]
        if not fixed:
            raise NovaError(f"server {inst.name} is ACTIVE without an IPv4 address on {network.name}")
        inst.details["fixed_ip"] = fixed[0]
        if not self.spec.floating_ip_network:
            return fixed[0]
        net = self.conn.network
        port = next(iter(self._call("list ports", lambda: list(net.ports(device_id=server.id)))), None)
        if port is None:
            raise NovaError(f"server {inst.name} has no port for a floating IP")
        fip = self._call("create floating IP", net.create_ip, floating_network_id=self._external_network().id,
                         port_id=port.id, description=_description(inst.tags))
        self._call("tag floating IP", net.set_tags, fip, _neutron_tags(inst.tags))
        inst.details["floating_ip_id"] = fip.id
        return str(fip.floating_ip_address)

    # -- delete ---------------------------------------------------------------------------------
    def delete(self, instances: list[Instance], deadline: Deadline) -> dict[str, float]:
        """Servers (in parallel, each until gone), then, once a run has no server left, its
        floating IPs, server groups, keypair and security group. Idempotent; seconds per server."""
        servers = [i for i in instances if i.details.get(KIND, "server") == "server"]
        timings: dict[str, float] = {}
        errors: list[str] = []

        def one(inst: Instance) -> None:
            try:
                seconds = self._delete_server(inst, deadline)
                if seconds is not None:
                    timings[inst.id] = seconds
            except Exception as exc:  # noqa: BLE001 - delete the others, then report all
                errors.append(f"{inst.name}: {_first_line(exc)}")

        if servers:
            with ThreadPoolExecutor(max_workers=parallelism(len(servers)), thread_name_prefix="nova-delete") as pool:
                list(pool.map(one, servers))
        for run_id in sorted({i.tags.run_id for i in instances}):
            try:
                self._delete_support(run_id, deadline)
            except Exception as exc:  # noqa: BLE001 - reported with the rest
                errors.append(f"run {run_id} support resources: {_first_line(exc)}")
        if errors:
            raise NovaError("release incomplete: " + "; ".join(errors))
        return timings

    def _delete_server(self, inst: Instance, deadline: Deadline) -> float | None:
        from openstack import exceptions  # openstack: heavy, and only where a cloud is used

        compute = self.conn.compute

        def server_or_none() -> Any:
            try:
                return compute.get_server(inst.id)
            except exceptions.NotFoundException:
                return None

        server = retry_call(server_or_none, deadline, first_delay=self.spec.poll_interval, what="get server")
        if server is None:
            return None
        owner = Tags.from_dict(server.metadata)
        if owner is None or owner.run_id != inst.tags.run_id:
            raise NovaError(f"server {inst.id} does not carry run {inst.tags.run_id}'s tags: not touched")
        started = time.monotonic()
        retry_call(lambda: compute.delete_server(inst.id, ignore_missing=True), deadline,
                   first_delay=self.spec.poll_interval, what="delete server")

        def gone(current: Any) -> bool:
            if current is None:
                return True
            if (current.status == ServerStatus.ERROR and current.task_state != TaskState.DELETING
                    and time.monotonic() - started > DELETE_ERROR_GRACE_S):
                raise NovaError(f"server {inst.name} did not delete: ERROR: {_fault(current)}")
            return False

        poll(server_or_none, gone, deadline, self.spec.poll_interval, what="delete wait",
             timeout=lambda current: f"server {inst.name} not gone within {deadline.seconds:.0f} s "
             f"(status {current.status})")
        return time.monotonic() - started

    def _delete_support(self, run_id: str, deadline: Deadline) -> None:
        """A run's floating IPs, server groups, keypair, then security group, when none of its
        servers is left (another worker's release may still be deleting them)."""
        compute, net = self.conn.compute, self.conn.network
        if self._servers(run_id):
            log.info("run %s still has servers: its support resources stay for now", run_id)
            return
        prefix = support_name(run_id)
        for fip in self._call("list floating IPs", lambda: list(net.ips(tags=_run_tag(run_id)))):
            retry_call(functools.partial(net.delete_ip, fip, ignore_missing=True), deadline, what="delete floating IP")
        for group in self._call("list server groups", lambda: list(compute.server_groups())):
            if (group.name or "").startswith(f"{prefix}-") and (group.name or "").endswith("-group"):
                retry_call(functools.partial(compute.delete_server_group, group, ignore_missing=True), deadline,
                           what="delete server group")
        retry_call(lambda: compute.delete_keypair(prefix, ignore_missing=True), deadline, what="delete keypair")
        for group in self._call("list security groups", lambda: list(net.security_groups(tags=_run_tag(run_id)))):
            retry_call(functools.partial(net.delete_security_group, group, ignore_missing=True), deadline,
                       what="delete security group")

    def _delete_quietly(self, instances: list[Instance]) -> None:
        try:
            self.delete(instances, Deadline(300, "delete after a failed create"))
        except Exception as exc:  # noqa: BLE001 - the original error is what the caller must see
            log.error("cleanup after a failed create incomplete (the janitor will retry by tag): %s", exc)

    # -- leases and listing ---------------------------------------------------------------------
    def renew(self, instances: list[Instance], until: datetime) -> None:
        """The lease in every server's metadata and in the run's security group's tags."""
        value = until.astimezone(UTC).isoformat()
        for inst in instances:
            if inst.details.get(KIND, "server") == "server" and inst.id:
                self._call("renew lease", self.conn.compute.set_server_metadata, inst.id, **{LEASE_KEY: value})
        net = self.conn.network
        for run_id in {i.tags.run_id for i in instances}:
            for group in self._call("list security groups", lambda r=run_id: list(net.security_groups(
                    tags=_run_tag(r)))):
                tags = Tags.from_dict(_tags_of(group))
                if tags is not None:
                    renewed = dataclasses.replace(tags, lease_until=until)
                    self._call("renew lease", net.update_security_group, group,
                               description=_description(renewed))

    def _servers(self, run_id: str | None) -> list[Any]:
        tag = _run_tag(run_id) if run_id else SERVER_TAG
        return self._call("list servers", lambda: list(self.conn.compute.servers(details=True, tags=tag)))

    def find(self, run_id: str | None = None) -> dict[str, list[Instance]]:
        """Our servers (server tag + tags in metadata) and each run's support resources (its
        security group carries the run's tags; keypair and server groups by the run's name).
        Nothing without our tags is listed."""
        by_run: dict[str, list[Instance]] = {}
        for server in self._servers(run_id):
            tags = Tags.from_dict(server.metadata)
            if tags is None or (run_id and tags.run_id != run_id):
                continue
            by_run.setdefault(tags.run_id, []).append(Instance(
                id=server.id, name=server.name, platform="", provider=PROVIDER, tags=tags, details={KIND: "server"}))
        net = self.conn.network
        query = {"tags": _run_tag(run_id)} if run_id else {"tags": SERVER_TAG}
        for group in self._call("list security groups", lambda: list(net.security_groups(**query))):
            tags = Tags.from_dict(_tags_of(group))
            if tags is None or (run_id and tags.run_id != run_id):
                continue
            by_run.setdefault(tags.run_id, []).append(Instance(
                id=group.id, name=group.name, platform="", provider=PROVIDER, tags=tags,
                details={KIND: "security_group"}))
        return by_run


# -- helpers --------------------------------------------------------------------------------------

def _run_tag(run_id: str) -> str:
    return f"{SERVER_TAG}-run-{run_id}"[:60]


def _neutron_tags(tags: Tags) -> list[str]:
    return [SERVER_TAG, _run_tag(tags.run_id)]


DESCRIPTION_MAX = 255
"""Neutron's limit on a resource's description (neutron-lib's DESCRIPTION_FIELD_SIZE)."""


DESCRIPTION_KEYS: dict[str, str] = {"dlbench_run_id": "r", "dlbench_dag_id": "d", "dlbench_dag_run_id": "dr",
                    "dlbench_expires_at": "e", LEASE_KEY: "l"}
"""The tags' keys as a security group's description writes them: the long keys took 90 of
Neutron's 255 characters, so an ordinary Airflow DAG run id (``manual__<timestamp>``) did not fit
and a run whose security group alone was left could not be named to its DAG run (issue 38)."""


def _description(tags: Tags) -> str:
    """The run's tags as compact JSON (:data:`DESCRIPTION_KEYS`) within :data:`DESCRIPTION_MAX`
    (a real Neutron refuses a longer description with 400). When a very long DAG run id does not
    fit, it and then the DAG id are left out (the run id, expiry and lease, all the janitor needs
    to release, always stay; the servers' metadata keeps every tag)."""
    data = {DESCRIPTION_KEYS.get(k, k): v for k, v in tags.as_dict().items()}
    for dropped in ((), ("dr",), ("dr", "d")):
        text = json.dumps({k: v for k, v in data.items() if k not in dropped}, separators=(",", ":"))
        if len(text) <= DESCRIPTION_MAX:
            return text
    raise NovaError(f"run id {tags.run_id!r} ({len(tags.run_id)} characters) leaves no room for its expiry and "
                    f"lease in a Neutron description ({DESCRIPTION_MAX} characters): use a shorter run id")


def _tags_of(group: Any) -> dict[str, Any] | None:
    """Our tags from a security group's description (JSON, compact or with the tags' own keys as
    groups made before the compact form have it), or None."""
    try:
        data = json.loads(group.description or "")
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    long_keys = {short: key for key, short in DESCRIPTION_KEYS.items()}
    return {long_keys.get(str(k), str(k)): v for k, v in data.items()}


def _names(items: list[Any], limit: int = 20) -> str:
    names = sorted(str(getattr(i, "name", None) or i.id) for i in items)
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "") or "none"


def _describe_flavors(flavors: list[Any]) -> str:
    return ", ".join(f"{f.name} ({f.vcpus} vCPU, {f.ram} MB, {f.disk or 0} GB)" for f in flavors[:20]) or "none"


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:500] if lines else type(exc).__name__


def _fault(server: Any) -> str:
    fault = server.fault or {}
    message = str(fault.get("message") or "no fault recorded")
    if "no valid host" in message.lower():
        message += (" (the scheduler found no hypervisor with room: the cloud is full, or the server group's "
                    "policy cannot be met with this many VMs)")
    return message


def _explained(exc: BaseException) -> BaseException:
    """Quota refusals (403/413 "Quota exceeded for cores: Requested 4, but already used 8 of 10")
    get the field to change; every other error passes unchanged."""
    text = str(exc)
    if "quota exceeded" in text.lower() or "exceeded quota" in text.lower():
        return NovaError(f"nova quota: {_first_line(exc)} (lower nova.nodes, pick a smaller flavor, or ask for a "
                         "larger quota)")
    return exc
