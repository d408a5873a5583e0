"""Placement: which machine of a run a job runs on, and which other machines it also needs.

A job goes to one target of its platform (a hash of its id, or a fleet survey's machine index);
a scenario cell claims every machine of its platform; a network job also needs its peer. Every
worker computes the same answer from the job and the run's targets alone.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from dlbench.errors import JobSkipped
from dlbench.execution.engine import bridge_gateway
from dlbench.execution.kubernetes import peer as kubernetes_peer
from dlbench.execution.peer import network_peer, serving_peer
from dlbench.execution.targets import NetworkPeer, Target
from dlbench.jobs import Job
from dlbench.workloads.micro.network import servers
from dlbench.workloads.profiles import Scenario, get_profile


def _natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """``node-2`` before ``node-10``: machine names compared with their numbers as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


def machine_order(job: Job, targets: list[Target]) -> list[Target]:
    """The targets of ``job``'s platform in the order a fleet survey's machine index refers to:
    by name (numbers compared as numbers), then instance id. Independent of the order the
    provisioning step listed them in, so every worker maps index i to the same machine."""
    candidates = [t for t in targets if t.platform == job.platform]
    return sorted(candidates, key=lambda t: (_natural_key(t.name), t.instance_id))


def pick_target(job: Job, targets: list[Target]) -> Target:
    """The machine a job runs on: with ``job.machine`` (a fleet survey, ``every_machine``) the
    machine of that index in :func:`machine_order`; else one picked by a hash of the job id (the
    jobs of a run spread over the platform's machines, the same pick on every worker)."""
    candidates = [t for t in targets if t.platform == job.platform]
    if not candidates:
        raise ValueError(f"no target provisioned for platform {job.platform.value!r}")
    if job.machine is None:
        return candidates[int(job.job_id, 16) % len(candidates)]
    ordered = machine_order(job, targets)
    if job.machine < len(ordered):
        return ordered[job.machine]
    skipped = [t for t in ordered if t.skip_reason]
    if len(skipped) == len(ordered):
        return skipped[0]  # the platform is unavailable (one skipped stand-in): the job is skipped with its reason
    raise ValueError(f"every_machine: job {job.label} is planned for machine {job.machine} of "
                     f"{job.platform.value}, but the run provisioned {len(ordered)} "
                     f"({', '.join(t.name for t in ordered)})")


def network_peer_target(target: Target, targets: list[Target]) -> Target | None:
    """The machine of the run a provisioned machine's network job measures against: another
    instance of the same platform (the first by name), or None when the run has no second one."""
    peers = [t for t in targets if t.platform == target.platform and t.instance_id != target.instance_id
             and not t.skip_reason]
    return min(peers, key=lambda t: t.name) if peers else None


def cell_targets(job: Job, target: Target, targets: list[Target]) -> list[Target]:
    """Every target a job's workloads run on, so all their machines are claimed: a scenario
    cell's group (any instance of its platform), a network job's peer, else the job's target."""
    if job.scenario is not Scenario.SINGLE:
        return [t for t in targets if t.platform == job.platform and not t.skip_reason]
    if job.suite in ("network", "serving") and target.access.network_peer is NetworkPeer.INSTANCE:
        peer = network_peer_target(target, targets)
        return [target, *([peer] if peer else [])]
    return [target]


@dataclass(frozen=True)
class ServingClient:
    """Where a serving job's load generator runs when it is not on the server's machine."""

    target: Target
    """The client instance: the job runs there, driving the server at ``args["server_url"]``."""
    args: dict[str, str]
    """The job's arguments for it: the server's URL and its start-up time, measured on its machine."""
    environment: str
    """The server machine's environment (JSON): what the job's document describes."""
    label: str
    """The ``load_client`` label: which machine drove which."""
    server_output: Callable[[], str]
    """The server's output so far: a failed job's error quotes its tail (the server's cause)."""


@contextmanager
def serving_client(job: Job, target: Target, targets: list[Target]) -> Iterator[ServingClient | None]:
    """A serving job's server on ``target`` (the machine measured) and its load generator on
    **another instance of the run** of the same platform (the first by name, as the network suite's
    peer): the client's CPU is then not taken from the server's, and its requests cross the cloud's
    network as a tenant's do. None (the job starts its own server and drives it on the loopback)
    for every other job, on this host's platforms, on Kubernetes, and when the run has one
    instance of the platform (the document's ``load_client`` label says ``same machine``)."""
    if job.suite != "serving" or job.scenario is not Scenario.SINGLE or \
            target.access.network_peer is not NetworkPeer.INSTANCE:
        yield None
        return
    client = network_peer_target(target, targets)
    if client is None:
        yield None
        return
    ready_s = get_profile(job.profile).serving.startup_timeout_s + 60  # its own limit, then the SSH round trips
    with serving_peer(target, job.profile_argv(), run_id=job.run_id, ready_timeout=ready_s) as server:
        args = {"server_url": server.url, "startup_time": f"{server.startup_time:.3f}"}
        yield ServingClient(target=client, args=args, environment=server.environment, server_output=server.tail,
                            label=f"{client.name} (another {target.runtime} instance) -> server on {target.name}")


@contextmanager
def network_endpoint(job: Job, target: Target, targets: list[Target]) -> Iterator[tuple[str | None, str]]:
    """The network suite's peer: (address the client measures against, path label).

    On provisioned machines the peer is **another instance of the run** of the same platform
    (bare metal <-> bare metal, container <-> container across machines), never loopback and never
    the machine itself. Locally, a container measures host <-> container over the Docker bridge and
    bare metal measures loopback: the two paths differ, and the label says so (the report shows it).
    Only addresses in the benchmarking range 198.18.0.0/15 are used for the local bridge."""
    if job.suite != "network":
        yield None, ""
        return
    if target.access.network_peer is NetworkPeer.POD:  # a pod of the run on another node, through the CNI
        yield from kubernetes_peer.network_endpoint(job, target, targets)
        return
    if target.access.network_peer is NetworkPeer.INSTANCE:
        peer = network_peer_target(target, targets)
        if peer is None:
            raise JobSkipped(f"network suite skipped on {target.platform.value}: it needs a second machine of the "
                             f"run as its peer (the run has one; ask for 2 nodes of {target.platform.value})")
        with network_peer(peer) as address:
            yield address, f"{target.runtime}-to-{peer.runtime} across machines ({target.name} -> {peer.name})"
        return
    if target.access.network_peer is NetworkPeer.LOOPBACK:
        yield None, "loopback (this host)"
        return
    gateway = bridge_gateway()
    if ipaddress.ip_address(gateway) not in ipaddress.ip_network("198.18.0.0/15"):
        raise JobSkipped(f"network suite in a container skipped: the Docker bridge is {gateway}, outside the "
                         "benchmarking range 198.18.0.0/15 (start dockerd with --bip=198.18.200.1/24, "
                         "as `make docker-up` does)")
    with servers(gateway) as (host, _port):
        yield host, "container-to-host over the Docker bridge"
