"""Run a workload in the workload image on a Docker engine: the "container" platforms.

Every container is named ``dlbench-<run>-<job>`` and labelled with the run id, job id and an
expiry, is always removed when the job ends (even on timeout, stop or error), and can be swept by
label by the run's teardown or the janitor. The jobs of a group may share a user-defined network
(:func:`job_network`, labelled the same way and swept the same way). Results come back through a bind-mounted directory
and are archived on the controller by :func:`dlbench.execution.base.finish`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dlbench.execution.base import (
    DEFAULT_GRACE_S,
    Executor,
    StopWatch,
    finish,
    on_stop,
    read_document,
    timed_out,
)
from dlbench.execution.container import (
    DATA_MOUNT,
    LABEL,
    RESULTS_MOUNT,
    container_name,
    labels_for,
    safe_name,
    workload_launch,
)
from dlbench.execution.machine_lock import ensure_local_busy
from dlbench.execution.targets import LocalDocker, Target
from dlbench.jobs import Job
from dlbench.workloads.result import ResultDocument

__all__ = ["DATA_MOUNT", "LABEL", "RESULTS_MOUNT", "DockerExecutor", "bridge_gateway", "container_name", "job_network",
           "labels_for", "network_name", "remove_run_containers", "remove_run_networks", "sweep_containers",
           "sweep_networks"]


def _client() -> Any:
    import docker

    return docker.from_env(timeout=120)


class DockerExecutor(Executor):
    """The workload image on this host's Docker engine, results on a bind mount.

    The launch (name, labels with the run's expiry, user, mounts, limits) comes from
    :func:`dlbench.execution.container.workload_launch`, the same builder the SSH executor uses.
    """

    def __init__(self, image: str | None = None, client: Any = None, user: str | None = None,
                 grace: float = DEFAULT_GRACE_S) -> None:
        self.image = image
        self.client = client
        # The controller's uid:gid by default: it owns the job's directories here, so the
        # bind-mounted results are never root-owned on a user's machine (and the workload is known
        # to run without root in the image).
        self.user = user or f"{os.getuid()}:{os.getgid()}"
        self.grace = grace
        """Seconds ``docker stop`` waits between SIGTERM and SIGKILL when the job is stopped."""

    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float, *,
                stop: threading.Event | None = None) -> ResultDocument:
        import docker
        from requests.exceptions import ConnectionError as RequestsConnectionError
        from requests.exceptions import ReadTimeout

        client = self.client or _client()
        if self.image and isinstance(target.access, LocalDocker) and target.access.image != self.image:
            target = target.model_copy(update={"access": target.access.model_copy(update={"image": self.image})})
        with tempfile.TemporaryDirectory(prefix="dlbench-docker-") as tmp:
            os.chmod(tmp, 0o777)  # an explicitly chosen user (not ours) must be able to write its document
            data_dir = str(Path(target.data_dir).resolve()) if target.data_dir else None
            launch = workload_launch(job, target, tmp, data_dir, self.user).holding(ensure_local_busy(), timeout,
                                                                                    self.grace)
            _remove_leftover(client, job)
            launched = time.monotonic()
            container = None
            output, error = "", ""
            ended: float | None = None
            watch = StopWatch()

            def stop_action(_: StopWatch) -> None:
                # The engine does SIGTERM, the grace and SIGKILL itself; container.wait() below
                # then returns with the exit status.
                assert container is not None
                container.stop(timeout=max(0, round(self.grace)))

            try:
                container = client.containers.run(**launch.sdk_kwargs())
                try:
                    with on_stop(stop, stop_action, name=f"stop-{launch.name}") as watch:
                        status = container.wait(timeout=timeout)
                    ended = _exit_moment(container, launched, time.monotonic())
                    if status.get("StatusCode", 1) != 0:
                        error = f"workload container exited with status {status.get('StatusCode')}"
                except (ReadTimeout, RequestsConnectionError):
                    container.kill()
                    ended = time.monotonic()
                    error = timed_out(timeout, "container killed")
                output = container.logs(stdout=True, stderr=True).decode(errors="replace")
            except docker.errors.DockerException as exc:
                error = f"docker could not run the workload: {exc}"
            finally:
                if container is not None:
                    _remove_container(client, container)
            doc, why = read_document(Path(tmp) / "result.json")
            if error and output:
                error = f"{error}: {output.strip().splitlines()[-1][:400]}"
            return finish(job, doc, archive_path, launched, error=error or (why if doc is None else ""), output=output,
                          stopped=watch, ended=ended)


def _exit_moment(container: Any, launched: float, waited: float) -> float:
    """When the container's process exited, on this process's monotonic clock.

    ``waited`` (when ``container.wait()`` returned) is late by the engine's own bookkeeping and the
    HTTP answer (tens of ms on a busy machine). The engine's ``State.FinishedAt`` is when it saw the
    exit, on the engine's realtime clock, which is this host's when the engine is local: converted
    through this host's realtime clock. Used only when it falls between the launch and ``waited``
    (an engine elsewhere, with another clock, is caught there); otherwise ``waited``. Why it
    matters: everything after the exit (logs, removal) is teardown, not the workload's time.
    """
    try:
        container.reload()
        finished = _engine_time(container.attrs["State"]["FinishedAt"])
    except Exception:  # noqa: BLE001 - the wait's return is the fallback, never a failure
        return waited
    ended = time.monotonic() - (time.time() - finished)
    return ended if launched <= ended <= waited else waited


def _engine_time(text: str) -> float:
    """Docker's RFC 3339 UTC time with nanoseconds (``2026-11-23T01:39:21.123456789Z``) as epoch
    seconds; ``datetime`` alone keeps only microseconds and rejects nine digits."""
    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}+00:00").timestamp() + float(f"0.{frac or '0'}")


def _remove_container(client: Any, container: Any, wait: float = 60.0) -> None:
    """Remove the job's container. Someone else may be removing it at the same moment (a group's
    teardown sweeping the run while a role ends): the engine then answers 409 "removal already
    in progress", which is not a failure of the job; wait until it is gone."""
    import docker

    try:
        container.remove(force=True)
        return
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            client.containers.get(container.id)
        except docker.errors.NotFound:
            return
        time.sleep(0.2)
    container.remove(force=True)


def _remove_leftover(client: Any, job: Job) -> None:
    """A retry of a job whose worker died mid-run finds that attempt's container still holding the
    name: remove it (it is ours, same run and job, per its labels) instead of failing on a name
    conflict. A foreign container with that name is left alone, and the run then fails visibly."""
    import docker

    try:
        stale = client.containers.get(container_name(job))
    except docker.errors.NotFound:
        return
    if stale.labels.get("dlbench.run_id") == job.run_id and stale.labels.get("dlbench.job_id") == job.job_id:
        stale.remove(force=True)


def remove_run_containers(run_id: str, client: Any = None) -> list[str]:
    """Teardown: remove every container of ``run_id`` (only ours, found by label)."""
    client = client or _client()
    removed = []
    for container in client.containers.list(all=True, filters={"label": [f"{LABEL}=1", f"dlbench.run_id={run_id}"]}):
        container.remove(force=True)
        removed.append(container.name)
    return removed


def sweep_containers(now: datetime | None = None, client: Any = None, dry_run: bool = False) -> list[str]:
    """Janitor: remove our containers whose expiry has passed; never touches unlabelled ones."""
    import docker  # optional dependency (the docker SDK), as everywhere in this module

    client = client or _client()
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
    client = client or _client()
    config = client.networks.get(network).attrs["IPAM"]["Config"]
    if not config or "Gateway" not in config[0]:
        raise RuntimeError(f"docker network {network!r} has no gateway address")
    return config[0]["Gateway"]


# -- job networks ---------------------------------------------------------------------------------

NETWORK_RANGE = ipaddress.ip_network("198.18.0.0/15")
"""The benchmarking range (RFC 2544): every address a job network gets is inside it, so a
container on one can never be routed to a real network by accident."""
NETWORK_SUBNETS = tuple(ipaddress.ip_network(f"198.18.{i}.0/24") for i in range(201, 251))
"""Where job networks are carved: 198.18.201.0/24 .. 198.18.250.0/24 (the devcloud's node links
use 198.18.1-3, the default bridge of this host 198.18.200, a node's own engine 198.19.x)."""
assert all(subnet.subnet_of(NETWORK_RANGE) for subnet in NETWORK_SUBNETS)  # type: ignore[arg-type]


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
    import docker

    client = client or _client()
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
    used = []
    for network in client.networks.list():
        for config in (network.attrs.get("IPAM") or {}).get("Config") or []:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                used.append(ipaddress.ip_network(config["Subnet"], strict=False))
    used += _host_routes()
    return [s for s in NETWORK_SUBNETS if not any(s.version == u.version and s.overlaps(u) for u in used)]


def _host_routes() -> list[ipaddress.IPv4Network]:
    """IPv4 routes of this host (``/proc/net/route``): a job network must not shadow one."""
    routes = []
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
            routes.append(ipaddress.ip_network(f"{dest}/{mask}", strict=False))
    return routes


def _remove_network(client: Any, network: Any) -> None:
    """Remove a network of ours; containers of ours still attached (a job whose removal failed)
    are disconnected first, anything else attached makes the removal fail visibly."""
    import docker

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
    client = client or _client()
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
    client = client or _client()
    removed = []
    for network in client.networks.list(filters={"label": [f"{LABEL}=1", f"dlbench.run_id={run_id}"]}):
        _remove_network(client, network)
        removed.append(network.name)
    return removed
