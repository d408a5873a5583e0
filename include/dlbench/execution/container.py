"""One container launch, built in one place, started either through the Docker SDK (this host)
or as ``docker run`` argv over SSH (a remote node).

Before this module the local executor and the SSH executor each assembled their own launch and
drifted apart (user, limits, GPUs, expiry label, kill on timeout). Now both describe the
workload's container with :func:`workload_launch` and only translate the same
:class:`ContainerLaunch` value: :meth:`ContainerLaunch.sdk_kwargs` for ``docker.containers.run``
and :meth:`ContainerLaunch.cli_argv` for a remote shell (quoted there by
:mod:`dlbench.execution.shell`).

Naming and labels are a contract with the teardown and the janitor
(:func:`dlbench.execution.docker.remove_run_containers`, ``sweep_containers``): containers are
named ``dlbench-<run>-<job12>`` and carry ``dlbench=1``, ``dlbench.run_id``, ``dlbench.job_id``
and ``dlbench.expires_at``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlbench.config import Job
    from dlbench.execution.targets import Target

LABEL = "dlbench"
RESULTS_MOUNT = "/results"
DATA_MOUNT = "/data"
WORKLOAD_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "HOME": "/tmp"}
"""HOME=/tmp: the container runs as an arbitrary uid:gid that has no home directory in the image."""


def container_name(job: Job) -> str:
    """``dlbench-<run>-<job12>``: the run id made safe for Docker names (the SSH executor used to
    put the raw run id in, which Docker rejects for some valid run ids)."""
    return f"dlbench-{safe_name(job.run_id)}-{job.job_id[:12]}"


def safe_name(text: str, limit: int = 60) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "-" for c in text)[:limit]


def labels_for(run_id: str, job_id: str = "", expires_at: datetime | None = None) -> dict[str, str]:
    """Our labels; a launch without the run's expiry gets the default one, so the janitor can
    always tell when an orphan may be removed."""
    from dlbench.provisioning.base import DEFAULT_EXPIRY

    expires = expires_at or datetime.now(UTC) + DEFAULT_EXPIRY
    return {LABEL: "1", "dlbench.run_id": run_id, "dlbench.job_id": job_id, "dlbench.expires_at": expires.isoformat()}


@dataclass(frozen=True)
class Mount:
    """A bind mount. Paths containing ``:`` or ``,`` are refused: the engine's ``-v`` syntax
    would split them (quoting protects the shell, not the engine's own parser)."""

    source: str
    target: str
    read_only: bool = False

    def __post_init__(self) -> None:
        for path in (self.source, self.target):
            if not path.startswith("/") or any(c in path for c in ":,\n\0"):
                raise ValueError(f"bind mount path must be absolute without ':' ',' or newlines: {path!r}")

    @property
    def spec(self) -> str:
        return f"{self.source}:{self.target}:{'ro' if self.read_only else 'rw'}"


@dataclass(frozen=True)
class Resources:
    """Limits of a container. ``gpus`` is ``"all"`` or a count; ``network`` a Docker network
    mode such as ``host`` (default: the engine's bridge)."""

    cpus: float | None = None
    memory: str | None = None
    gpus: str | None = None
    network: str | None = None

    def __post_init__(self) -> None:
        if self.gpus is not None and self.gpus != "all" and not str(self.gpus).isdigit():
            raise ValueError(f"gpus must be 'all' or a count, got {self.gpus!r}")


@dataclass(frozen=True)
class ContainerLaunch:
    """Everything ``docker run`` needs, as data (comparable in tests, JSON-able)."""

    image: str
    name: str
    command: tuple[str, ...]
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    mounts: tuple[Mount, ...] = ()
    resources: Resources = Resources()
    ports: tuple[tuple[str, int, int], ...] = ()
    """Published TCP ports: (host address or "", host port, container port)."""
    detach: bool = True

    def __post_init__(self) -> None:
        if not self.image or self.image.startswith("-") or not self.name or self.name.startswith("-"):
            raise ValueError(f"bad image or container name: {self.image!r} / {self.name!r}")

    @property
    def cpus(self) -> float | None:
        return self.resources.cpus

    @property
    def memory(self) -> str | None:
        return self.resources.memory

    @property
    def gpus(self) -> str | None:
        return self.resources.gpus

    @property
    def network(self) -> str | None:
        return self.resources.network

    def cli_argv(self, engine: str = "docker") -> list[str]:
        """``<engine> run ...`` as argv; pass it to :func:`dlbench.execution.shell.command_line`."""
        argv = [engine, "run"]
        if self.detach:
            argv.append("-d")
        argv += ["--name", self.name]
        for key, value in sorted(self.labels.items()):
            argv += ["--label", f"{key}={value}"]
        for key, value in sorted(self.env.items()):
            argv += ["-e", f"{key}={value}"]
        if self.user:
            argv += ["--user", self.user]
        for mount in self.mounts:
            argv += ["-v", mount.spec]
        if self.cpus:
            argv += ["--cpus", f"{self.cpus:g}"]
        if self.memory:
            argv += ["--memory", self.memory]
        if self.gpus:
            argv += ["--gpus", self.gpus]
        if self.network:
            argv += ["--network", self.network]
        for host, host_port, container_port in self.ports:
            argv += ["-p", f"{host}:{host_port}:{container_port}/tcp" if host else f"{host_port}:{container_port}/tcp"]
        return [*argv, self.image, *self.command]

    def sdk_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``docker.DockerClient.containers.run`` (docker SDK imported lazily)."""
        kwargs: dict[str, Any] = {
            "image": self.image, "command": list(self.command), "name": self.name, "labels": dict(self.labels),
            "environment": dict(self.env), "detach": self.detach,
            "volumes": [m.spec for m in self.mounts],  # a list: one source may be mounted twice
        }
        if self.user:
            kwargs["user"] = self.user
        if self.cpus:
            kwargs["nano_cpus"] = int(self.cpus * 1e9)
        if self.memory:
            kwargs["mem_limit"] = self.memory
        if self.network:
            kwargs["network_mode"] = self.network
        if self.gpus:
            import docker

            count = -1 if self.gpus == "all" else int(self.gpus)
            kwargs["device_requests"] = [docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])]
        if self.ports:
            kwargs["ports"] = {f"{cport}/tcp": (host, hport) if host else hport for host, hport, cport in self.ports}
        return kwargs


def resources_of(target: Target) -> Resources:
    """The container limits a target's access asks for (``ContainerLimits`` on LocalDocker and
    SSHDocker), applied identically by both executors."""
    access = target.access
    cpus, gpus = getattr(access, "cpus", None), getattr(access, "gpus", None)
    return Resources(cpus=float(cpus) if cpus else None, memory=getattr(access, "memory", None),
                     gpus=str(gpus) if gpus else None, network=getattr(access, "network", None))


def image_of(target: Target) -> str:
    image = getattr(target.access, "image", None)
    if not image:
        raise ValueError(f"target {target.name} ({target.access.kind}) runs no container image")
    return image


def workload_launch(job: Job, target: Target, results_dir: str, data_dir: str | None, user: str | None,
                    resources: Resources | None = None) -> ContainerLaunch:
    """The one launch of a job's workload container, wherever the engine is.

    ``results_dir`` and ``data_dir`` are paths on the engine's machine; ``user`` is the uid:gid
    that owns them there (the controller's locally, the SSH user's on a node), so the workload
    never needs root and its document is never root-owned. Training data is read-only; the disk
    suite writes (and removes) its scratch files in the data directory, so it gets it writable.
    """
    mounts = [Mount(results_dir, RESULTS_MOUNT)]
    if data_dir:
        mounts.append(Mount(data_dir, DATA_MOUNT, read_only=job.suite != "disk"))
    argv = job.workload_argv(f"{RESULTS_MOUNT}/result.json", DATA_MOUNT if data_dir else None)
    return ContainerLaunch(
        image=image_of(target), name=container_name(job), command=("python", "-m", "dlbench.workloads", *argv),
        labels=labels_for(job.run_id, job.job_id, target.expires_at), env=dict(WORKLOAD_ENV), user=user,
        mounts=tuple(mounts), resources=resources or resources_of(target),
    )


def server_launch(target: Target, run_id: str, port: int, user: str | None, bind_host: str = "") -> ContainerLaunch:
    """The network suite's endpoints (iperf3 on ``port``, echo on ``port + 1``) in the workload
    image, published on the machine's ``bind_host`` so other instances reach them through the
    container's network stack (what the container platform is measured with)."""
    launch_ports = ((bind_host, port, port), (bind_host, port + 1, port + 1))
    return ContainerLaunch(
        image=image_of(target), name=f"dlbench-{safe_name(run_id)}-netserve-{port}",
        command=("python", "-m", "dlbench.workloads", "net-serve", "--bind", "0.0.0.0", "--port", str(port)),
        labels=labels_for(run_id, f"netserve-{port}", target.expires_at), env=dict(WORKLOAD_ENV), user=user,
        resources=Resources(), ports=launch_ports,
    )
