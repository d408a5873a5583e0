"""The core study's multi-workload scenarios, on any provider's targets (no provider named here).

A scenario job is one cell of the matrix whose measurement needs several cooperating workloads:

- **distributed**: 1 parameter server + 2 workers (the profile's ``scenarios.distributed``), each
  role on its own instance of the platform (anti-affinity; the request is refused before
  provisioning when the provider has fewer), started together; the workers step in lock-step
  (the workload's barrier), the parameter server never ends by itself: it is stopped when every
  worker has finished. Any role failing stops the others; the cell fails naming that role.
  Locally (one host by design) the roles are three processes on this host, or three containers
  on one user-defined Docker network. The network between the worker and parameter-server
  instances is measured with the job, before training.
- **shared**: on one machine, the foreground job alone (baseline), then the same job while a
  background job (AlexNet, big batch, looped) that started ``lead_seconds`` earlier keeps running;
  or the foreground alone, then N copies at once (tenants). Containers get their own CPU sets for
  the background case (halves of the machine), none for tenants (study 002 shares them).

Every role writes its own document (archived under its own id, ``labels.role``); the cell's
document (:mod:`dlbench.pipeline.aggregate`) carries the cell's job id and what the report compares.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlbench.errors import ScenarioSkipped
from dlbench.execution import executors
from dlbench.execution.base import failed_document
from dlbench.execution.container import container_name
from dlbench.execution.engine import job_network
from dlbench.execution.peer import network_peer
from dlbench.execution.placement import network_endpoint, pick_target
from dlbench.execution.targets import HOST_LABEL, ContainerLimits, GroupLaunch, NetworkPeer, Target
from dlbench.jobs import Job
from dlbench.pipeline import aggregate
from dlbench.pipeline.aggregate import RoleOutcome
from dlbench.profiles import get_profile
from dlbench.suites import spec_of
from dlbench.workloads.profiles import DistributedMode, Scenario, profile_digest
from dlbench.workloads.result import ResultDocument, Status

log = logging.getLogger(__name__)

Archive = Callable[[Job], Path]
"""Where a job's document is archived (by its id)."""

STOP_GRACE_S = 15.0
"""How long the runner waits for its role threads after stopping them (the executor's own grace
between SIGTERM and SIGKILL is shorter)."""



@dataclass
class Role:
    """One workload of a scenario job: which, where, and whether it ends by itself."""

    name: str
    index: int
    job: Job
    target: Target
    ends_by_itself: bool = True
    delay: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)


def role_job(cell: Job, name: str, index: int, args: dict, suite: str | None = None) -> Job:
    """A role's job: its own deterministic id (a retried cell overwrites its roles' documents);
    ``suite``: another suite's job (a server's training background), its command with it."""
    job_id = hashlib.sha256(f"{cell.job_id}|{name}|{index}".encode()).hexdigest()[:24]
    other: dict[str, object] = {}
    if suite and suite != cell.suite:
        # The other suite's digest of the same profile (a digest leaves out other suites' sections),
        # once the cell's own shows the profile here is the one the cell was planned with.
        profile = get_profile(cell.profile)
        if cell.profile_digest is not None and profile_digest(profile, cell.suite) != cell.profile_digest:
            raise ValueError(f"{cell.label}: profile {cell.profile!r} is not the one the cell was planned with")
        other = {"suite": suite, "command": spec_of(suite).command,
                 "profile_digest": profile_digest(profile, suite) if cell.profile_digest is not None else None}
    return cell.model_copy(update={"job_id": job_id, "args": args, **other})


def run_together(cell: Job, roles: Sequence[Role], timeout: float, archive: Archive) -> list[RoleOutcome]:
    """Start every role at once (each after its ``delay``), stop the roles that never end by
    themselves once every other role has finished, and stop all of them as soon as one fails.

    Whatever interrupts the caller (a task timeout is a BaseException) stops every role and waits
    for them, so no workload outlives its task."""
    done: queue.Queue[RoleOutcome] = queue.Queue()

    def work(role: Role) -> None:
        launched = time.monotonic()
        path: Path = archive(role.job)
        try:
            if role.delay and role.stop.wait(role.delay):
                doc = failed_document(role.job, "not started: the job was stopped before this role's turn")
                doc.write(path)
            else:
                launched = time.monotonic()
                doc = executors.executor_for(role.target).execute(role.job, role.target, path, timeout,
                                                                  stop=role.stop)
        except BaseException as exc:  # noqa: BLE001 - becomes this role's failed document
            doc = failed_document(role.job, f"{type(exc).__name__}: {exc}")
            doc.write(path)
        done.put(RoleOutcome(role.name, role.index, _labelled(doc, role, cell, path), launched, time.monotonic()))

    threads = [threading.Thread(target=work, args=(role,), name=f"role-{role.name}{role.index}", daemon=True)
               for role in roles]
    outcomes: list[RoleOutcome] = []
    try:
        for thread in threads:
            thread.start()
        pending = list(roles)
        failed = False
        while pending:
            outcome = done.get()
            pending = [r for r in pending if not (r.name == outcome.role and r.index == outcome.index)]
            outcomes.append(outcome)
            if outcome.doc.status is not Status.OK and not failed:
                failed = True
                log.error("role %s %d failed (%s): stopping the other roles", outcome.role, outcome.index,
                          outcome.doc.error)
                for role in pending:
                    role.stop.set()
            elif pending and all(not r.ends_by_itself for r in pending):
                for role in pending:
                    role.stop.set()
    except BaseException:
        for role in roles:
            role.stop.set()
        for thread in threads:
            thread.join(timeout=STOP_GRACE_S)
        raise
    for thread in threads:
        thread.join(timeout=STOP_GRACE_S)
    return outcomes


def _labelled(doc: ResultDocument, role: Role, cell: Job, path: Path) -> ResultDocument:
    """A role's document says which cell it belongs to and where it ran (archived again)."""
    doc.labels[aggregate.ROLE_LABEL] = role.name
    doc.labels["task_index"] = str(role.index)
    doc.labels.setdefault("target", role.target.name)
    doc.labels["cell_job_id"] = cell.job_id
    doc.labels["job_label"] = f"{cell.label}/{role.name}{role.index}"
    doc.write(path)
    return doc


# -- placement -----------------------------------------------------------------------------------


def usable(job: Job, targets: Sequence[Target]) -> list[Target]:
    candidates = sorted((t for t in targets if t.platform == job.platform), key=lambda t: t.name)
    if not candidates:
        raise ValueError(f"no target provisioned for platform {job.platform.value!r}")
    ready = [t for t in candidates if not t.skip_reason_for(job.args)]
    if not ready:
        raise ScenarioSkipped(candidates[0].skip_reason_for(job.args) or "no usable target")
    return ready


def _with_access(target: Target, **update: object) -> Target:
    return target.model_copy(update={"access": target.access.model_copy(update=update)})


def _free_local_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


@contextlib.contextmanager
def _placement(cell: Job, names: list[tuple[str, int]], targets: Sequence[Target], port: int,
               own_ports: bool = False) -> Iterator[tuple[list[Target], list[str], str]]:
    """(a target per role, the address each role listens at, what the placement is).

    ``own_ports``: the roles also connect on ports their library picks (Gloo and NCCL pairs,
    jax.distributed's collectives), so containers on separate instances cannot publish just the
    cluster port: they share their instance's network (``--network host``, what DDP in containers
    needs on any cloud) and listen at the instance's address."""
    ready = usable(cell, targets)
    launch = ready[0].access.group_launch
    if launch is GroupLaunch.LOCAL_PROCESSES:
        ports = _free_local_ports(len(names))
        yield [ready[0]] * len(names), [f"127.0.0.1:{p}" for p in ports], "processes on one host (loopback)"
        return
    if launch is GroupLaunch.ENGINE_NETWORK:
        with job_network(cell.run_id, cell.job_id[:12], ready[0].expires_at) as network:
            placed = [_with_access(ready[0], network=network) for _ in names]
            addresses = [f"{container_name(role_job(cell, n, i, {}))}:{port}" for n, i in names]
            yield placed, addresses, f"containers on one Docker network ({network})"
        return
    if len(ready) < len(names):
        raise ScenarioSkipped(f"distributed needs {len(names)} instances of {cell.platform.value} (one per role), "
                              f"the run has {len(ready)} usable")
    placed = ready[:len(names)]
    where = f"{len(placed)} instances, one role each"
    if launch is GroupLaunch.PUBLISHED_INSTANCES and own_ports:
        placed = [_with_access(t, network="host") for t in placed]
        where += " (containers on their instance's network)"
    elif launch is GroupLaunch.PUBLISHED_INSTANCES:
        placed = [_with_access(t, publish=(port,)) for t in placed]
    addresses = [f"{t.reach_address}:{port}" for t in placed]
    yield placed, addresses, where


# -- distributed ---------------------------------------------------------------------------------


def run_distributed(cell: Job, targets: Sequence[Target], timeout: float, archive: Archive) -> ResultDocument:
    spec = get_profile(cell.profile).scenarios.distributed
    mode = DistributedMode(str(cell.args.get("mode", spec.mode.value)))
    names = spec.roles(mode)
    own_ports = mode in (DistributedMode.DDP, DistributedMode.JAX_DISTRIBUTED)
    with _placement(cell, names, targets, spec.port, own_ports) as (placed, addresses, where):
        cluster: dict[str, list[str]] = {}
        for (name, _), address in zip(names, addresses, strict=True):
            cluster.setdefault(name, []).append(address)
        cluster_json = json.dumps(cluster, separators=(",", ":"))
        base = {k: v for k, v in cell.args.items() if k != "mode"}
        roles = [Role(name, index, role_job(cell, name, index, {
            **base, "scenario": Scenario.DISTRIBUTED.value, "mode": mode.value, "role": name,
            "task_index": index, "cluster": cluster_json}), target, ends_by_itself=name != "ps")
            for (name, index), target in zip(names, placed, strict=True)]
        log.info("%s: %s; cluster %s", cell.label, where, cluster_json)
        network = _measure_network(cell, roles, targets, timeout, archive)
        outcomes = run_together(cell, roles, timeout, archive)
    doc = aggregate.distributed(cell, outcomes, network)
    doc.labels["placement"] = where
    return doc


def _measure_network(cell: Job, roles: Sequence[Role], targets: Sequence[Target], timeout: float,
                     archive: Archive) -> ResultDocument | None:
    """iperf3 + latency from the first worker's instance to the (first) parameter server's, with
    the network suite, before training: why a platform lost throughput is in the same cell."""
    worker = next((r for r in roles if r.name == "worker"), None)
    server = next((r for r in roles if r.name == "ps"), None) or next(
        (r for r in roles if r.name == "worker" and r.index == 1), None)
    if worker is None or server is None:
        return None
    job = role_job(cell, "network", 0, {})
    job = job.model_copy(update={"suite": "network", "command": "network", "scenario": Scenario.DISTRIBUTED})
    path = archive(job)
    try:
        with _network_server(job, worker.target, server.target, targets) as (address, label):
            if address is not None:
                job = job.model_copy(update={"args": {"server": address}})
            doc = executors.executor_for(worker.target).execute(job, worker.target, path, min(timeout, 600))
        doc.labels["network_path"] = label
    except Exception as exc:  # noqa: BLE001 - the training result stands; the cell says why no network figures
        doc = failed_document(job, f"network measurement failed: {type(exc).__name__}: {exc}")
    doc.benchmark.parameters["scenario"] = Scenario.DISTRIBUTED.value
    doc.labels[aggregate.ROLE_LABEL] = "network"
    doc.labels["cell_job_id"] = cell.job_id
    doc.write(path)
    return doc


@contextlib.contextmanager
def _network_server(job: Job, client: Target, server: Target, targets: Sequence[Target]
                    ) -> Iterator[tuple[str | None, str]]:
    if client.access.network_peer is NetworkPeer.INSTANCE and server.instance_id != client.instance_id:
        with network_peer(server, run_id=job.run_id) as address:
            yield address, (f"{client.runtime} worker instance -> parameter-server instance "
                            f"({client.name} -> {server.name})")
        return
    with network_endpoint(job, client, list(targets)) as endpoint:
        yield endpoint


# -- shared resource -----------------------------------------------------------------------------


def cpu_halves(count: int) -> tuple[str, str]:
    """Two disjoint CPU sets covering the machine (the same CPU twice on a 1-CPU machine)."""
    if count < 2:
        return "0", "0"
    half = count // 2
    first = "0" if half == 1 else f"0-{half - 1}"
    second = str(half) if count - half == 1 else f"{half}-{count - 1}"
    return first, second


def co_located_pair(targets: Sequence[Target]) -> tuple[Target, Target] | None:
    """Two targets on different instances of one physical host (same ``host_id`` label, set by
    drivers whose instances are VMs), or None: then both jobs share one machine."""
    by_host: dict[str, list[Target]] = {}
    for target in targets:
        host = target.labels.get(HOST_LABEL)
        if host and target.instance_id and all(t.instance_id != target.instance_id for t in by_host.get(host, [])):
            by_host.setdefault(host, []).append(target)
    pairs = [sorted(group, key=lambda t: t.name)[:2] for group in by_host.values() if len(group) >= 2]
    return (pairs[0][0], pairs[0][1]) if pairs else None


def background_work(cell: Job, base: dict[str, Any]) -> dict[str, Any]:
    """What the background job runs (looped), beside the foreground cell's job: its suite's
    (:attr:`~dlbench.suites.spec.SuiteSpec.background`)."""
    background = spec_of(cell.suite).background
    if background is None:
        raise ValueError(f"{cell.label}: suite {cell.suite!r} has no shared scenario")
    return background(get_profile(cell.profile), base)


def run_shared(cell: Job, targets: Sequence[Target], timeout: float, archive: Archive) -> ResultDocument:
    spec = get_profile(cell.profile).scenarios.shared
    ready = usable(cell, targets)
    target = pick_target(cell, ready)
    interference = str(cell.args.get("interference", "background"))
    base = {k: v for k, v in cell.args.items() if k not in ("interference", "tenants")}
    tenants = int(cell.args.get("tenants", 1))

    def args(condition: str, **extra: object) -> dict:
        return {**base, "scenario": Scenario.SHARED.value, "condition": condition, "tenants": tenants, **extra}

    split_cpus = target.access.takes_cpuset
    outcomes: list[RoleOutcome] = []
    if interference == "tenants":
        alone = Role("alone", 0, role_job(cell, "alone", 0, args("alone")), target)
        outcomes += run_together(cell, [alone], timeout, archive)
        if outcomes[0].doc.status is Status.OK:
            copies = ([Role("tenant", 0, role_job(cell, "tenant", 0, args("tenants")), target)]
                      if spec_of(cell.suite).tenants_in_one_job else
                      [Role("tenant", i, role_job(cell, "tenant", i, args("tenant")), target) for i in range(tenants)])
            outcomes += run_together(cell, copies, timeout, archive)
        return aggregate.shared(cell, outcomes)

    fg_target, bg_target = target, target
    pair = co_located_pair(ready)
    if pair is not None:  # two VMs on one physical host: each job in its own VM (study 004's setup)
        fg_target, bg_target = pair
    elif split_cpus:
        fg_cpus, bg_cpus = cpu_halves(target.access.machine_cpus())
        fg_target, bg_target = _with_access(target, cpuset=fg_cpus), _with_access(target, cpuset=bg_cpus)
    alone = Role("alone", 0, role_job(cell, "alone", 0, args("alone")), fg_target)
    outcomes += run_together(cell, [alone], timeout, archive)
    if outcomes[0].doc.status is Status.OK:
        background = Role("background", 0, role_job(cell, "background", 0, {
            **background_work(cell, base), "scenario": Scenario.SHARED.value, "condition": "background",
            "loop": True}, suite=spec_of(cell.suite).background_suite), bg_target, ends_by_itself=False)
        foreground = Role("foreground", 0, role_job(cell, "foreground", 0, args("with_background")), fg_target,
                          delay=spec.lead_seconds)
        outcomes += run_together(cell, [background, foreground], timeout + spec.lead_seconds, archive)
    doc = aggregate.shared(cell, outcomes)
    doc.labels["placement"] = (f"foreground on {fg_target.name}, background on {bg_target.name}, one host"
                               if pair is not None else f"one machine ({target.name})")
    if split_cpus and pair is None:
        fg_access, bg_access = fg_target.access, bg_target.access
        assert isinstance(fg_access, ContainerLimits) and isinstance(bg_access, ContainerLimits)  # split_cpus
        doc.labels["cpusets"] = json.dumps({"foreground": fg_access.cpuset, "background": bg_access.cpuset})
    return doc


def run_scenario(cell: Job, targets: Sequence[Target], timeout: float, archive: Archive) -> ResultDocument:
    """Run a distributed or shared cell; its aggregate document is archived under the cell's id."""
    if cell.scenario is Scenario.DISTRIBUTED:
        doc = run_distributed(cell, targets, timeout, archive)
    elif cell.scenario is Scenario.SHARED:
        doc = run_shared(cell, targets, timeout, archive)
    else:
        raise ValueError(f"{cell.label}: scenario {cell.scenario.value!r} is a single job, not a group")
    doc.write(archive(cell))
    return doc
