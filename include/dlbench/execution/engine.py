"""Our containers and networks on this host's Docker engine, found by label: removed by a run's
teardown, swept by the janitor once expired; a group's job network; the bridge's gateway.

Why apart from the executor (:mod:`dlbench.execution.docker`): the providers' teardown, the
janitor, placement and scenarios need only these, and they load nothing beyond the standard
library until they talk to the engine (the docker SDK, imported then), so the modules the DAG
file imports at parse time stay light. Naming and labels are :mod:`dlbench.execution.container`'s
contract (``dlbench=1``, ``dlbench.run_id``, ``dlbench.job_id``, ``dlbench.expires_at``).
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dlbench.execution.container import LABEL, labels_for, safe_name

__all__ = ["NETWORK_RANGE", "NETWORK_SUBNETS", "bridge_gateway", "engine_client", "job_network", "network_name",
           "remove_run_containers", "remove_run_networks", "sweep_containers", "sweep_networks"]


def engine_client() -> Any:
    """A client of this host's engine (``DOCKER_HOST`` and friends, as the docker CLI reads them)."""
    import docker  # optional: the docker SDK, absent on the benchmarked machine and slow to import

    return docker.from_env(timeout=120)


def remove_run_containers(run_id: str, client: Any = None) -> list[str]:
    """Teardown: remove every container of ``run_id`` (only ours, found by label)."""
    client = client or engine_client()
    removed = []
    for container in client.containers.list(all=True, filters={"label": [f"{LABEL}=1", f"dlbench.run_id={run_id}"]}):
        container.remove(force=True)
        removed.append(container.name)
    return removed


def sweep_containers(now: datetime | None = None, client: Any = None, dry_run: bool = False) -> list[str]:
    """Janitor: remove our containers whose expiry has passed; never touches unlabelled ones."""
    import docker  # optional: the docker SDK (its errors), loaded only when the janitor sweeps

    client = client or engine_client()
    now = now or datetime.now(UTC)
    swept = []
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}=1"}):
        try:
            expires = datetime.fromisoformat(container.labels.get("dlbench.expires_at", ""))
        except ValueError:
            expires = datetime.fromtimestamp(0, UTC)  # unreadable expiry: ours, and treated as expired
        if expires <= now:
            if not dry_run:
                try:
                    container.remove(force=True)
                except docker.errors.NotFound:  # removed meanwhile (its own teardown, another janitor): gone
                    continue
            swept.append(container.name)
    return swept


def bridge_gateway(client: Any = None, network: str = "bridge") -> str:
    """The host's address on a Docker network (where a container reaches the host)."""
    client = client or engine_client()
    config = client.networks.get(network).attrs["IPAM"]["Config"]
    if not config or "Gateway" not in config[0]:
        raise RuntimeError(f"docker network {network!r} has no gateway address")
    return config[0]["Gateway"]


# -- job networks ---------------------------------------------------------------------------------

NETWORK_RANGE = ipaddress.IPv4Network("198.18.0.0/15")
"""The benchmarking range (RFC 2544): every address a job network gets is inside it, so a
container on one can never be routed to a real network by accident."""
NETWORK_SUBNETS = tuple(ipaddress.IPv4Network(f"198.18.{i}.0/24") for i in range(201, 251))
"""Where job networks are carved: 198.18.201.0/24 .. 198.18.250.0/24 (the devcloud's node links
use 198.18.1-3, the default bridge of this host 198.18.200, a node's own engine 198.19.x)."""
assert all(subnet.subnet_of(NETWORK_RANGE) for subnet in NETWORK_SUBNETS)


def network_name(run_id: str, name: str) -> str:
    """``dlbench-<run>-<name>``: a valid Docker name (and ``ContainerLimits.network`` value)."""
    return f"dlbench-{safe_name(run_id, 40)}-{safe_name(name, 40)}"


@contextlib.contextmanager
def job_network(run_id: str, name: str, expires_at: datetime | None = None, client: Any = None) -> Iterator[str]:
    """A user-defined bridge network for the containers of one group of jobs; yields its name.

    Why: on a user-defined network Docker's DNS resolves every container by its name
    (``container_name(job)``, also its hostname there), so the roles of a group (a parameter
    server and its workers) find each other without published ports or addresses. The subnet is
    a free /24 of :data:`NETWORK_SUBNETS`, never chosen by the engine (its default pools are
    outside the benchmarking range). Labelled like our containers (``dlbench=1``, run id,
    expiry), so the teardown and :func:`sweep_networks` find it if this block never exits.
    """
    import docker  # optional: the docker SDK (its types and errors), loaded only when a group runs

    client = client or engine_client()
    net_name = network_name(run_id, name)
    labels = {**labels_for(run_id, "", expires_at), "dlbench.network": name}
    network = None
    errors = []
    for subnet in _free_subnets(client):
        pool = docker.types.IPAMPool(subnet=str(subnet), gateway=str(next(subnet.hosts())))
        try:
            network = client.networks.create(net_name, driver="bridge", labels=labels, check_duplicate=True,
                                             ipam=docker.types.IPAMConfig(pool_configs=[pool]))
            break
        except docker.errors.APIError as exc:
            if "overlap" not in str(exc).lower():  # another one took this subnet meanwhile: try the next
                raise
            errors.append(f"{subnet}: {exc}")
    if network is None:
        raise RuntimeError(f"no free /24 for docker network {net_name} in {NETWORK_SUBNETS[0]}..{NETWORK_SUBNETS[-1]}"
                           + (f" (last: {errors[-1]})" if errors else ""))
    try:
        yield net_name
    finally:
        _remove_network(client, network)


def _free_subnets(client: Any) -> list[ipaddress.IPv4Network]:
    """Candidates not used by any network of the engine nor routed on this host."""
    used: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for network in client.networks.list():
        for config in (network.attrs.get("IPAM") or {}).get("Config") or []:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                used.append(ipaddress.ip_network(config["Subnet"], strict=False))
    used += _host_routes()
    return [s for s in NETWORK_SUBNETS if not any(s.version == u.version and s.overlaps(u) for u in used)]


def _host_routes() -> list[ipaddress.IPv4Network]:
    """IPv4 routes of this host (``/proc/net/route``): a job network must not shadow one."""
    routes: list[ipaddress.IPv4Network] = []
    try:
        lines = Path("/proc/net/route").read_text().splitlines()[1:]
    except OSError:
        return routes
    for line in lines:
        fields = line.split()
        if len(fields) < 8 or fields[1] == "00000000":
            continue
        with contextlib.suppress(ValueError):
            dest = ipaddress.IPv4Address(int(fields[1], 16).to_bytes(4, "little"))
            mask = ipaddress.IPv4Address(int(fields[7], 16).to_bytes(4, "little"))
            routes.append(ipaddress.IPv4Network(f"{dest}/{mask}", strict=False))
    return routes


def _remove_network(client: Any, network: Any) -> None:
    """Remove a network of ours; containers of ours still attached (a job whose removal failed)
    are disconnected first, anything else attached makes the removal fail visibly."""
    import docker  # optional: the docker SDK (its errors), loaded only when a network is removed

    try:
        network.reload()
        for container_id in network.attrs.get("Containers") or {}:
            with contextlib.suppress(docker.errors.NotFound):
                if client.containers.get(container_id).labels.get(LABEL) == "1":
                    network.disconnect(container_id, force=True)
        network.remove()
    except docker.errors.NotFound:
        pass


def sweep_networks(now: datetime | None = None, client: Any = None, dry_run: bool = False,
                   runs_over: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Janitor: remove our networks whose expiry has passed or whose run is over (``runs_over``:
    released in this sweep); never touches unlabelled ones. Run after :func:`sweep_containers`,
    which frees them of expired containers."""
    client = client or engine_client()
    now = now or datetime.now(UTC)
    swept = []
    for network in client.networks.list(filters={"label": f"{LABEL}=1"}):
        labels = network.attrs.get("Labels") or {}
        try:
            expires = datetime.fromisoformat(labels.get("dlbench.expires_at", ""))
        except ValueError:
            expires = datetime.fromtimestamp(0, UTC)  # unreadable expiry: ours, and treated as expired
        if expires <= now or labels.get("dlbench.run_id") in runs_over:
            if not dry_run:
                _remove_network(client, network)
            swept.append(network.name)
    return swept


def remove_run_networks(run_id: str, client: Any = None) -> list[str]:
    """Teardown: remove every network of ``run_id`` (only ours, found by label)."""
    client = client or engine_client()
    removed = []
    for network in client.networks.list(filters={"label": [f"{LABEL}=1", f"dlbench.run_id={run_id}"]}):
        _remove_network(client, network)
        removed.append(network.name)
    return removed
