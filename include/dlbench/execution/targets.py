"""Where a job runs and how it is reached: typed, serialisable (XCom), no secrets.

A :class:`Target` is a platform on one machine; its :data:`Access` says how a workload starts
there. Each access kind maps to exactly one executor (:func:`dlbench.execution.executor_for`),
so no code reads string keys to guess how to reach a machine:

- :class:`LocalProcess`: a process on the machine running the task (the embedded ``bare_metal``);
- :class:`LocalDocker`: the workload image on the local Docker engine;
- :class:`SSHHost`: a process on a remote machine over SSH (bare metal, VMs);
- :class:`SSHDocker`: the workload image on a remote machine's own container engine, over SSH;
- :class:`KubernetesAccess`: the workload image as a Job on a Kubernetes cluster, through its API.

The run's private key is referenced by path (``key_path``), never carried: it stays on the
worker that made it (see :mod:`dlbench.providers.machines`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from dlbench.workloads.result import Platform


class _Access(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus: str | None = Field(
        default=None, pattern=r"^(all|[0-9]{1,3})$",
        description="GPUs the workload gets (dlbench.execution.gpus): None = not managed (a process sees every "
                    "GPU, a container none), 'all', or a count (processes: CUDA_VISIBLE_DEVICES; '0' hides all)")


class LocalProcess(_Access):
    kind: Literal["process"] = "process"
    python: str | None = Field(default=None, description="interpreter; default: the worker's own")


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


class LocalDocker(ContainerLimits):
    kind: Literal["docker"] = "docker"
    image: str


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


class SSHDocker(SSHHost, ContainerLimits):
    """The workload image on the remote machine's own container engine (``engine`` CLI over SSH)."""

    kind: Literal["ssh_docker"] = "ssh_docker"  # type: ignore[assignment]
    image: str
    engine: str = "docker"


class KubernetesAccess(_Access):
    """The workload image as a Kubernetes Job on one node of a cluster (docs/kubernetes.md).

    The cluster is named by a kubeconfig path or an Airflow connection id (type ``kubernetes``),
    resolved by the executor at execution time: the credentials never travel in XCom."""

    kind: Literal["kubernetes"] = "kubernetes"
    image: str
    namespace: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    kubeconfig: str | None = Field(default=None, description="kubeconfig path on the worker")
    conn_id: str | None = Field(default=None, description="Airflow connection of type kubernetes; wins over kubeconfig")
    context: str | None = None
    node_name: str | None = Field(default=None, description="the node the job runs on (kubernetes.io/hostname)")
    node_selector: dict[str, str] = Field(default_factory=dict)
    cpus: float | None = Field(default=None, gt=0, le=1024, description="CPU limit = request")
    memory: str | None = Field(default=None, pattern=r"^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$",
                               description="memory limit = request, a Kubernetes quantity (8Gi)")
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    publish: tuple[Annotated[int, Field(ge=1, le=65535)], ...] = Field(
        default=(), description="container ports also bound on the node (hostPort): roles on other nodes reach "
                                "the pod at the node's address")


Access = Annotated[LocalProcess | LocalDocker | SSHHost | SSHDocker | KubernetesAccess, Field(discriminator="kind")]


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
    expires_at: datetime | None = Field(default=None, description="the run's expiry (labels on containers)")
    timings: dict[str, float] = Field(default_factory=dict, description="provisioning phases of this machine, s")
    labels: dict[str, str] = Field(default_factory=dict, description="facts for the result documents")

    @property
    def runtime(self) -> str:
        """``host`` (a process) or ``docker`` (the workload image on an engine)."""
        return "docker" if self.access.kind in ("docker", "ssh_docker", "kubernetes") else "host"

    def to_xcom(self) -> dict:
        return self.model_dump(mode="json")

    @classmethod
    def from_xcom(cls, data: dict) -> Target:
        return cls.model_validate(data)
