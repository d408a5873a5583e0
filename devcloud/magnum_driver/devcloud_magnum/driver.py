"""Magnum cluster driver ``devcloud`` (entry point ``magnum.drivers``), loaded by the real
magnum-api and magnum-conductor of the devcloud (docs/magnum.md).

Provides ``(bm|vm, devcloud, kubernetes)``: a cluster template whose Glance image has
``os_distro=devcloud`` (the devcloud's image ``dlbench-k8s``) gets this driver. A cluster is

* ``node_count`` devcloud Ironic nodes, each claimed with an Ironic allocation (resource class
  ``dlbench-bm``) and deployed through the devcloud's real Ironic with the node image (label
  ``devcloud_image``: ``dlbench-node`` by default, else ``stock``) and a per-cluster SSH key;
* one real Kubernetes control plane (``devcloud/k8s_control.py``: etcd, kube-apiserver,
  controller manager and scheduler 1.20.2, our node agent in the kubelet's place) on 127.0.0.1
  whose nodes are those machines, the apiserver serving HTTPS with a server certificate signed by
  the cluster's Magnum CA and accepting client certificates signed by that CA (what ``openstack
  coe cluster config`` hands out, ``O=system:masters``); ``api_address`` = its URL. Masters are
  those processes on the controller (no machine).

create/delete run in a thread of the conductor and write the cluster's status themselves (the
conductor's periodic sync runs every 10 s and would add up to 10 s); failures become
``CREATE_FAILED`` with ``status_reason`` and the worker nodegroup's reason (the API's
``faults``). Fault knob: ``.devcloud/run/magnum-create-failed`` (``devcloud/fault.sh
cluster-create-failed [n]``). Per-cluster state: ``.devcloud/openstack/magnum/clusters/<uuid>/``.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from magnum import objects
from magnum.common import context as mcontext
from magnum.common import exception
from magnum.conductor.handlers.common import cert_manager
from magnum.drivers.common import driver
from magnum.objects import fields
from oslo_config import cfg
from oslo_log import log as logging

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
CONF.register_opts([cfg.StrOpt("state"), cfg.StrOpt("clusters"), cfg.StrOpt("ironic"), cfg.StrOpt("repo")],
                   group="devcloud")
RESOURCE_CLASS = "dlbench-bm"
_LOCK = threading.Lock()


def _clusters_dir() -> Path:
    return Path(CONF.devcloud.clusters)


def _state_path(uuid: str) -> Path:
    return _clusters_dir() / uuid / "state.json"


def _write_state(cluster_uuid: str, create: bool = True, **fields_: Any) -> dict[str, Any]:
    path = _state_path(cluster_uuid)
    if not create and not path.exists():
        return {}
    path.parent.mkdir(parents=True, exist_ok=True)
    with _LOCK:
        state = json.loads(path.read_text()) if path.exists() else {}
        state.update(fields_)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(path)
    return state


def _read_state(uuid: str) -> dict[str, Any]:
    try:
        return json.loads(_state_path(uuid).read_text())
    except (OSError, ValueError):
        return {}


def _ironic(method: str, path: str, body: Any = None, timeout: float = 15) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(CONF.devcloud.ironic + path, data=data, method=method, headers={
        "X-OpenStack-Ironic-API-Version": "latest", "Content-Type": "application/json",
        "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        raise RuntimeError(f"Ironic {method} {path}: HTTP {exc.code}: {detail}") from None
    return json.loads(raw) if raw else None


def _consume_fault() -> bool:
    """True when the knob says this create must fail (counts down ``n``)."""
    path = Path(CONF.devcloud.state) / "run" / "magnum-create-failed"
    with _LOCK:
        try:
            value = path.read_text().strip()
        except OSError:
            return False
        if value.isdigit():
            left = int(value) - 1
            if left <= 0:
                path.unlink(missing_ok=True)
            else:
                path.write_text(f"{left}\n")
        return True


def _server_cert(cluster: Any, ctx: Any, directory: Path) -> dict[str, str]:
    """server.crt/server.key signed by the cluster's Magnum CA (127.0.0.1 + localhost), ca.crt."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca = cert_manager.get_cluster_ca_certificate(cluster, context=ctx)
    ca_pem = ca.get_certificate()
    ca_pem = ca_pem.encode() if isinstance(ca_pem, str) else ca_pem
    ca_cert = x509.load_pem_x509_certificate(ca_pem)
    passphrase = ca.get_private_key_passphrase()
    key_pem = ca.get_private_key()
    key_pem = key_pem.encode() if isinstance(key_pem, str) else key_pem
    pw = passphrase.encode() if isinstance(passphrase, str) else passphrase
    ca_key = serialization.load_pem_private_key(key_pem, password=pw or None)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {"cert": directory / "server.crt", "key": directory / "server.key", "client_ca": directory / "ca.crt"}
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    os.chmod(paths["key"], 0o600)
    paths["client_ca"].write_bytes(ca_pem)
    return {k: str(v) for k, v in paths.items()}


def _node_image(labels: dict[str, str]) -> str:
    name = labels.get("devcloud_image", "dlbench-node")
    repo, state = Path(CONF.devcloud.repo), Path(CONF.devcloud.state)
    candidates = [repo / "build" / "node-image" / "dlbench-node.tar.zst"] if name == "dlbench-node" else []
    candidates.append(state / "images" / f"{name}.tar")
    for path in candidates:
        if path.exists():
            return f"file://{path}"
    return f"file://{state / 'images' / 'stock.tar'}"


def _deploy(uuid: str, name: str, count: int, labels: dict[str, str], pubkey: str, deadline: float) -> list[dict]:
    """``count`` Ironic nodes claimed and deployed; raises with Ironic's own words."""
    nodes: list[dict[str, Any]] = []
    for k in range(count):
        alloc = _ironic("POST", "/v1/allocations", {"resource_class": RESOURCE_CLASS, "name": f"{name}-node-{k}",
                                                    "extra": {"magnum_cluster": uuid}})
        nodes.append({"allocation": alloc["uuid"]})
        _write_state(uuid, nodes=nodes)
        while True:
            alloc = _ironic("GET", f"/v1/allocations/{alloc['uuid']}")
            if alloc["state"] == "active":
                break
            if alloc["state"] == "error":
                raise RuntimeError(f"No valid host: Ironic allocation failed: {alloc.get('last_error')}")
            if time.monotonic() > deadline:
                raise RuntimeError("timed out waiting for an Ironic allocation")
            time.sleep(0.3)
        node = _ironic("GET", f"/v1/nodes/{alloc['node_uuid']}")
        nodes[-1].update(uuid=node["uuid"], name=node["name"], address=(node.get("extra") or {}).get(
            "test_host_address"))
        _write_state(uuid, nodes=nodes)
        hostname = f"{name}-node-{k}"[:63]
        _ironic("PATCH", f"/v1/nodes/{node['uuid']}", [
            {"op": "add", "path": "/instance_info/image_source", "value": _node_image(labels)},
            {"op": "add", "path": "/extra/magnum_cluster", "value": uuid}])
        _ironic("PUT", f"/v1/nodes/{node['uuid']}/states/provision", {
            "target": "active", "configdrive": {"meta_data": {"public_keys": {"magnum": pubkey},
                                                              "hostname": hostname}}})
    for node in nodes:
        while True:
            info = _ironic("GET", f"/v1/nodes/{node['uuid']}")
            if info["provision_state"] == "active":
                break
            if info["provision_state"] in ("deploy failed", "error") or info.get("last_error"):
                raise RuntimeError(f"Ironic deploy of {info['name']} failed: {info.get('last_error')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out deploying {info['name']} ({info['provision_state']})")
            time.sleep(0.3)
    return nodes


def _undeploy(nodes: list[dict[str, Any]]) -> None:
    for node in nodes:
        if node.get("uuid"):
            try:
                info = _ironic("GET", f"/v1/nodes/{node['uuid']}")
                if info["provision_state"] not in ("available", "enroll", "manageable"):
                    for attempt in range(50):  # 409 while the node is locked (a power sync, the deploy's end)
                        try:
                            _ironic("PUT", f"/v1/nodes/{node['uuid']}/states/provision", {"target": "deleted"})
                            break
                        except RuntimeError as exc:
                            if str(exc).partition("while it is in state")[2].lstrip("\\\" ").startswith("available"):
                                break  # undeployed meanwhile
                            if "HTTP 409" not in str(exc) or attempt == 49:
                                raise
                            time.sleep(0.2)
            except RuntimeError as exc:
                LOG.warning("undeploy %s: %s", node.get("name"), exc)
    for node in nodes:
        if node.get("uuid"):
            end = time.monotonic() + 120
            while time.monotonic() < end:
                try:
                    info = _ironic("GET", f"/v1/nodes/{node['uuid']}")
                    if info["provision_state"] == "available" and not info.get("reservation"):
                        if "magnum_cluster" in (info.get("extra") or {}):
                            _ironic("PATCH", f"/v1/nodes/{node['uuid']}",
                                    [{"op": "remove", "path": "/extra/magnum_cluster"}])
                        break
                except RuntimeError:
                    break
                time.sleep(0.3)
        if node.get("allocation"):
            try:
                _ironic("DELETE", f"/v1/allocations/{node['allocation']}")
            except RuntimeError as exc:
                if "404" not in str(exc):
                    LOG.warning("allocation %s: %s", node["allocation"], exc)


def _wait_ssh(address: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, 22), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"node {address} does not answer SSH")


def _ssh(key: Path, address: str) -> list[str]:
    return ["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
            "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5", f"root@{address}"]


def _preload(images: list[str], nodes: list[dict[str, Any]], key: Path, deadline: float) -> None:
    """The devcloud has no registry: images named in the label ``devcloud_preload_images`` are
    copied from this host's Docker engine into every node's engine (what a pull would do: like a
    pull, nothing moves when the node already has that image id, e.g. from its node image)."""
    here = {image: _image_id(image) for image in images}
    for node in nodes:
        while subprocess.run([*_ssh(key, node["address"]), "docker", "info"], capture_output=True,
                             timeout=30).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Docker engine of node {node['name']} does not answer")
            time.sleep(0.5)
        for image in images:
            if here[image] is not None and here[image] == _image_id(image, _ssh(key, node["address"])):
                continue
            save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            load = subprocess.run([*_ssh(key, node["address"]), "docker", "load"], stdin=save.stdout,
                                  capture_output=True, timeout=max(deadline - time.monotonic(), 30))
            save.stdout.close()  # type: ignore[union-attr]
            err = save.stderr.read().decode(errors="replace") if save.stderr else ""
            if save.wait() != 0 or load.returncode != 0:
                raise RuntimeError(f"could not put image {image} on node {node['name']}: "
                                   f"{err.strip()[-300:]} {load.stderr.decode(errors='replace').strip()[-300:]}")


def _image_id(image: str, via: list[str] | None = None) -> str | None:
    """``image``'s id in this host's engine, or through ``via`` (an ssh prefix) in a node's."""
    res = subprocess.run([*(via or []), "docker", "image", "inspect", "--format", "{{.Id}}", image],
                         capture_output=True, text=True, timeout=60)
    return res.stdout.strip() or None if res.returncode == 0 else None


def _control() -> Any:
    repo = Path(CONF.devcloud.repo)
    if str(repo / "devcloud") not in sys.path:
        sys.path.insert(0, str(repo / "devcloud"))
    try:
        import k8s_control
    except ImportError as exc:
        raise RuntimeError(f"the devcloud's Kubernetes control plane devcloud/k8s_control.py is not available ({exc})"
                           ) from None
    return k8s_control


def _start_control(directory: Path, nodes: list[dict[str, Any]], key: Path, tls: dict[str, str]) -> Any:
    specs = [{"name": n["name"], "address": n["address"], "ssh_user": "root", "ssh_key_path": str(key),
              "labels": {"magnum.openstack.org/role": "worker", "devcloud/node": n["name"]},
              "cpu": "2", "memory": "4Gi"} for n in nodes]
    return _control().start(str(directory / "control"), specs, tls=tls)


def _admin() -> Any:
    return mcontext.make_admin_context(all_tenants=True)


def _finish(uuid: str, status: str, reason: str | None, api_address: str | None = None,
            addresses: list[str] | None = None) -> None:
    ctx = _admin()
    cluster = objects.Cluster.get_by_uuid(ctx, uuid)
    cluster.status = status
    cluster.status_reason = reason
    if api_address:
        cluster.api_address = api_address
        cluster.coe_version = _control().KUBE_VERSION
        cluster.container_version = "docker-20.10"
    for ng in cluster.nodegroups:
        ng.status = status
        ng.status_reason = reason if not ng.is_default or ng.role != "master" else None
        if addresses is not None:
            ng.node_addresses = ["127.0.0.1"] if ng.role == "master" else addresses
        ng.save()
    cluster.save()


def _create(uuid: str, timeout_min: int | None) -> None:
    started = time.monotonic()
    deadline = started + 60 * (timeout_min or 60)
    ctx = _admin()
    for _ in range(100):  # the conductor saves the cluster (certificate refs, stack_id) after create_cluster
        cluster = objects.Cluster.get_by_uuid(ctx, uuid)
        if cluster.stack_id and cluster.ca_cert_ref:
            break
        time.sleep(0.1)
    directory = _clusters_dir() / uuid
    labels = dict(cluster.labels or {})
    try:
        if _consume_fault():
            raise RuntimeError("devcloud fault cluster-create-failed: the orchestration of the cluster failed")
        key = directory / "id_ed25519"
        if not key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"magnum-{uuid}", "-f", str(key)],
                           check=True, capture_output=True, timeout=60)
        count = cluster.node_count
        nodes = _deploy(uuid, cluster.name, count, labels, (directory / "id_ed25519.pub").read_text().strip(),
                        deadline)
        for node in nodes:
            _wait_ssh(node["address"], deadline)
        preload = [i.strip() for i in labels.get("devcloud_preload_images", "").split(",") if i.strip()]
        if preload:
            _preload(preload, nodes, key, deadline)
        tls = _server_cert(cluster, ctx, directory)
        _write_state(uuid, control=str(directory / "control"))
        api = _start_control(directory, nodes, key, tls).server
        _write_state(uuid, phase="complete", api_address=api, create_seconds=round(time.monotonic() - started, 2))
        _finish(uuid, fields.ClusterStatus.CREATE_COMPLETE, "devcloud cluster created",
                api_address=api, addresses=[n["address"] for n in nodes])
        LOG.info("devcloud cluster %s complete in %.1f s", uuid, time.monotonic() - started)
    except Exception as exc:  # noqa: BLE001 - every failure is the cluster's CREATE_FAILED reason
        LOG.warning("devcloud cluster %s failed: %s", uuid, exc)
        reason = str(exc)
        _write_state(uuid, phase="failed", reason=reason)
        _teardown(uuid)
        try:
            _finish(uuid, fields.ClusterStatus.CREATE_FAILED, reason)
        except exception.ClusterNotFound:
            pass


def _teardown(uuid: str) -> None:
    """Control plane stopped (its node agent first: the pods' containers go), nodes undeployed and
    released (idempotent; the processes are found through the plane's state file, also by a
    conductor restarted since the create)."""
    state = _read_state(uuid)
    try:
        if state.get("control"):
            _control().stop_from_state(state["control"])
    except Exception as exc:  # noqa: BLE001 - the nodes are released whatever happened here
        LOG.warning("control plane of %s: %s", uuid, exc)
    _undeploy(state.get("nodes") or [])
    _write_state(uuid, create=False, control=None, nodes=[])


_DELETING: set[str] = set()


def _delete(uuid: str) -> None:
    with _LOCK:
        if uuid in _DELETING:
            return  # one delete per cluster (the periodic sync may ask again while one runs)
        _DELETING.add(uuid)
    try:
        _delete_once(uuid)
    finally:
        with _LOCK:
            _DELETING.discard(uuid)


def _delete_once(uuid: str) -> None:
    started = time.monotonic()
    try:
        ctx = _admin()
        for _ in range(50):  # the conductor saves DELETE_IN_PROGRESS after delete_cluster returns
            if objects.Cluster.get_by_uuid(ctx, uuid).status == fields.ClusterStatus.DELETE_IN_PROGRESS:
                break
            time.sleep(0.1)
        _teardown(uuid)
        cluster = objects.Cluster.get_by_uuid(ctx, uuid)
        cert_manager.delete_certificates_from_cluster(cluster, context=ctx)
        for ng in objects.NodeGroup.list(ctx, uuid):
            ng.destroy()
        cluster.destroy()
        shutil.rmtree(_clusters_dir() / uuid, ignore_errors=True)
        LOG.info("devcloud cluster %s deleted in %.1f s", uuid, time.monotonic() - started)
    except exception.ClusterNotFound:
        return  # deleted already (the periodic sync may start a second delete of a cluster in DELETE_*)
    except Exception as exc:  # noqa: BLE001
        LOG.warning("devcloud cluster %s delete failed: %s", uuid, exc)
        try:
            _finish(uuid, fields.ClusterStatus.DELETE_FAILED, f"devcloud delete failed: {exc}")
        except Exception:  # noqa: BLE001
            pass


class Driver(driver.Driver):
    """See the module docstring."""

    @property
    def provides(self) -> list[dict[str, str]]:
        return [{"server_type": "bm", "os": "devcloud", "coe": "kubernetes"},
                {"server_type": "vm", "os": "devcloud", "coe": "kubernetes"}]

    def validate_master_size(self, node_count: int) -> None:
        if node_count != 1:
            raise exception.MasterNGSizeInvalid(requested_size=node_count)

    def create_cluster(self, context: Any, cluster: Any, cluster_create_timeout: Any) -> None:
        cluster.stack_id = cluster.uuid
        _write_state(cluster.uuid, uuid=cluster.uuid, name=cluster.name, phase="creating", nodes=[])
        threading.Thread(target=_create, args=(cluster.uuid, cluster_create_timeout), daemon=True,
                         name=f"create-{cluster.uuid}").start()

    def update_cluster_status(self, context: Any, cluster: Any, use_admin_ctx: bool = False) -> None:
        """The create/delete threads write the status; a cluster whose thread died with a
        conductor restart fails here instead of staying IN_PROGRESS forever."""
        state = _read_state(cluster.uuid)
        alive = any(t.name.endswith(cluster.uuid) for t in threading.enumerate())
        if alive:
            return
        if cluster.status == fields.ClusterStatus.CREATE_IN_PROGRESS and state.get("phase") == "creating":
            cluster.status = fields.ClusterStatus.CREATE_FAILED
            cluster.status_reason = "devcloud: the conductor restarted during the create"
            cluster.save()
        elif cluster.status == fields.ClusterStatus.DELETE_IN_PROGRESS:
            threading.Thread(target=_delete, args=(cluster.uuid,), daemon=True,
                             name=f"delete-{cluster.uuid}").start()

    def delete_cluster(self, context: Any, cluster: Any) -> None:
        threading.Thread(target=_delete, args=(cluster.uuid,), daemon=True, name=f"delete-{cluster.uuid}").start()

    def update_cluster(self, context: Any, cluster: Any, scale_manager: Any = None, rollback: bool = False) -> None:
        raise exception.NotSupported(operation="devcloud: resizing a cluster")

    def resize_cluster(self, context: Any, cluster: Any, resize_manager: Any, node_count: int,
                       nodes_to_remove: Any, nodegroup: Any = None) -> None:
        raise exception.NotSupported(operation="devcloud: resizing a cluster")

    def upgrade_cluster(self, context: Any, cluster: Any, cluster_template: Any, max_batch_size: Any,
                        nodegroup: Any, scale_manager: Any = None, rollback: bool = False) -> None:
        raise exception.NotSupported(operation="devcloud: upgrading a cluster")

    def create_federation(self, context: Any, federation: Any) -> None:
        raise exception.NotSupported(operation="devcloud: federations")

    def update_federation(self, context: Any, federation: Any) -> None:
        raise exception.NotSupported(operation="devcloud: federations")

    def delete_federation(self, context: Any, federation: Any) -> None:
        raise exception.NotSupported(operation="devcloud: federations")

    def create_nodegroup(self, context: Any, cluster: Any, nodegroup: Any) -> None:
        raise exception.NotSupported(operation="devcloud: extra nodegroups")

    def update_nodegroup(self, context: Any, cluster: Any, nodegroup: Any) -> None:
        raise exception.NotSupported(operation="devcloud: extra nodegroups")

    def delete_nodegroup(self, context: Any, cluster: Any, nodegroup: Any) -> None:
        raise exception.NotSupported(operation="devcloud: extra nodegroups")
