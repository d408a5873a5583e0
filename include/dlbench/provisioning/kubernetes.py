"""The ``kubernetes`` provider's settings: an existing cluster the user already has.

Nothing is provisioned: the user names the cluster (a kubeconfig path on the workers, or an
Airflow connection of type ``kubernetes``), says which platform its nodes are
(``container_on_bare_metal`` for a cluster on bare metal, ``container_on_vm`` on VMs), and which
nodes to use (a node selector). Each run gets its own namespace, labelled with the run and its
expiry, deleted by label at the end; jobs run there through
:class:`dlbench.execution.kubernetes.KubernetesExecutor`. The backend is
:class:`dlbench.pipeline.kubernetes_backend.KubernetesBackend`. No secrets here: a path or a
connection id. Imports nothing heavy (the registry is imported by the DAG file).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from dlbench.grammar import AbsolutePath, ImageReference, Name
from dlbench.provisioning.settings import DEFAULT_WORKLOAD_IMAGE, ProviderSettings, Runtime
from dlbench.workloads.result import Platform

ClusterPlatform = Literal["container_on_bare_metal", "container_on_vm"]
"""What a Kubernetes cluster's nodes are, declared by the user (or the Magnum template)."""
CLUSTER_PLATFORMS: dict[Platform, Runtime] = {
    Platform.CONTAINER_ON_BARE_METAL: "docker", Platform.CONTAINER_ON_VM: "docker"}
"""The platforms a Kubernetes cluster hosts (existing or made by Magnum)."""


class KubernetesSettings(ProviderSettings):
    """An existing Kubernetes cluster (docs/kubernetes.md)."""

    name: Literal["kubernetes"] = "kubernetes"
    platforms: ClassVar[dict[Platform, Runtime]] = CLUSTER_PLATFORMS
    platform: ClusterPlatform = Field(
        default="container_on_bare_metal",
        description="what the cluster's nodes are: bare-metal machines or virtual machines (declared by you)")
    kubeconfig: AbsolutePath | None = Field(default=None, description="kubeconfig path on the Airflow workers")
    conn_id: Name | None = Field(default=None, description="Airflow connection (type kubernetes); wins over kubeconfig")
    context: Name | None = Field(default=None, description="kubeconfig context (default: its current context)")
    namespace_prefix: str = Field(default="dlbench", pattern=r"^[a-z][a-z0-9-]{0,30}$",
                                  description="each run gets the namespace <prefix>-<run>")
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="labels of the nodes to benchmark on (default: every schedulable node)")
    nodes: int | None = Field(default=None, ge=1, le=1000,
                              description="use at most this many of the selected nodes (default: all)")
    docker_image: ImageReference = Field(default=DEFAULT_WORKLOAD_IMAGE,
                                         description="the workload image, as the cluster's nodes can pull it")
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    cpus: float | None = Field(default=None, gt=0, le=1024, description="CPU limit = request per job")
    memory: str | None = Field(default=None, pattern=r"^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$",
                               description="memory limit = request per job (a Kubernetes quantity, 8Gi)")
    lease_minutes: float = Field(
        default=15, ge=0.05, le=24 * 60,
        description="a dead run's namespace is deleted by the janitor this long after its last live task")
    release_timeout: float = Field(default=300, gt=0, le=3600, description="s per release of the run")

    @model_validator(mode="after")
    def _cluster_named(self) -> KubernetesSettings:
        if not self.kubeconfig and not self.conn_id:
            raise ValueError("set kubeconfig (a path) or conn_id (an Airflow connection of type kubernetes)")
        return self

    def instances_for(self, platform: Platform) -> int | None:
        return self.nodes
