"""Where a job runs and how it is reached: typed, serialisable (XCom), no secrets.

A :class:`Target` is a platform on one machine; its :data:`Access` says how a workload starts
there:

- :class:`LocalProcess`: a process on the machine running the task (the embedded ``bare_metal``);
- :class:`LocalDocker`: the workload image on the local Docker engine;
- :class:`SSHHost`: a process on a remote machine over SSH (bare metal, VMs);
- :class:`SSHDocker`: the workload image on a remote machine's own container engine, over SSH
  (an :class:`SSHHost`: ``isinstance(access, SSHHost)`` is "reached over SSH");
- :class:`KubernetesAccess`: the workload image as a Job on a Kubernetes cluster, through its API.

What an access kind *does* lives here, on the access types, and nowhere else: each one answers
the questions the rest of the code asks (which executor runs it: :meth:`~_Access.executor`;
whether the workload is a container, whether it runs on this host, whether its container can be
pinned to CPUs; how a distributed group is placed: :class:`GroupLaunch`; where the network
suite's peer is: :class:`NetworkPeer`; which field holds its secret: :func:`secret_field_of`).
``kind`` is only the serialised discriminator: no module outside this one compares it
(``tests/pipeline/test_access_kinds.py`` enforces that).

The run's private key is referenced by path (``key_path``), never carried: it stays on the
worker that made it (see :mod:`dlbench.providers.machines`).
"""

from __future__ import annotations

import abc
import os
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from dlbench.errors import ExecutionError
from dlbench.execution.kubernetes.quantity import MemoryQuantity
from dlbench.execution.transport import RemoteHost
from dlbench.suites import framework_of
from dlbench.workloads.profiles import Framework
from dlbench.workloads.result import Platform


class GroupLaunch(Enum):
    """How the roles of a distributed cell are placed and reach each other
    (:mod:`dlbench.pipeline.scenarios`)."""

    LOCAL_PROCESSES = "local_processes"
    """Every role a process on this host, listening on a free loopback port."""
    ENGINE_NETWORK = "engine_network"
    """Every role a container on one user-defined network of this host's engine, reached by name."""
    INSTANCES = "instances"
    """A role per instance of the run, reached at the instance's address."""
    PUBLISHED_INSTANCES = "published_instances"
    """A role per instance, its container publishing the role's port on the machine (the engine's
    bridge is not reachable from the other machines)."""


class NetworkPeer(Enum):
    """Where the network suite's far end runs (:func:`dlbench.execution.placement.network_endpoint`)."""

    LOOPBACK = "loopback"
    """This host, over loopback."""
    ENGINE_BRIDGE = "engine_bridge"
    """This host, from the container across the local engine's bridge."""
    INSTANCE = "instance"
    """Another instance of the run, its servers started over SSH (:mod:`dlbench.execution.peer`)."""
    POD = "pod"
    """A pod of the run on another node of the cluster (:mod:`dlbench.execution.kubernetes.peer`)."""


class _Access(BaseModel, abc.ABC):
    """What every access kind answers for itself, so no caller reads ``kind`` to decide."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    secret_field: ClassVar[str] = "key_path"
    """The field that may hold a secret reference (:mod:`dlbench.providers.run_secrets`)."""

    gpus: str | None = Field(
        default=None, pattern=r"^(all|[0-9]{1,3})$",
        description="GPUs the workload gets (dlbench.execution.gpus): None = not managed (a process sees every "
                    "GPU, a container none), 'all', or a count (processes: CUDA_VISIBLE_DEVICES; '0' hides all)")

    @property
    def runs_in_container(self) -> bool:
        """The workload image on a container engine (:attr:`Target.runtime` ``docker``), not a process."""
        return False

    @property
    def runs_on_this_host(self) -> bool:
        """On the machine running the task: a claim of it is this host's (:mod:`dlbench.execution.machine_lock`)."""
        return False

    @property
    def takes_cpuset(self) -> bool:
        """The workload's container can be pinned to a CPU set (``cpuset``): the shared scenario
        gives the foreground and the background job disjoint halves of the machine."""
        return False

    @property
    def reach_address(self) -> str | None:
        """Where other instances reach the machine, when this access names it (an SSH machine's
        address); None otherwise (then :attr:`Target.address` must say)."""
        return None

    def machine_cpus(self) -> int:
        """The CPUs of the machine the workload runs on: the shared scenario gives a foreground and
        a background container disjoint halves of them (:attr:`takes_cpuset`). This host's by
        default; a remote access asks its machine."""
        if not self.runs_on_this_host:
            raise ExecutionError(f"{type(self).__name__}: the CPU count of its machine is not known to dlbench")
        return os.cpu_count() or 1

    @property
    @abc.abstractmethod
    def group_launch(self) -> GroupLaunch:
        """How the roles of a distributed cell on targets of this kind are placed."""

    @property
    @abc.abstractmethod
    def network_peer(self) -> NetworkPeer:
        """Where the network suite's peer runs for a target of this kind."""


class LocalProcess(_Access):
    kind: Literal["process"] = "process"
    python: str | None = Field(default=None, description="interpreter; default: the worker's own")

    @property
    def runs_on_this_host(self) -> bool:
        return True

    @property
    def group_launch(self) -> GroupLaunch:
        return GroupLaunch.LOCAL_PROCESSES

    @property
    def network_peer(self) -> NetworkPeer:
        return NetworkPeer.LOOPBACK



class ContainerLimits(_Access):
    """Limits of the workload's container, the same on every engine (one launch builder)."""

    cpus: float | None = Field(default=None, gt=0, le=1024, description="CPU cores (docker --cpus)")
    memory: str | None = Field(default=None, pattern=r"^[0-9]+[kmgKMG]?$", description="e.g. 8g")
    network: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                                description="host, or a user-defined network (containers reach each other by name)")
    cpuset: str | None = Field(default=None, pattern=r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$",
                               description="CPUs the container may use, e.g. 0-3,8 (docker --cpuset-cpus): "
                                           "co-operating jobs on one machine get disjoint cores")
    publish: tuple[Annotated[int, Field(ge=1, le=65535)], ...] = Field(
        default=(), description="TCP ports published on the machine, host port = container port (roles of a group "
                                "on other machines reach the container at the machine's address)")

    @property
    def takes_cpuset(self) -> bool:
        return True


class LocalDocker(ContainerLimits):
    kind: Literal["docker"] = "docker"
    image: str

    @property
    def runs_in_container(self) -> bool:
        return True

    @property
    def runs_on_this_host(self) -> bool:
        return True

    @property
    def group_launch(self) -> GroupLaunch:
        return GroupLaunch.ENGINE_NETWORK

    @property
    def network_peer(self) -> NetworkPeer:
        return NetworkPeer.ENGINE_BRIDGE



class SSHHost(_Access):
    """A remote machine reached over SSH with the run's key."""

    kind: Literal["ssh"] = "ssh"
    address: str
    port: int = Field(default=22, ge=1, le=65535)
    user: str = "root"
    key_path: str
    known_hosts: str | None = None
    python: str = "python3"
    pythonpath: str | None = Field(default=None, description="PYTHONPATH for the workload package (prepare stage)")
    pythons: dict[str, str] = Field(default_factory=dict, description=(
        "framework -> the interpreter of its own venv on the machine (vLLM's; prepare stage): its jobs run it"))

    def python_for(self, framework: Framework) -> str:
        """The interpreter a job of ``framework`` runs on the machine."""
        return self.pythons.get(framework.value, self.python)

    @property
    def group_launch(self) -> GroupLaunch:
        return GroupLaunch.INSTANCES

    @property
    def network_peer(self) -> NetworkPeer:
        return NetworkPeer.INSTANCE

    @property
    def reach_address(self) -> str | None:
        return self.address

    def machine_cpus(self) -> int:
        """``nproc`` on the machine, over one SSH session (1 when it cannot say)."""
        with RemoteHost.from_access(self) as host:
            status, out = host.run(["nproc"], 30)
        return int(out.strip()) if status == 0 and out.strip().isdigit() else 1



class SSHDocker(SSHHost, ContainerLimits):
    """The workload image on the remote machine's own container engine (``engine`` CLI over SSH)."""

    # The executor and network peer are SSHHost's, the CPU pinning ContainerLimits' (the MRO).

    kind: Literal["ssh_docker"] = "ssh_docker"  # type: ignore[assignment]  # its own discriminator value
    image: str
    engine: str = "docker"

    @property
    def runs_in_container(self) -> bool:
        return True

    @property
    def group_launch(self) -> GroupLaunch:
        return GroupLaunch.PUBLISHED_INSTANCES


class KubernetesAccess(_Access):
    """The workload image as a Kubernetes Job on one node of a cluster (docs/kubernetes.md).

    The cluster is named by a kubeconfig path or an Airflow connection id (type ``kubernetes``),
    resolved by the executor at execution time: the credentials never travel in XCom."""

    secret_field: ClassVar[str] = "kubeconfig"

    kind: Literal["kubernetes"] = "kubernetes"
    image: str
    namespace: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    kubeconfig: str | None = Field(default=None, description="kubeconfig path on the worker")
    conn_id: str | None = Field(default=None, description="Airflow connection of type kubernetes; wins over kubeconfig")
    context: str | None = None
    node_name: str | None = Field(default=None, description="the node the job runs on (kubernetes.io/hostname)")
    node_selector: dict[str, str] = Field(default_factory=dict)
    cpus: float | None = Field(default=None, gt=0, le=1024, description="CPU limit = request")
    memory: MemoryQuantity | None = Field(default=None,
                                          description="memory limit = request, a Kubernetes quantity (8Gi)")
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    publish: tuple[Annotated[int, Field(ge=1, le=65535)], ...] = Field(
        default=(), description="container ports also bound on the node (hostPort): roles on other nodes reach "
                                "the pod at the node's address")

    @property
    def runs_in_container(self) -> bool:
        return True

    @property
    def group_launch(self) -> GroupLaunch:
        return GroupLaunch.INSTANCES

    @property
    def network_peer(self) -> NetworkPeer:
        return NetworkPeer.POD



Access = Annotated[LocalProcess | LocalDocker | SSHHost | SSHDocker | KubernetesAccess, Field(discriminator="kind")]

ACCESS_TYPES: tuple[type[_Access], ...] = (LocalProcess, LocalDocker, SSHHost, SSHDocker, KubernetesAccess)
"""Every access kind, in the order of :data:`Access`."""

_BY_KIND: dict[str, type[_Access]] = {cls.model_fields["kind"].default: cls for cls in ACCESS_TYPES}


def secret_field_of(access: Mapping[str, object]) -> str:
    """The field of a serialised access (a target's ``access`` in XCom) that may hold a secret
    reference: ``kubeconfig`` for Kubernetes, else ``key_path`` (SSH; also for an unknown kind)."""
    return _BY_KIND.get(str(access.get("kind")), _Access).secret_field


HOST_LABEL = "host_id"
"""Target label: the physical host under a VM (the cloud's opaque id, e.g. Nova's ``hostId``),
when the provider knows it; targets with the same value share a host."""


class Target(BaseModel):
    """One platform on one machine: what a mapped job task needs to start its workload."""

    model_config = ConfigDict(extra="forbid")

    name: str
    platform: Platform
    access: Access
    instance_id: str = Field(default="", description="the provider's id of the machine ('' for this host)")
    address: str | None = Field(default=None, description="the machine's address other instances reach it at")
    data_dir: str | None = None
    skip_reason: str | None = Field(default=None, description="set when the platform cannot run here: jobs are skipped")
    framework_skips: dict[str, str] = Field(
        default_factory=dict, description="framework -> why its image is not here: that framework's jobs are skipped")
    expires_at: datetime | None = Field(default=None, description="the run's expiry (labels on containers)")
    timings: dict[str, float] = Field(default_factory=dict, description="provisioning phases of this machine, s")
    labels: dict[str, str] = Field(default_factory=dict, description="facts for the result documents")

    def skip_reason_for(self, args: Mapping[str, object]) -> str | None:
        """Why a job with these arguments cannot run here: the platform's reason, else its
        framework's (its image could not be built or loaded: ``framework_skips``)."""
        return self.skip_reason or self.framework_skips.get(framework_of(args).value)

    @property
    def runtime(self) -> str:
        """``host`` (a process) or ``docker`` (the workload image on an engine)."""
        return "docker" if self.access.runs_in_container else "host"

    @property
    def reach_address(self) -> str:
        """Where other instances reach this target: its own address, else its access's (an SSH
        machine's). ExecutionError when neither says (a distributed cell cannot place a role here)."""
        address = self.address or self.access.reach_address
        if not address:
            raise ExecutionError(f"{self.name} has no address other instances reach")
        return address

    def to_xcom(self) -> dict:
        return self.model_dump(mode="json")

    @classmethod
    def from_xcom(cls, data: dict) -> Target:
        return cls.model_validate(data)
