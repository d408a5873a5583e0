"""Kubernetes clusters from OpenStack Magnum: the container platforms on a cluster made per run.

Only the Magnum API (``container-infra``, through the openstacksdk connection's keystoneauth
session), so it is driver-agnostic: the Heat drivers Magnum 2025.1 deprecated, the Cluster API
drivers that replace them, or the devcloud's driver (docs/magnum.md) are all the same to it.

Per run, created in this order and deleted in the reverse one:

1. the **cluster template** ``magnum.cluster_template``: reused when one by that name exists,
   else created from ``magnum.template`` (image, flavors, network driver, docker volume, labels,
   server type) and kept for later runs (it is configuration, not a run's resource);
2. one **cluster** ``dlbench-<run>-k8s-0`` with ``node_count`` = the platform's nodes, the
   worker ``flavor`` (a GPU flavor for GPU nodes), the run's :class:`Tags` as Magnum **labels**
   (``merge_labels``: the template's labels stay) - what the janitor and release find it by;
3. its **kubeconfig**, obtained the way ``openstack coe cluster config`` does: the cluster CA
   from ``GET /certificates/<cluster>``, a fresh RSA key whose CSR (CN ``admin``, O
   ``system:masters``) the cluster CA signs through ``POST /certificates``, server =
   ``api_address``; one file (0600) under the run's private directory, removed at release.

Own polling with deadlines: Magnum reports ``CREATE_FAILED`` (not ERROR); its ``status_reason``
and ``faults`` (per nodegroup) are the error's message. 5xx / connection errors are retried until
``api_retry_seconds``. Timings (samples, per cluster): ``create_to_complete`` (POST ->
CREATE_COMPLETE), ``kubeconfig`` (certificates API), ``api_reachable`` (first answer of the
Kubernetes API with the new credentials), ``delete`` (DELETE -> 404).

Magnum labels cannot be changed after create, so the lease is not written on the cluster: the
run's namespace in it carries the lease (renewed by the Kubernetes backend); the janitor releases
a cluster whose run Airflow no longer knows as running, or whose expiry passed.

The ``magnum`` provider's backend: a Kubernetes cluster made per run, then the Kubernetes
backend on it (docs/magnum.md).

acquire: :meth:`MagnumDriver.preflight` -> ``create`` (one cluster, ``node_count`` = the
platform's nodes) -> ``wait_ready`` (CREATE_COMPLETE, or CREATE_FAILED with Magnum's reason) ->
kubeconfig kept as a run secret (pipeline/run_secrets.py: like the run's SSH key, never a file on
a worker's disk between tasks; a 0600 private file only while a task uses it) -> the cluster's API
answers -> the
:class:`~dlbench.providers.kubernetes.KubernetesBackend` on that kubeconfig makes the run's
namespace and one :class:`~dlbench.execution.targets.KubernetesAccess` target per node. Any failure
deletes the cluster (and the kubeconfig) before it propagates. release: the run's namespace, then
every cluster of the run found by its labels (deleted, waited until gone), timings archived, the
kubeconfig removed.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import socket
import time
from collections.abc import Iterator
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field

from dlbench.errors import ProvisioningError
from dlbench.execution.kubernetes.client import api_client
from dlbench.execution.kubernetes.quantity import MemoryQuantity
from dlbench.execution.targets import Target
from dlbench.grammar import Name
from dlbench.polling import Deadline, poll, wait_for_status
from dlbench.providers import run_secrets
from dlbench.providers.backend import RunRequest
from dlbench.providers.base import RESOURCE_PREFIX, BootConfig, Demand, Instance, Tags, resource_name
from dlbench.providers.kubernetes import (
    CLUSTER_PLATFORMS,
    ClusterPlatform,
    KubernetesBackend,
    KubernetesSettings,
    delete_run,
    serving_fits,
)
from dlbench.providers.machines import ProvisioningBackend
from dlbench.providers.openstack import OpenStackDriver, OpenStackSettings
from dlbench.providers.settings import Runtime
from dlbench.workloads.result import Platform

log = logging.getLogger(__name__)


class MagnumError(ProvisioningError):
    """Magnum refused or failed; the message carries its own words (status_reason, faults)."""

PROVIDER = "magnum"
ROLE = "k8s"
API_VERSION = {"OpenStack-API-Version": "container-infra latest"}


class ClusterStatus(StrEnum):
    """Magnum's cluster statuses (a StrEnum: equal to the API's strings)."""

    CREATE_IN_PROGRESS = "CREATE_IN_PROGRESS"
    CREATE_COMPLETE = "CREATE_COMPLETE"
    CREATE_FAILED = "CREATE_FAILED"
    UPDATE_IN_PROGRESS = "UPDATE_IN_PROGRESS"
    UPDATE_COMPLETE = "UPDATE_COMPLETE"
    UPDATE_FAILED = "UPDATE_FAILED"
    DELETE_IN_PROGRESS = "DELETE_IN_PROGRESS"
    DELETE_COMPLETE = "DELETE_COMPLETE"
    DELETE_FAILED = "DELETE_FAILED"
    ROLLBACK_IN_PROGRESS = "ROLLBACK_IN_PROGRESS"
    ROLLBACK_COMPLETE = "ROLLBACK_COMPLETE"
    ROLLBACK_FAILED = "ROLLBACK_FAILED"


FAILED = frozenset({ClusterStatus.CREATE_FAILED, ClusterStatus.DELETE_FAILED, ClusterStatus.UPDATE_FAILED,
                    ClusterStatus.ROLLBACK_FAILED})
"""A cluster waited for in one of these will not become ready: Magnum's reason is the error."""


def _deletion_underway(status: str) -> bool:
    """Magnum is deleting the cluster, or busy with it (it refuses a DELETE until that is done)."""
    return status.startswith("DELETE") or status.endswith("IN_PROGRESS")


def _status_of(cluster: dict[str, Any] | None) -> str:
    """A cluster's status and reason for a message (None: Magnum does not show it yet)."""
    if cluster is None:
        return "not visible yet"
    return f"{cluster.get('status')} ({cluster.get('status_reason') or ''})"


class ClusterTemplateSpec(BaseModel):
    """What a cluster template is made of when none by the name exists (docs/magnum.md for GPUs)."""

    model_config = ConfigDict(extra="forbid")

    image: Name = Field(description="Glance image (its os_distro property selects Magnum's driver)")
    flavor: Name = Field(description="worker flavor")
    master_flavor: Name | None = Field(default=None, description="control-plane flavor (default: flavor)")
    network_driver: Name | None = Field(default=None, description="flannel, calico... (default: the driver's)")
    docker_volume_size: int | None = Field(default=None, ge=1, le=100_000, description="GB per node for images")
    server_type: Literal["vm", "bm"] = Field(default="vm", description="bm: Ironic nodes; vm: Nova servers")
    external_network: Name | None = None
    dns_nameserver: str | None = None
    labels: dict[str, str] = Field(default_factory=dict, description="driver labels (kube_tag, GPU operator...)")
    public: bool = False


class MagnumSettings(OpenStackSettings):
    """A Kubernetes cluster per run from Magnum; jobs run as Kubernetes Jobs on its nodes."""

    name: Literal["magnum"] = "magnum"
    platforms: ClassVar[dict[Platform, Runtime]] = CLUSTER_PLATFORMS

    platform: ClusterPlatform = Field(
        default="container_on_bare_metal",
        description="what the cluster's nodes are (bm template: bare metal; vm template: virtual machines)")
    cluster_template: Name = Field(default="dlbench-k8s", description="template name (reused, or made from template)")
    template: ClusterTemplateSpec | None = Field(default=None, description="how to make the template when missing")
    master_count: int = Field(default=1, ge=1, le=7)
    flavor: Name | None = Field(default=None, description="worker flavor for this run's cluster (GPU: a GPU flavor)")
    keypair: Name | None = Field(default=None, description="Nova keypair for the nodes (optional)")
    labels: dict[str, str] = Field(default_factory=dict, description="extra cluster labels (kept with the template's)")
    create_timeout_minutes: int = Field(default=60, ge=1, le=24 * 60, description="Magnum's own create_timeout")
    namespace_prefix: str = Field(default="dlbench", pattern=r"^[a-z][a-z0-9-]{0,30}$")
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    cpus: float | None = Field(default=None, gt=0, le=1024, description="CPU limit = request per job")
    memory: MemoryQuantity | None = Field(default=None, description="memory limit = request per job (8Gi)")
    api_timeout: float = Field(default=300, gt=0, le=3600, description="s until the new cluster's API answers")

    def node_count(self, platform: Platform) -> int:
        return self.nodes.get(platform, 1)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]


class MagnumDriver(OpenStackDriver):
    """See the module docstring. An :class:`Instance` here is one cluster."""

    name = PROVIDER
    timing_phases = ("create_to_complete", "kubeconfig", "api_reachable", "delete")

    spec: MagnumSettings

    def __repr__(self) -> str:
        return f"MagnumDriver(template={self.spec.cluster_template!r})"

    # -- REST -------------------------------------------------------------------------------------
    @property
    def coe(self) -> Any:
        return self.conn.container_infrastructure_management

    def _request(self, method: str, path: str, json: Any = None, ok: tuple[int, ...] = (200, 201, 202, 204),
                 retry: bool = True) -> Any:
        def once() -> Any:
            resp = getattr(self.coe, method)(path, json=json, headers=API_VERSION) if json is not None else \
                getattr(self.coe, method)(path, headers=API_VERSION)
            if resp.status_code >= 500:
                err = MagnumError(f"Magnum {method.upper()} {path}: HTTP {resp.status_code}: {_message(resp)}")
                err.status_code = resp.status_code  # type: ignore[attr-defined]  # read by is_transient
                raise err
            if resp.status_code not in ok:
                raise MagnumError(f"Magnum {method.upper()} {path}: HTTP {resp.status_code}: {_message(resp)}")
            return resp
        if not retry:
            return once()
        return self._call(f"Magnum {method.upper()} {path}", once)

    def _get_cluster(self, ident: str) -> dict[str, Any] | None:
        """The cluster, or None when Magnum does not show it (404; or the 400 Magnum answers for a
        cluster whose row exists before its nodegroups, right after the create: master_count 0)."""
        resp = self._request("get", f"/clusters/{ident}", ok=(200, 400, 404))
        if resp.status_code == 400 and "master_count" not in resp.text:
            raise MagnumError(f"Magnum GET /clusters/{ident}: HTTP 400: {_message(resp)}")
        return resp.json() if resp.status_code == 200 else None

    # -- template -----------------------------------------------------------------------------------
    def template(self) -> dict[str, Any]:
        """The cluster template by name; made from ``magnum.template`` when missing."""
        name = self.spec.cluster_template
        resp = self._request("get", f"/clustertemplates/{name}", ok=(200, 404, 409))
        if resp.status_code == 200:
            return resp.json()
        if resp.status_code == 409:
            raise MagnumError(f"magnum.cluster_template: several templates are named {name!r}; use its uuid")
        spec = self.spec.template
        if spec is None:
            names = [t["name"] for t in self._request("get", "/clustertemplates").json().get("clustertemplates", [])]
            raise MagnumError(f"magnum.cluster_template: no template {name!r} (templates: {names}); set "
                              "magnum.template to have it made")
        body: dict[str, Any] = {
            "name": name, "coe": "kubernetes", "image_id": spec.image, "flavor_id": spec.flavor,
            "master_flavor_id": spec.master_flavor or spec.flavor, "server_type": spec.server_type,
            "labels": spec.labels, "public": spec.public}
        for key, value in (("network_driver", spec.network_driver), ("docker_volume_size", spec.docker_volume_size),
                           ("external_network_id", spec.external_network), ("dns_nameserver", spec.dns_nameserver)):
            if value is not None:
                body[key] = value
        log.info("creating Magnum cluster template %s", name)
        return self._request("post", "/clustertemplates", json=body, retry=False).json()

    # -- hooks ----------------------------------------------------------------------------------------
    def preflight(self, demands: list[Demand]) -> None:
        self.conn  # noqa: B018 - unknown cloud / missing credentials raise as they are
        try:
            template = self.template()
        except MagnumError:
            raise
        except Exception as exc:  # noqa: BLE001 - cannot use the cloud
            raise MagnumError(f"cannot read Magnum: {type(exc).__name__}: {_first_line(exc)}") from None
        wanted = "bm" if self.spec.platform == Platform.CONTAINER_ON_BARE_METAL.value else "vm"
        if template.get("server_type") and template["server_type"] != wanted:
            raise MagnumError(f"magnum.platform: {self.spec.platform} needs a template with server_type {wanted!r}; "
                              f"{template['name']!r} has {template['server_type']!r}")
        if template.get("coe") != "kubernetes":
            raise MagnumError(f"magnum.cluster_template: {template['name']!r} is coe {template.get('coe')!r}, "
                              "not kubernetes")

    def create(self, demand: Demand, tags: Tags, boot: BootConfig, deadline: Deadline) -> list[Instance]:
        template = self.template()
        name = resource_name(tags.run_id, ROLE, 0)
        labels = {**self.spec.labels, **tags.as_dict()}
        body: dict[str, Any] = {"name": name, "cluster_template_id": template["uuid"], "node_count": demand.count,
                                "master_count": self.spec.master_count, "labels": labels, "merge_labels": True,
                                "create_timeout": self.spec.create_timeout_minutes}
        if self.spec.flavor:
            body["flavor_id"] = self.spec.flavor
        if self.spec.keypair:
            body["keypair"] = self.spec.keypair
        started = time.monotonic()
        resp = self._request("post", "/clusters", json=body, retry=False)
        uuid = resp.json()["uuid"]
        inst = Instance(id=uuid, name=name, platform=demand.platform, provider=PROVIDER, tags=tags, role=ROLE,
                        details={"kind": "cluster", "template": template["name"], "node_count": demand.count,
                                 "requested_at": started})
        log.info("Magnum cluster %s (%s) requested: %d node(s), template %s", name, uuid, demand.count,
                 template["name"])
        return [inst]

    def wait_ready(self, instances: list[Instance], deadline: Deadline) -> list[Instance]:
        """Each cluster until CREATE_COMPLETE; a failed status raises with Magnum's reason and faults."""
        for inst in instances:
            started = inst.details.get("requested_at")  # set by create
            cluster = self._created(inst, deadline)
            inst.timings["create_to_complete"] = round(
                time.monotonic() - started if isinstance(started, float) else 0.0, 3)
            inst.address = cluster.get("api_address")
            inst.details.update(api_address=cluster.get("api_address"), node_addresses=cluster.get("node_addresses"),
                                coe_version=cluster.get("coe_version"), status=cluster["status"])
            inst.details.pop("requested_at", None)
        return instances

    def _created(self, inst: Instance, deadline: Deadline) -> dict[str, Any]:
        """The cluster once CREATE_COMPLETE (Magnum may not show it at first: not visible yet)."""

        def status(cluster: dict[str, Any] | None) -> str | None:
            return cluster.get("status") if cluster else None

        def failed(cluster: dict[str, Any] | None) -> MagnumError:
            assert cluster is not None  # a failed status is a visible cluster's
            return MagnumError(f"Magnum cluster {inst.name} {cluster['status']}: "
                               f"{cluster.get('status_reason') or 'no reason given'}"
                               + (f"; faults: {cluster['faults']}" if cluster.get("faults") else ""))

        def timeout(cluster: dict[str, Any] | None) -> str:
            return (f"Magnum cluster {inst.name} not CREATE_COMPLETE within {deadline.seconds:.0f} s "
                    f"(last: {_status_of(cluster)})")

        cluster = wait_for_status(lambda: self._get_cluster(inst.id), status, deadline, self.spec.poll_interval,
                                  ready=ClusterStatus.CREATE_COMPLETE, failed=FAILED, error=failed, timeout=timeout,
                                  retry=False)  # _get_cluster retries its own calls (api_retry_seconds)
        assert cluster is not None  # CREATE_COMPLETE is a visible cluster's status
        return cluster

    def write_kubeconfig(self, inst: Instance, path: Path) -> float:
        """The cluster's kubeconfig at ``path`` (0600), as ``openstack coe cluster config`` makes it."""
        from cryptography import x509  # cryptography: heavy, only for a cluster's credentials
        from cryptography.hazmat.primitives import hashes, serialization  # (the same)
        from cryptography.hazmat.primitives.asymmetric import rsa  # (the same)
        from cryptography.x509.oid import NameOID  # (the same)

        started = time.monotonic()
        ca = self._request("get", f"/certificates/{inst.id}").json()["pem"]
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
            x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters")])).sign(key, hashes.SHA256())
        cert = self._request("post", "/certificates", json={
            "cluster_uuid": inst.id, "csr": csr.public_bytes(serialization.Encoding.PEM).decode()}).json()["pem"]
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                    serialization.NoEncryption())
        server = str(inst.details.get("api_address") or inst.address or "")
        if not server:
            raise MagnumError(f"Magnum cluster {inst.name} is CREATE_COMPLETE without an api_address")

        def b64(data: str | bytes) -> str:
            return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()

        text = f"""apiVersion: v1
kind: Config
clusters:
- name: {inst.name}
  cluster:
    server: {server}
    certificate-authority-data: {b64(ca)}
users:
- name: admin
  user:
    client-certificate-data: {b64(cert)}
    client-key-data: {b64(key_pem)}
contexts:
- name: default
  context:
    cluster: {inst.name}
    user: admin
current-context: default
"""
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(path, 0o600)
        seconds = round(time.monotonic() - started, 3)
        inst.timings["kubeconfig"] = seconds
        return seconds

    def wait_api(self, inst: Instance, kubeconfig: Path, deadline: Deadline) -> float:
        """Until the cluster's Kubernetes API answers ``/version`` with the new credentials."""
        started = time.monotonic()
        url = urlparse(str(inst.details.get("api_address") or inst.address))

        def unanswered() -> str | None:
            """None once the API answers, else why it did not (it may take a while after CREATE_COMPLETE)."""
            try:
                with socket.create_connection((url.hostname or "", url.port or 443), timeout=3):
                    pass
                from kubernetes import client  # kubernetes: heavy, only where a cluster is used

                client.VersionApi(api_client(str(kubeconfig))).get_code()
            except Exception as exc:  # noqa: BLE001 - any failure: not answering yet
                return _first_line(exc)
            return None

        poll(unanswered, lambda why: why is None, deadline, self.spec.poll_interval, retry=False,
             timeout=lambda why: f"the Kubernetes API of Magnum cluster {inst.name} ({url.geturl()}) did not "
             f"answer within {deadline.seconds:.0f} s: {why}")
        seconds = round(time.monotonic() - started, 3)
        inst.timings["api_reachable"] = seconds
        return seconds

    def delete(self, instances: list[Instance], deadline: Deadline) -> dict[str, float]:
        out: dict[str, float] = {}
        for inst in instances:
            out[inst.id] = self._delete_one(inst, deadline)
            log.info("Magnum cluster %s deleted in %.1f s", inst.name, out[inst.id])
        return out

    def _delete_one(self, inst: Instance, deadline: Deadline) -> float:
        """DELETE, then wait until Magnum answers 404; seconds it took."""
        started = time.monotonic()
        resp = self._request("delete", f"/clusters/{inst.id}", ok=(202, 204, 404, 409))
        if resp.status_code == 409:  # still being created: Magnum refuses; wait for a final state
            log.info("Magnum cluster %s busy (%s); waiting to delete it", inst.name, _message(resp))
        poll(lambda: self._deleting(inst), lambda status: status is None, deadline, self.spec.poll_interval,
             retry=False,  # _request retries its own calls
             timeout=lambda status: f"Magnum cluster {inst.name} not gone within {deadline.seconds:.0f} s "
             f"(last: {status})")
        return round(time.monotonic() - started, 3)

    def _deleting(self, inst: Instance) -> str | None:
        """The status of a cluster being deleted, None once it is gone. A cluster Magnum is not
        deleting (a DELETE refused while it was busy) is asked again; DELETE_FAILED raises."""
        resp = self._request("get", f"/clusters/{inst.id}", ok=(200, 400, 404))
        if resp.status_code == 404:
            return None
        cluster = resp.json() if resp.status_code == 200 else {"status": ClusterStatus.CREATE_IN_PROGRESS}
        status = str(cluster.get("status", ""))
        if status == ClusterStatus.DELETE_FAILED:
            raise MagnumError(f"Magnum cluster {inst.name} DELETE_FAILED: {cluster.get('status_reason')}")
        if not _deletion_underway(status):
            self._request("delete", f"/clusters/{inst.id}", ok=(202, 204, 404, 409))
        return status

    def renew(self, instances: list[Instance], until: datetime) -> None:
        """Magnum labels are fixed at create: the lease lives on the run's namespace instead."""

    def find(self, run_id: str | None = None) -> dict[str, list[Instance]]:
        found: dict[str, list[Instance]] = {}
        clusters = self._request("get", "/clusters?limit=1000").json().get("clusters", [])
        for cluster in clusters:
            if not str(cluster.get("name", "")).startswith(f"{RESOURCE_PREFIX}-"):
                continue
            labels = cluster.get("labels") or {}
            if "dlbench" not in labels:  # the list view may omit labels: read the cluster
                labels = (self._get_cluster(cluster["uuid"]) or {}).get("labels") or {}
            tags = Tags.from_dict(labels)
            if tags is None or (run_id is not None and tags.run_id != run_id):
                continue
            found.setdefault(tags.run_id, []).append(Instance(
                id=cluster["uuid"], name=cluster["name"], platform=self.spec.platform, provider=PROVIDER,
                tags=tags, role=ROLE, address=cluster.get("api_address"),
                details={"kind": "cluster", "status": cluster.get("status")}))
        return found


def _message(resp: Any) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:300]
    errors = body.get("errors") if isinstance(body, dict) else None
    if errors:
        return "; ".join(str(e.get("detail") or e.get("title")) for e in errors)
    return str(body)[:300]


KUBECONFIG_SECRET = "kubeconfig-"
"""Run secret name prefix of a cluster's kubeconfig (a client key and certificate: a secret, kept
like the run's SSH key, never a file on a worker's disk between tasks; docs/storage.md)."""


def kubeconfig_secret(cluster_id: str) -> str:
    """By the cluster's UUID: its name repeats the run id, which the secret's key already holds
    (and secret names are short)."""
    return f"{KUBECONFIG_SECRET}{cluster_id}"


@contextlib.contextmanager
def _kubeconfigs(run_id: str) -> Iterator[list[Path]]:
    """Every kubeconfig of the run's clusters as 0600 files for the ``with`` block only."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(run_secrets.secret_file(run_id, name))
               for name in run_secrets.secret_names(run_id) if name.startswith(KUBECONFIG_SECRET)]


class MagnumBackend(ProvisioningBackend):
    """A Kubernetes cluster per run through :class:`MagnumDriver`, then the Kubernetes backend on
    it (see the module docstring); budget, rollback, release by tag and the timings archive are
    the shared :class:`~dlbench.providers.machines.ProvisioningBackend`'s."""

    ROLLBACK_RESERVE_MIN_S: ClassVar[float] = 0.0
    """A quarter of the budget is kept for the rollback, however short the budget (the rollback is
    :meth:`release`, with its own ``release_timeout``)."""

    settings: MagnumSettings
    driver: MagnumDriver

    def __init__(self, settings: MagnumSettings, driver: MagnumDriver | None = None) -> None:
        super().__init__(settings, driver or MagnumDriver(settings))

    def _demands(self, request: RunRequest) -> list[Demand]:
        platform = Platform(self.settings.platform)
        other = [p.value for p in request.platforms if p in self.settings.platforms and p != platform]
        if other:
            raise ValueError(f"magnum.platform: this provider's cluster is {self.settings.platform}; "
                             f"platforms {other} need another provider")
        if platform not in request.platforms:
            return []
        return [Demand(role="k8s", platform=platform.value, count=self.settings.node_count(platform))]

    def preflight(self, request: RunRequest) -> None:
        serving_fits(request, self.settings.memory, self.settings.gpus, "magnum.memory")
        demands = self._demands(request)
        if demands:
            self.driver.preflight(demands)

    def _k8s(self, kubeconfig: Path) -> KubernetesBackend:
        s = self.settings
        k8s = KubernetesSettings(
            platform=s.platform, kubeconfig=str(kubeconfig), namespace_prefix=s.namespace_prefix,
            docker_image=s.docker_image, image_pull_policy=s.image_pull_policy, cpus=s.cpus, memory=s.memory,
            lease_minutes=s.lease_minutes, gpus=s.gpus, expiry_hours=s.expiry_hours)
        return KubernetesBackend(k8s)

    def setup_seconds(self, budget_s: float | None) -> float:
        s = self.settings
        return min(s.ready_timeout + s.api_timeout, budget_s) if budget_s else s.ready_timeout + s.api_timeout

    def acquire(self, request: RunRequest, tags: Tags, budget_s: float | None = None) -> list[Target]:
        demands = self._demands(request)
        if not demands:
            return []
        s = self.settings
        deadline, _ = self.budgets(budget_s)
        with self.rolled_back(tags.run_id, lambda: self.release(request, tags, [])):
            self.driver.preflight(demands)
            instances = self.driver.create(demands[0], tags, BootConfig(public_key=""), deadline)
            self.driver.wait_ready(instances, deadline)
            cluster = instances[0]
            with run_secrets.private_dir(tags.run_id) as directory:
                path = directory / "kubeconfig"
                self.driver.write_kubeconfig(cluster, path)
                secret = run_secrets.put_secret(tags.run_id, kubeconfig_secret(cluster.id), path.read_text(),
                                                tags=tags)
                self.driver.wait_api(cluster, path, Deadline(max(min(s.api_timeout, deadline.remaining()), 1.0),
                                                             "Kubernetes API"))
                targets = [t.model_copy(update={"access": t.access.model_copy(update={"kubeconfig": secret})})
                           for t in self._k8s(path).acquire(request, tags)]
        out = []
        for target in targets:
            labels = {**target.labels, "provider": "magnum", "magnum_cluster": cluster.name,
                      "magnum_cluster_id": cluster.id, "magnum_template": str(cluster.details.get("template", ""))}
            out.append(target.model_copy(update={"labels": labels, "timings": {**target.timings, **cluster.timings}}))
        log.info("Magnum cluster %s ready: %s", cluster.name, cluster.timings)
        return out

    @contextlib.contextmanager
    def keep_alive(self, tags: Tags) -> Iterator[object]:
        """The run's namespace lease renewed while a task lives, through the first cluster's
        kubeconfig (a private file for that task's duration)."""
        with _kubeconfigs(tags.run_id) as paths:
            if not paths:
                yield None
                return
            with self._k8s(paths[0]).keep_alive(tags) as alive:
                yield alive

    def release(self, request: RunRequest, tags: Tags, targets: list[Target]) -> None:
        errors = []
        try:
            with _kubeconfigs(tags.run_id) as paths:
                for path in paths:
                    try:  # the namespace first (its jobs' containers go with it); the cluster goes anyway
                        delete_run(self._k8s(path).api, tags.run_id)
                    except Exception as exc:  # noqa: BLE001 - the cluster's deletion removes it too
                        log.warning("namespace of run %s on %s: %s", tags.run_id, path.name, exc)
        except KeyError as exc:  # a secret already gone: the clusters are deleted by tag below anyway
            log.warning("run %s: %s", tags.run_id, exc)
        started = time.monotonic()
        try:
            deleted = self.release_by_tag(tags.run_id)
        except Exception as exc:  # noqa: BLE001 - the kubeconfig still goes; the janitor retries by label
            errors.append(str(exc))
            deleted = {}
        for name in run_secrets.secret_names(tags.run_id):
            if name.startswith(KUBECONFIG_SECRET):
                run_secrets.delete_secret(tags.run_id, name)
        per_cluster = {t.labels["magnum_cluster_id"]: t for t in targets if t.labels.get("magnum_cluster_id")}
        if per_cluster:  # one provisioning document per cluster (its timings are the cluster's)
            self.archive_timings([t.model_copy(update={"instance_id": cid, "name": t.labels["magnum_cluster"]})
                                  for cid, t in per_cluster.items()], tags.run_id, deleted)
        log.info("Magnum release of run %s: %d cluster(s) in %.1f s", tags.run_id, len(deleted),
                 time.monotonic() - started)
        if errors:
            raise MagnumError("Magnum release incomplete: " + "; ".join(errors)
                              + " (the janitor deletes what is left, found by its labels; see docs/magnum.md)")


__all__ = ["ClusterTemplateSpec", "MagnumBackend", "MagnumDriver", "MagnumError", "MagnumSettings",
           "kubeconfig_secret"]
