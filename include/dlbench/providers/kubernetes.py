"""The ``kubernetes`` provider's settings: an existing cluster the user already has.

Nothing is provisioned: the user names the cluster (a kubeconfig path on the workers, or an
Airflow connection of type ``kubernetes``), says which platform its nodes are
(``container_on_bare_metal`` for a cluster on bare metal, ``container_on_vm`` on VMs), and which
nodes to use (a node selector). Each run gets its own namespace, labelled with the run and its
expiry, deleted by label at the end; jobs run there through
:class:`dlbench.execution.kubernetes.executor.KubernetesExecutor`. The backend is
:class:`dlbench.providers.kubernetes.KubernetesBackend`. No secrets here: a path or a
connection id. Imports nothing heavy (the registry is imported by the DAG file).

The ``kubernetes`` provider's backend: an existing cluster, one namespace per run.

acquire: the run's namespace ``<prefix>-<run>`` labelled ``dlbench=1`` + ``dlbench.run_id`` and
annotated with the run's tags (expiry, lease, DAG run: :meth:`Tags.as_dict`), then one target per
selected node (``node_selector``, at most ``nodes``), each a
:class:`~dlbench.execution.targets.KubernetesAccess` pinned to that node, with the node's GPU
allotment (its allocatable ``nvidia.com/gpu`` under the provider's ``gpus`` rule). release: every
namespace of the run, found by label. keep_alive: the lease annotation renewed while a task of the
run lives. :func:`find_namespaces` / :func:`sweep` serve the janitor: namespaces whose lease lapsed
or whose expiry passed are deleted, never one without our label.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from dlbench.errors import ConfigError
from dlbench.execution.gpus import GpuFacts, allot
from dlbench.execution.kubernetes.client import api_client
from dlbench.execution.kubernetes.labels import k8s_labels, label_value, run_selector
from dlbench.execution.kubernetes.namespaces import await_namespace
from dlbench.execution.kubernetes.quantity import MemoryQuantity, memory_bytes
from dlbench.execution.targets import KubernetesAccess, Target
from dlbench.grammar import AbsolutePath, ImageReference, Name
from dlbench.polling import Deadline, poll
from dlbench.providers import run_secrets
from dlbench.providers.backend import ProviderBackend, RunRequest
from dlbench.providers.base import LEASE_KEY, Instance, SweepAction, Tags
from dlbench.providers.settings import DEFAULT_WORKLOAD_IMAGE, ProviderSettings, Runtime
from dlbench.providers.sweep import sweep_runs
from dlbench.suites import Suite, serving
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
    memory: MemoryQuantity | None = Field(default=None,
                                          description="memory limit = request per job (a Kubernetes quantity, 8Gi)")
    lease_minutes: float = Field(
        default=15, ge=0.05, le=24 * 60,
        description="a dead run's namespace is deleted by the janitor this long after its last live task")
    release_timeout: float = Field(default=300, gt=0, le=3600, description="s per release of the run")

    def location(self) -> str:
        return self.conn_id or self.kubeconfig or ""

    @model_validator(mode="after")
    def _cluster_named(self) -> KubernetesSettings:
        if not self.kubeconfig and not self.conn_id:
            raise ValueError("set kubeconfig (a path) or conn_id (an Airflow connection of type kubernetes)")
        return self

    def instances_for(self, platform: Platform) -> int | None:
        return self.nodes


log = logging.getLogger(__name__)

ANNOTATION_PREFIX = "dlbench.io/"


def serving_fits(request: RunRequest, memory: str | None, gpus: str, field: str) -> None:
    """Refuse, before anything is provisioned, a serving run whose pods' memory limit (``field``)
    cannot hold the server: the pod would be OOM-killed mid-start. Which shape a pod serves is
    known only on its node (vLLM's CPU build serves the profile's ``cpu_model``, the CUDA build its
    ``model``): with ``gpus: none`` the CPU one, else the smaller of the two (never a false refusal)."""
    if Suite.SERVING not in request.suites or memory is None:
        return
    spec = request.resolved_profile.serving
    shape = spec.on_cpu() if gpus == "none" else min(spec, spec.on_cpu(), key=lambda s: s.memory_bytes())
    problem = shape.memory_problem(request.profile, memory_bytes(memory), f"a pod's memory limit ({field}: {memory})",
                                   serving.servers_per_machine(request.resolved_profile, request.scenarios))
    if problem is not None:
        raise ConfigError(problem)


def namespace_for(settings: KubernetesSettings, run_id: str) -> str:
    base = label_value(run_id).lower().replace("_", "-").replace(".", "-")
    return f"{settings.namespace_prefix}-{base}"[:63].rstrip("-")


def _client(settings: KubernetesSettings) -> Any:
    return api_client(settings.kubeconfig, settings.conn_id, settings.context)


def _annotations(tags: Tags) -> dict[str, str]:
    return {ANNOTATION_PREFIX + k: v for k, v in tags.as_dict().items()}


def _listed(listing: Any) -> list[Any]:
    """The items of a ``list_*`` answer. The API server fills what this module reads of them
    (``metadata.name``, ``spec``, ``status``); the client's models declare every field optional."""
    return listing.items


def tags_of(namespace: Any) -> Tags | None:
    annotations = namespace.metadata.annotations or {}
    return Tags.from_dict({k.removeprefix(ANNOTATION_PREFIX): v for k, v in annotations.items()
                           if k.startswith(ANNOTATION_PREFIX)})


class KubernetesBackend(ProviderBackend):
    def __init__(self, settings: KubernetesSettings, api: Any = None) -> None:
        self.settings = settings
        self._api = api

    @property
    def api(self) -> Any:
        if self._api is None:
            self._api = _client(self.settings)
        return self._api

    def preflight(self, request: RunRequest) -> None:
        declared = self.settings.platform
        other = [p.value for p in request.platforms if p in self.settings.platforms and p.value != declared]
        if other:
            raise ValueError(f"kubernetes.platform: this cluster is declared {self.settings.platform!r}; "
                             f"platforms {other} need another cluster (set kubernetes.platform)")
        serving_fits(request, self.settings.memory, self.settings.gpus, "kubernetes.memory")

    def nodes(self) -> list[Any]:
        from kubernetes import client  # kubernetes: heavy, only where a cluster is used

        selector = ",".join(f"{k}={v}" for k, v in sorted(self.settings.node_selector.items()))
        items = _listed(client.CoreV1Api(self.api).list_node(label_selector=selector or None))
        ready = [n for n in items if not n.spec.unschedulable and any(
            c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])]
        ready.sort(key=lambda n: n.metadata.name)
        return ready[:self.settings.nodes] if self.settings.nodes else ready

    def acquire(self, request: RunRequest, tags: Tags, budget_s: float | None = None) -> list[Target]:
        from kubernetes import client  # kubernetes: heavy, only where a cluster is used

        self.preflight(request)
        core = client.CoreV1Api(self.api)
        ns = namespace_for(self.settings, tags.run_id)
        lease = datetime.now(UTC) + timedelta(minutes=self.settings.lease_minutes)
        # A dict body, sent as it is: the client accepts one, though its annotation names only V1Namespace.
        body: Any = {"metadata": {"name": ns, "labels": k8s_labels(tags.run_id),
                                  "annotations": _annotations(dataclasses.replace(tags, lease_until=lease))}}
        core.create_namespace(body)
        try:
            await_namespace(self.api, ns)
            return self._targets(request, tags, ns)
        except BaseException:
            self.release(request, tags, [])
            raise

    def _targets(self, request: RunRequest, tags: Tags, ns: str) -> list[Target]:
        s = self.settings
        nodes = self.nodes()
        targets = []
        for platform in request.platforms:
            if platform.value != s.platform:
                continue
            if not nodes:
                reason = f"no Ready node matches node_selector {s.node_selector or '{}'} on the cluster"
                targets.append(Target(name="kubernetes", platform=platform, skip_reason=reason,
                                      expires_at=tags.expires_at, labels={"provider": "kubernetes"},
                                      access=KubernetesAccess(image=s.docker_image, namespace=ns,
                                                              kubeconfig=s.kubeconfig, conn_id=s.conn_id)))
            for node in nodes:
                have = int(float((node.status.allocatable or {}).get("nvidia.com/gpu", "0") or 0))
                gpus = allot(s.gpus, GpuFacts(count=have, engine_passes_gpus=have > 0), f"node {node.metadata.name}")
                address = next((a.address for a in node.status.addresses or [] if a.type == "InternalIP"), None)
                access = KubernetesAccess(
                    image=s.docker_image, namespace=ns, kubeconfig=s.kubeconfig, conn_id=s.conn_id,
                    context=s.context, node_name=node.metadata.name, cpus=s.cpus, memory=s.memory,
                    image_pull_policy=s.image_pull_policy, gpus=gpus.container)
                info = node.status.node_info
                targets.append(Target(
                    name=node.metadata.name, platform=platform, access=access, instance_id=node.metadata.uid or "",
                    address=address, skip_reason=gpus.container_skip, expires_at=tags.expires_at,
                    data_dir=request.data_dir if getattr(request, "data_dir", None) else None,
                    labels={"provider": "kubernetes", "gpus": str(gpus.count), "k8s_node": node.metadata.name,
                            "k8s_kubelet": info.kubelet_version,
                            "k8s_container_runtime": info.container_runtime_version}))
        return targets

    def keep_alive(self, tags: Tags) -> contextlib.AbstractContextManager[object]:
        return _renewing(self, tags)

    def renew(self, tags: Tags) -> None:
        from kubernetes import client  # kubernetes: heavy, only where a cluster is used

        lease = datetime.now(UTC) + timedelta(minutes=self.settings.lease_minutes)
        core = client.CoreV1Api(self.api)
        for ns in _listed(core.list_namespace(label_selector=run_selector(tags.run_id))):
            core.patch_namespace(ns.metadata.name, {"metadata": {"annotations": {
                ANNOTATION_PREFIX + LEASE_KEY: lease.isoformat()}}})
        run_secrets.renew_record(tags.run_id, lease)  # a Magnum run's kubeconfig goes by the same lease

    def release(self, request: RunRequest, tags: Tags, targets: list[Target]) -> None:
        delete_run(self.api, tags.run_id)


def delete_run(api: Any, run_id: str, timeout: float = 180.0) -> list[str]:
    """Delete every namespace of ``run_id`` (ours, by label) and wait until they are gone; their
    jobs and pods go with them."""
    from kubernetes import client  # kubernetes: heavy, only where a cluster is used
    from kubernetes.client.exceptions import ApiException  # (the same)

    core = client.CoreV1Api(api)
    deleted = []
    for ns in _listed(core.list_namespace(label_selector=run_selector(run_id))):
        try:
            core.delete_namespace(ns.metadata.name, propagation_policy="Background")
        except ApiException as exc:
            if exc.status != 404:
                raise
        deleted.append(ns.metadata.name)
    if deleted:
        # Deletion is asynchronous: the namespace controller deletes the Jobs and pods, the kubelet
        # stops each pod within its grace period, then the namespace goes. Teardown is verified:
        # a namespace still there at the deadline (a stuck finalizer) is named, never assumed gone.
        def left() -> list[str]:
            return [n.metadata.name for n in _listed(core.list_namespace(label_selector=run_selector(run_id)))]

        poll(left, lambda names: not names, Deadline(timeout, f"deletion of run {run_id}'s namespaces"), 0.5,
             lambda names: f"still there: {', '.join(names)}")
    return deleted


@contextlib.contextmanager
def _renewing(backend: KubernetesBackend, tags: Tags) -> Iterator[object]:
    stop = threading.Event()
    period = max(backend.settings.lease_minutes * 60 / 3, 1.0)

    def loop() -> None:
        while not stop.wait(period):
            try:
                backend.renew(tags)
            except Exception as exc:  # noqa: BLE001 - the next renewal may work; the lease is generous
                log.warning("lease renewal of run %s on kubernetes failed: %s", tags.run_id, exc)

    thread = threading.Thread(target=loop, name=f"k8s-lease-{tags.run_id}", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(5)


def find_namespaces(api: Any) -> dict[str, list[tuple[str, Tags]]]:
    """Our namespaces by run id (``dlbench=1`` and readable tags)."""
    from kubernetes import client  # kubernetes: heavy, only where a cluster is used

    found: dict[str, list[tuple[str, Tags]]] = {}
    for ns in _listed(client.CoreV1Api(api).list_namespace(label_selector="dlbench=1")):
        tags = tags_of(ns)
        if tags is not None and ns.status.phase != "Terminating":
            found.setdefault(tags.run_id, []).append((ns.metadata.name, tags))
    return found


def sweep(settings: KubernetesSettings, is_active: Any, *, now: datetime | None = None, dry_run: bool = False,
          api: Any = None) -> tuple[list[SweepAction], list[dict[str, str]]]:
    """Janitor: (released actions, kept runs) for one cluster, with the same lease/expiry rule as
    the machine providers (:func:`dlbench.providers.sweep.sweep_runs`)."""
    api = api or _client(settings)
    found = {run_id: [Instance(id=name, name=f"namespace {name}", platform=settings.platform, provider="kubernetes",
                               tags=tags) for name, tags in namespaces]
             for run_id, namespaces in find_namespaces(api).items()}
    return sweep_runs(found, lambda run_id, _: delete_run(api, run_id), is_active, now=now, dry_run=dry_run)


__all__ = ["KubernetesBackend", "delete_run", "find_namespaces", "namespace_for", "sweep"]
