"""One container launch, built in one place, started either through the Docker SDK (this host)
or as ``docker run`` argv over SSH (a remote node).

Before this module the local executor and the SSH executor each assembled their own launch and
drifted apart (user, limits, GPUs, expiry label, kill on timeout). Now both describe the
workload's container with :func:`workload_launch` and only translate the same
:class:`ContainerLaunch` value: :meth:`ContainerLaunch.sdk_kwargs` for ``docker.containers.run``
and :meth:`ContainerLaunch.cli_argv` for a remote shell (quoted there by
:mod:`dlbench.execution.shell`).

Naming and labels are a contract with the teardown and the janitor
(:func:`dlbench.execution.engine.remove_run_containers`, ``sweep_containers``): containers are
named ``dlbench-<run>-<job12>`` and carry ``dlbench=1``, ``dlbench.run_id``, ``dlbench.job_id``
and ``dlbench.expires_at``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dlbench.execution.image import job_image, workload_image
from dlbench.execution.machine_lock import CONTAINER_BUSY, hold_prefix
from dlbench.settings import DEFAULT_EXPIRY
from dlbench.suites import find_spec
from dlbench.workloads.profiles import Framework

if TYPE_CHECKING:
    from dlbench.execution.targets import Target
    from dlbench.jobs import Job

LABEL = "dlbench"
RESULTS_MOUNT = "/results"
DATA_MOUNT = "/data"
ORPHAN_MARGIN_S = 60
"""A held container's own ``timeout`` is the job's plus this: the executor's timeout (its error
text) always comes first; the container's only bounds an orphan whose executor is gone."""
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


BUILTIN_NETWORKS = ("bridge", "host", "none", "default")
"""Network modes that are not user-defined networks: Docker's DNS does not resolve container
names on them (and ``host``/``none`` refuse a hostname)."""
_CPUSET = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")


@dataclass(frozen=True)
class Resources:
    """Limits of a container. ``gpus`` is ``"all"`` or a count; ``network`` a Docker network
    mode such as ``host`` or a user-defined network (default: the engine's bridge); ``cpuset``
    the CPUs it may run on (``0-3,8``)."""

    cpus: float | None = None
    memory: str | None = None
    gpus: str | None = None
    network: str | None = None
    cpuset: str | None = None

    def __post_init__(self) -> None:
        if self.gpus is not None and self.gpus != "all" and not str(self.gpus).isdigit():
            raise ValueError(f"gpus must be 'all' or a count, got {self.gpus!r}")
        if self.cpuset is not None and not _CPUSET.match(self.cpuset):
            raise ValueError(f"cpuset must be a list of CPUs or ranges such as 0-3,8, got {self.cpuset!r}")

    @property
    def user_network(self) -> bool:
        """On a user-defined network (where containers resolve each other by name)."""
        return bool(self.network) and self.network not in BUILTIN_NETWORKS


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
    hostname: str | None = None
    """The container's hostname; on a user-defined network the workload sets it to the container's
    name, which is also what the other containers there resolve (so a role's own name and the
    name its peers use agree, e.g. in a TensorFlow cluster spec)."""
    detach: bool = True
    shm_size: int | None = None
    """The container's /dev/shm in bytes (Docker's default is 64 MiB): a job whose suite exchanges
    data between processes through shared memory asks for more
    (:attr:`~dlbench.suites.spec.SuiteSpec.shared_memory`)."""

    def holding(self, busy: str, timeout: float, grace: float) -> ContainerLaunch:
        """The same launch, holding its machine busy for the workload's whole life.

        A container runs under its engine, not under the executor: if the executor's worker is
        SIGKILLed the container goes on. So the machine's busy file (``busy``, a path on the
        engine's machine) is bind-mounted read-only and the workload takes a shared lock on it
        inside (:func:`~dlbench.execution.machine_lock.hold_prefix`): a machine claim waits until
        it has exited, so no job measures next to an orphan. ``timeout`` in front bounds the
        orphan (the job's timeout + :data:`ORPHAN_MARGIN_S`, SIGKILL ``grace`` s after SIGTERM)
        and relays a ``docker stop``'s SIGTERM to the workload."""
        bound = ("timeout", f"--kill-after={max(1, round(grace))}", str(max(1, int(timeout)) + ORPHAN_MARGIN_S))
        return dataclasses.replace(self, mounts=(*self.mounts, Mount(busy, CONTAINER_BUSY, read_only=True)),
                                   command=(*bound, *hold_prefix(CONTAINER_BUSY), *self.command))

    def __post_init__(self) -> None:
        if not self.image or self.image.startswith("-") or not self.name or self.name.startswith("-"):
            raise ValueError(f"bad image or container name: {self.image!r} / {self.name!r}")
        for _, host_port, container_port in self.ports:
            if not all(isinstance(p, int) and 1 <= p <= 65535 for p in (host_port, container_port)):
                raise ValueError(f"bad published port: {host_port!r}:{container_port!r}")
        if self.hostname is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", self.hostname):
            raise ValueError(f"bad hostname: {self.hostname!r}")

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

    @property
    def cpuset(self) -> str | None:
        return self.resources.cpuset

    def cli_argv(self, engine: str = "docker") -> list[str]:
        """``<engine> run ...`` as argv; pass it to :func:`dlbench.execution.shell.command_line`."""
        argv = [engine, "run"]
        if self.detach:
            argv.append("-d")
        argv += ["--name", self.name]
        if self.hostname:
            argv += ["--hostname", self.hostname]
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
        if self.cpuset:
            argv += ["--cpuset-cpus", self.cpuset]
        if self.network:
            argv += ["--network", self.network]
        if self.shm_size:
            argv += ["--shm-size", str(self.shm_size)]
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
        if self.hostname:
            kwargs["hostname"] = self.hostname
        if self.cpuset:
            kwargs["cpuset_cpus"] = self.cpuset
        if self.network:
            kwargs["network_mode"] = self.network
        if self.shm_size:
            kwargs["shm_size"] = self.shm_size
        if self.gpus:
            import docker  # optional: the docker SDK, absent on the benchmarked machine and slow to import

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
                     gpus=str(gpus) if gpus and gpus != "0" else None, network=getattr(access, "network", None),
                     cpuset=getattr(access, "cpuset", None))


def published_of(target: Target) -> tuple[tuple[str, int, int], ...]:
    """``ContainerLimits.publish`` as launch ports: on every address of the machine, host port =
    container port (a role on another machine connects to the machine's address and that port)."""
    return tuple(("", port, port) for port in getattr(target.access, "publish", ()) or ())


HOSTNAME_MAX = 63
"""Linux's limit on a hostname (a longer one makes the container fail to start)."""


def image_of(target: Target) -> str:
    """The target's workload image: TensorFlow's, the image of every suite but another
    framework's ``tf_cnn`` (:func:`dlbench.execution.image.job_image`)."""
    image = getattr(target.access, "image", None)
    if not image:
        raise ValueError(f"target {target.name} ({target.access.kind}) runs no container image")
    return image


def workload_launch(job: Job, target: Target, results_dir: str, data_dir: str | None, user: str | None,
                    resources: Resources | None = None) -> ContainerLaunch:
    """The one launch of a job's workload container, wherever the engine is, in the image of the
    job's framework (a pytorch ``tf_cnn`` job runs in ``<image>-pytorch``).

    ``results_dir`` and ``data_dir`` are paths on the engine's machine; ``user`` is the uid:gid
    that owns them there (the controller's locally, the SSH user's on a node), so the workload
    never needs root and its document is never root-owned. Training data is read-only; the disk
    suite writes (and removes) its scratch files in the data directory, so it gets it writable.
    """
    mounts = [Mount(results_dir, RESULTS_MOUNT)]
    if data_dir:
        mounts.append(Mount(data_dir, DATA_MOUNT, read_only=job.suite != "disk"))
    argv = job.workload_argv(f"{RESULTS_MOUNT}/result.json", DATA_MOUNT if data_dir else None)
    resources = resources or resources_of(target)
    name = container_name(job)
    # On a user-defined network the container is reached by its name: make it its hostname too.
    # Elsewhere the engine's default (the id's first 12 hex digits) stays, as before.
    hostname = name if resources.user_network and len(name) <= HOSTNAME_MAX else None
    return ContainerLaunch(
        image=job_image(image_of(target), job), name=name, command=("python", "-m", "dlbench.workloads", *argv),
        labels=labels_for(job.run_id, job.job_id, target.expires_at), env=dict(WORKLOAD_ENV), user=user,
        mounts=tuple(mounts), resources=resources, ports=published_of(target), hostname=hostname,
        shm_size=spec.shared_memory if (spec := find_spec(job.suite)) else None,
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


def serving_server_launch(target: Target, run_id: str, port: int, argv: tuple[str, ...],
                          user: str | None) -> ContainerLaunch:
    """The serving suite's server alone (``argv``: ``python -m dlbench.workloads serving-server ...``)
    in vLLM's image with the suite's shared memory and the target's limits, ``port`` published on
    every address of the machine: a client on another instance drives it through the container's
    network stack, as the platform's tenants would be reached."""
    spec = find_spec("serving")
    return ContainerLaunch(
        image=workload_image(image_of(target), Framework.VLLM), name=f"dlbench-{safe_name(run_id)}-serving-{port}",
        command=argv, labels=labels_for(run_id, f"serving-{port}", target.expires_at), env=dict(WORKLOAD_ENV),
        user=user, resources=resources_of(target), ports=(("", port, port),),
        shm_size=spec.shared_memory if spec else None)
