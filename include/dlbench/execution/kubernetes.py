"""Run a workload as a Kubernetes Job on any cluster: the container platforms on Kubernetes.

Built on the official ``kubernetes`` Python client (not the Airflow cncf.kubernetes provider's
hook: that provider pins its own client range and brings the pod operator's machinery, while we
need five typed calls and nothing of Airflow on this path; an Airflow connection of type
``kubernetes`` is still accepted, see :func:`api_client`).

One Job per workload run (``backoffLimit: 0``, ``restartPolicy: Never``,
``activeDeadlineSeconds`` = the job's timeout, so the cluster itself enforces it), in the run's
namespace, pinned to the target's node (``nodeSelector`` ``kubernetes.io/hostname``), with the
workload image, requests = limits (CPU, memory, ``nvidia.com/gpu`` from the GPU allotment), our
labels (``dlbench=1``, ``dlbench.run_id``, ``dlbench.job_id``) and the run's expiry and the exact
ids as annotations (label values cannot hold them).

The result document comes back without a shared filesystem, on the container's log: the pod runs
``sh -c`` around the workload, which after it exits prints the document gzip-compressed and
base64-encoded between ``DLBENCH-RESULT-BEGIN``/``END`` markers carrying its SHA-256 and size
(:data:`EMIT`). The executor reads the pod's full log once the container has terminated, takes the
last complete block and verifies length and checksum. Limits: the block is printed last, so
kubelet log rotation (``containerLogMaxSize``, 10 MiB by default) only loses it when the
*encoded* document alone is larger than one log file (JSON compresses 5-20x: a document of tens
of MiB); the log must still exist (the Job is deleted only after it was read). SIGTERM (the
deadline, a stop) is forwarded to the workload, which writes its document, which is then printed.

Failures name the cluster's reason: ``ImagePullBackOff``/``ErrImagePull`` (with the pull event),
``OOMKilled`` (exit 137 and the memory limit), ``Unschedulable`` (the scheduler's message, after
:attr:`KubernetesExecutor.unschedulable_after` s), ``DeadlineExceeded`` (the Job's condition), a
pod deleted while it ran; the pod's Warning events are appended.

The cluster facts a container-on-Kubernetes number went through are recorded in the document's
``environment.versions`` and labels: the CNI (from its DaemonSet in ``kube-system``), the node's
kubelet and container runtime versions, the node name.

The network suite's peer is a pod of the run on another node (:func:`network_endpoint`,
:func:`network_peer_pod`): the client measures against its ``status.podIP``, through the CNI.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlbench.execution.base import DEFAULT_GRACE_S, Executor, StopWatch, finish, on_stop, timed_out
from dlbench.execution.container import WORKLOAD_ENV, labels_for
from dlbench.jobs import Job
from dlbench.workloads.result import ResultDocument

if TYPE_CHECKING:
    from dlbench.execution.targets import KubernetesAccess, Target

log = logging.getLogger(__name__)

BEGIN, END = "=====DLBENCH-RESULT-BEGIN", "=====DLBENCH-RESULT-END"
RESULT_PATH = "/tmp/dlbench-result/result.json"
CHUNK = 4096
"""Characters of base64 per log line (short lines: no runtime splits them)."""

EMIT = (
    "import base64,gzip,hashlib,sys\n"
    "p=sys.argv[1]\n"
    "try:\n data=open(p,'rb').read()\n"
    "except OSError:\n print('=====DLBENCH-RESULT-NONE=====',flush=True);sys.exit(0)\n"
    "enc=base64.b64encode(gzip.compress(data,6)).decode()\n"
    "h=hashlib.sha256(data).hexdigest()\n"
    "w=sys.stdout.write\n"
    f"w('\\n{BEGIN} sha256=%s bytes=%d encoded=%d=====\\n'%(h,len(data),len(enc)))\n"
    f"[w(enc[i:i+{CHUNK}]+'\\n') for i in range(0,len(enc),{CHUNK})]\n"
    f"w('{END} sha256=%s=====\\n'%h);sys.stdout.flush()\n"
)
"""Run by the pod's python after the workload: the document between markers on stdout."""

WRAPPER = (
    'mkdir -p "$(dirname "$DLBENCH_RESULT")"; '
    'python -m dlbench.workloads "$@" & pid=$!; '
    "trap 'kill -TERM $pid 2>/dev/null' TERM INT; "
    "wait $pid; rc=$?; "
    "if kill -0 $pid 2>/dev/null; then wait $pid; rc=$?; fi; "
    'python -c "$DLBENCH_EMIT" "$DLBENCH_RESULT"; exit $rc'
)
"""The pod's command (``sh -c WRAPPER sh ARGS``): the workload as a child that gets the TERM a
deadline or a stop sends to PID 1, then :data:`EMIT`."""

CNI_DAEMONSETS = (("kube-flannel", "flannel"), ("flannel", "flannel"), ("calico-node", "calico"),
                  ("cilium", "cilium"), ("weave-net", "weave"), ("kube-router", "kube-router"),
                  ("canal", "canal"), ("antrea-agent", "antrea"), ("kube-ovn", "kube-ovn"))
"""DaemonSet name prefixes of the common CNIs (kube-system or their own namespace)."""
WAITING_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                    "CreateContainerError", "ErrImageNeverPull")
POLL_S = 1.0
NETWORK_NO_PEER = ("the network suite on Kubernetes measures against a peer pod on another node, and this job "
                   "has none (no --server: dlbench.execution.placement.network_endpoint starts it); refusing to "
                   "measure the pod's own loopback instead")
PEER_PORT = 5201
"""The network peer's iperf3 port (the latency echo is on the next one), as on SSH machines."""


# -- labels, names, the connection -----------------------------------------------------------------

def label_value(text: str) -> str:
    """A valid Kubernetes label value (63 chars, alphanumerics at both ends) for any id."""
    value = re.sub(r"[^A-Za-z0-9_.-]", "-", text)
    if len(value) > 63 or value != text:
        value = f"{value[:50].strip('-_.')}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"
    return value.strip("-_.") or "x"


def k8s_labels(run_id: str, job_id: str = "") -> dict[str, str]:
    labels = {"dlbench": "1", "dlbench.run_id": label_value(run_id), "app.kubernetes.io/managed-by": "dlbench"}
    if job_id:
        labels["dlbench.job_id"] = label_value(job_id)
    return labels


def run_selector(run_id: str) -> str:
    return f"dlbench=1,dlbench.run_id={label_value(run_id)}"


def api_client(kubeconfig: str | None = None, conn_id: str | None = None, context: str | None = None) -> Any:
    """A ``kubernetes.client.ApiClient`` for a kubeconfig path or an Airflow connection of type
    ``kubernetes`` (extras ``kube_config_path`` or ``kube_config``, ``cluster_context``, with or
    without the ``extra__kubernetes__`` prefix), resolved here, at execution time: no credential
    ever travels in XCom."""
    from kubernetes import config

    if conn_id:
        from airflow.sdk.bases.hook import BaseHook

        extra = BaseHook.get_connection(conn_id).extra_dejson or {}

        def get(key: str) -> Any:
            return extra.get(key) or extra.get(f"extra__kubernetes__{key}")

        context = context or get("cluster_context")
        if get("kube_config"):
            inline = get("kube_config")
            import yaml

            loaded = inline if isinstance(inline, dict) else yaml.safe_load(inline)
            return config.new_client_from_config_dict(loaded, context=context)
        kubeconfig = get("kube_config_path") or kubeconfig
        if not kubeconfig:
            raise ValueError(f"Airflow connection {conn_id!r} has neither kube_config_path nor kube_config")
    return config.new_client_from_config(config_file=kubeconfig, context=context)


def client_for(access: KubernetesAccess) -> Any:
    return api_client(access.kubeconfig, access.conn_id, access.context)


def role_group(job: Job) -> str:
    """The group of a distributed role (the same for every role of one cell: its cluster spec), or ''."""
    if "role" not in job.args or "cluster" not in job.args:
        return ""
    return hashlib.sha256(f"{job.run_id}/{job.args['cluster']}".encode()).hexdigest()[:12]


def service_name(group: str) -> str:
    return f"dlbench-{group}"


def ensure_headless_service(core: Any, ns: str, group: str, run_id: str) -> None:
    """The group's headless Service (``clusterIP: None``): each role resolves as
    ``<role>-<index>.dlbench-<group>``. Created by the first role; removed with the run's namespace."""
    from kubernetes.client.exceptions import ApiException

    body = {"metadata": {"name": service_name(group), "labels": {**k8s_labels(run_id), "dlbench.group": group}},
            "spec": {"clusterIP": "None", "selector": {"dlbench.group": group}, "publishNotReadyAddresses": True}}
    try:
        core.create_namespaced_service(ns, body)
    except ApiException as exc:
        if exc.status != 409:
            raise


def cluster_facts(api: Any, node_name: str | None) -> dict[str, str]:
    """CNI (by its DaemonSet), kubelet and runtime versions of ``node_name`` (or the first node)."""
    from kubernetes import client

    facts: dict[str, str] = {}
    try:
        for ds in client.AppsV1Api(api).list_daemon_set_for_all_namespaces().items:
            name = ds.metadata.name
            cni = next((c for prefix, c in CNI_DAEMONSETS if name.startswith(prefix)), None)
            if cni and "cni" not in facts:
                facts["cni"], facts["cni_daemonset"] = cni, f"{ds.metadata.namespace}/{name}"
                note = (ds.metadata.annotations or {}).get("dlbench.io/cni-note")
                if note:
                    facts["cni_note"] = note
    except Exception as exc:  # noqa: BLE001 - a fact we could not read is said, never guessed
        facts["cni"] = f"unknown ({type(exc).__name__})"
    facts.setdefault("cni", "unknown (no known CNI DaemonSet)")
    try:
        core = client.CoreV1Api(api)
        nodes = [core.read_node(node_name)] if node_name else core.list_node().items[:1]
        for node in nodes:
            info = node.status.node_info
            facts.update(node=node.metadata.name, kubelet=info.kubelet_version,
                         container_runtime=info.container_runtime_version, node_kernel=info.kernel_version)
    except Exception as exc:  # noqa: BLE001
        facts["kubelet"] = f"unknown ({type(exc).__name__})"
    return facts


# -- the network suite's peer: a pod of the run on another node ----------------------------------------

def _same_cluster(a: Any, b: Any) -> bool:
    return (a.kubeconfig, a.conn_id, a.context, a.namespace) == (b.kubeconfig, b.conn_id, b.context, b.namespace)


def _node_of(target: Target) -> str:
    return getattr(target.access, "node_name", None) or target.instance_id or target.name


def network_endpoint(job: Job, target: Target, targets: list[Target]) -> Iterator[tuple[str | None, str]]:
    """``execution.placement.network_endpoint`` for a Kubernetes target (a generator it delegates to):
    the peer is a pod of the run on **another node** of the same cluster and platform (another
    target), its address the pod IP the cluster reports, so the number goes pod to pod through the
    cluster's CNI, which the path label names. One node: the job is skipped, as on SSH machines."""
    from dlbench.errors import JobSkipped

    peers = [t for t in targets if t.platform == target.platform and t.access.kind == "kubernetes"
             and _same_cluster(t.access, target.access) and _node_of(t) != _node_of(target) and not t.skip_reason]
    if not peers:
        raise JobSkipped(f"network suite skipped on {target.platform.value} (Kubernetes): it needs a second node "
                         f"of the run for its peer pod (the run has one; ask for 2 nodes of {target.platform.value})")
    peer = sorted(peers, key=lambda t: t.name)[0]
    with network_peer_pod(peer, job.run_id) as (address, facts):
        note = f" ({facts['cni_note']})" if facts.get("cni_note") else (
            " (host network: the pod IP is the node's)" if facts.get("host_network") else "")
        yield address, (f"pod-to-pod across nodes via {facts.get('cni', 'unknown CNI')}{note} "
                        f"({_node_of(target)} -> {_node_of(peer)})")


@contextlib.contextmanager
def network_peer_pod(peer: Target, run_id: str, port: int = PEER_PORT, *, api: Any = None,
                     ready_timeout: float = 90.0) -> Iterator[tuple[str, dict[str, str]]]:
    """The network servers (the workload image's ``net-serve``, the command the SSH machines' peer
    container runs) as a pod pinned to ``peer``'s node, labelled with the run; yields (its
    ``status.podIP``, the cluster facts of its node: ``cni``, ``cni_note``, ``host_network``).
    The pod is deleted afterwards whatever happens, and its deletion verified."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from dlbench.errors import PeerError
    from dlbench.execution.peer import READY

    access: KubernetesAccess = peer.access  # type: ignore[assignment]
    api = api or client_for(access)
    core = client.CoreV1Api(api)
    ns, node = access.namespace, _node_of(peer)
    name = f"dlbench-netserve-{uuid.uuid4().hex[:8]}"
    labels = {**k8s_labels(run_id, f"netserve-{port}"), "dlbench.role": "netserve"}
    annotations = {f"dlbench.io/{k.replace('dlbench.', '')}": v
                   for k, v in labels_for(run_id, f"netserve-{port}", peer.expires_at).items() if k != "dlbench"}
    selector = {**(access.node_selector or {}), "kubernetes.io/hostname": node}
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"restartPolicy": "Never", "nodeSelector": selector, "terminationGracePeriodSeconds": 5,
                     "containers": [{
                         "name": "netserve", "image": access.image, "imagePullPolicy": access.image_pull_policy,
                         "command": ["python", "-m", "dlbench.workloads", "net-serve", "--bind", "0.0.0.0",
                                     "--port", str(port)],
                         "env": [{"name": k, "value": v} for k, v in WORKLOAD_ENV.items()],
                         "ports": [{"containerPort": port, "protocol": "TCP", "name": "iperf3"},
                                   {"containerPort": port + 1, "protocol": "TCP", "name": "echo"}]}]}}
    facts = cluster_facts(api, node)
    created = False
    try:
        try:
            core.create_namespaced_pod(ns, body)
        except ApiException as exc:
            raise PeerError(f"the cluster refused the network peer pod on {node}: {exc.status} {exc.reason}: "
                            f"{_api_message(exc)}") from exc
        created = True
        deadline = time.monotonic() + ready_timeout
        while True:
            pod = core.read_namespaced_pod(name, ns)
            state = _container_state(pod)
            text = ""
            if state is not None and (state.running is not None or state.terminated is not None):
                text = core.read_namespaced_pod_log(name, ns, container="netserve", _preload_content=False
                                                    ).data.decode(errors="replace")
            if READY in text and pod.status.pod_ip and pod.status.phase == "Running":
                break
            waiting = state.waiting if state is not None else None
            if pod.status.phase in ("Failed", "Succeeded") or (waiting is not None
                                                              and waiting.reason in WAITING_FAILURES):
                why = waiting.reason if waiting is not None and waiting.reason else pod.status.phase
                raise PeerError(f"network peer pod {ns}/{name} on {node} did not serve ({why}): {text.strip()[-600:]}"
                                + _events(core, ns, name))
            if time.monotonic() > deadline:
                raise PeerError(f"network peer pod {ns}/{name} on {node} not serving within {ready_timeout:.0f} s "
                                f"(phase {pod.status.phase}): {text.strip()[-600:]}" + _events(core, ns, name))
            time.sleep(0.5)
        facts["host_network"] = "true" if pod.status.pod_ip == pod.status.host_ip else ""
        log.info("network peer pod %s/%s on %s at %s", ns, name, node, pod.status.pod_ip)
        yield pod.status.pod_ip, facts
    finally:
        if created:
            _delete_pod(core, ns, name)


def _delete_pod(core: Any, ns: str, name: str, timeout: float = 60.0) -> None:
    """Delete a pod and wait until the API no longer has it (PeerError if it stays)."""
    from kubernetes.client.exceptions import ApiException

    from dlbench.errors import PeerError

    try:
        core.delete_namespaced_pod(name, ns, grace_period_seconds=5)
    except ApiException as exc:
        if exc.status != 404:
            raise PeerError(f"could not delete network peer pod {ns}/{name}: {exc.status} {exc.reason}") from exc
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_pod(name, ns)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(0.5)
    raise PeerError(f"network peer pod {ns}/{name} still exists {timeout:.0f} s after its deletion")


# -- the executor ------------------------------------------------------------------------------------

class KubernetesExecutor(Executor):
    """One Job per workload run; the document back through the pod's log (see the module doc)."""

    def __init__(self, api: Any = None, grace: float = DEFAULT_GRACE_S, unschedulable_after: float = 60.0,
                 pull_backoff_after: float = 0.0, keep: bool = False) -> None:
        self.api = api
        self.grace = grace
        self.unschedulable_after = unschedulable_after
        """Seconds a pod may stay Unschedulable before the job fails (an autoscaler may add a node)."""
        self.pull_backoff_after = pull_backoff_after
        """Seconds of ImagePullBackOff tolerated (0: the first back-off fails the job)."""
        self.keep = keep

    def workload_command(self, job: Job, data_dir: str | None) -> list[str]:
        """The pod's command: the wrapper around ``python -m dlbench.workloads <job args>``."""
        return ["sh", "-c", WRAPPER, "sh", *job.workload_argv(RESULT_PATH, "/data" if data_dir else None)]

    def job_manifest(self, job: Job, target: Target, name: str, timeout: float) -> dict[str, Any]:
        access = target.access
        labels = k8s_labels(job.run_id, job.job_id)
        annotations = {f"dlbench.io/{k.replace('dlbench.', '')}": v
                       for k, v in labels_for(job.run_id, job.job_id, target.expires_at).items() if k != "dlbench"}
        limits: dict[str, str] = {}
        if getattr(access, "cpus", None):
            limits["cpu"] = f"{int(access.cpus * 1000)}m"  # type: ignore[union-attr]
        if getattr(access, "memory", None):
            limits["memory"] = access.memory  # type: ignore[union-attr]
        if access.gpus and access.gpus not in ("0", "all"):
            limits["nvidia.com/gpu"] = access.gpus
        elif access.gpus == "all":
            limits["nvidia.com/gpu"] = str(target.labels.get("gpus", "1"))
        env = [{"name": k, "value": v} for k, v in {**WORKLOAD_ENV, "DLBENCH_RESULT": RESULT_PATH,
                                                     "DLBENCH_EMIT": EMIT}.items()]
        container: dict[str, Any] = {
            "name": "workload", "image": access.image, "imagePullPolicy": access.image_pull_policy,  # type: ignore[union-attr]
            "command": self.workload_command(job, target.data_dir), "env": env,
            "resources": {"limits": limits, "requests": dict(limits)} if limits else {},
            "ports": [{"containerPort": p, "hostPort": p, "protocol": "TCP"}
                      for p in getattr(access, "publish", ()) or ()],
        }
        pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container],
                                    "terminationGracePeriodSeconds": int(self.grace),
                                    "activeDeadlineSeconds": int(timeout) + 5}
        selector = dict(getattr(access, "node_selector", {}) or {})
        if getattr(access, "node_name", None):
            selector["kubernetes.io/hostname"] = access.node_name  # type: ignore[union-attr]
        if selector:
            pod_spec["nodeSelector"] = selector
        group = role_group(job)
        if group:
            # A distributed role: TF_CONFIG, a stable DNS name through the group's headless Service
            # (<role>-<index>.<service>), and never two roles of a group on one node.
            role, index = str(job.args["role"]), int(job.args.get("task_index", 0))
            labels["dlbench.group"] = group
            env.append({"name": "TF_CONFIG", "value": json.dumps(
                {"cluster": json.loads(str(job.args["cluster"])), "task": {"type": role, "index": index}})})
            pod_spec["hostname"] = label_value(f"{role}-{index}").lower().replace("_", "-").replace(".", "-")
            pod_spec["subdomain"] = service_name(group)
            # Peers reach a role at its node's address (the scenario's cluster spec): bind its port there.
            own = (json.loads(str(job.args["cluster"])).get(role) or [""] * (index + 1))[index]
            port = own.rpartition(":")[2]
            if port.isdigit() and not any(p["containerPort"] == int(port) for p in container["ports"]):
                container["ports"].append({"containerPort": int(port), "hostPort": int(port), "protocol": "TCP"})
            pod_spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"dlbench.group": group}}, "topologyKey": "kubernetes.io/hostname"}]}}
        if target.data_dir:
            pod_spec["volumes"] = [{"name": "data", "hostPath": {"path": target.data_dir, "type": "Directory"}}]
            container["volumeMounts"] = [{"name": "data", "mountPath": "/data", "readOnly": job.suite != "disk"}]
        return {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": int(timeout), "ttlSecondsAfterFinished": 3600,
                     "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec}},
        }

    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float, *,
                stop: threading.Event | None = None) -> ResultDocument:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        access = target.access
        if job.suite == "network" and not job.args.get("server"):
            # Without a peer pod the workload would measure the pod's loopback: a visible failure,
            # never a number of the wrong path (network_endpoint below gives it its peer).
            return finish(job, None, archive_path, time.monotonic(), error=NETWORK_NO_PEER)
        api = self.api or client_for(access)  # type: ignore[arg-type]
        batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
        ns = access.namespace  # type: ignore[union-attr]
        name = f"dlbench-{job.job_id[:12]}-{uuid.uuid4().hex[:5]}".lower()
        facts = cluster_facts(api, getattr(access, "node_name", None))
        launched = time.monotonic()
        doc: ResultDocument | None = None
        error, output, ended = "", "", None
        watch = StopWatch()

        def stop_action(_: StopWatch) -> None:
            # The cluster ends it: a deadline of "now" makes the Job controller SIGTERM the pod
            # (grace, then SIGKILL) and keeps the pod and its log for the document.
            elapsed = int(time.monotonic() - launched)
            batch.patch_namespaced_job(name, ns, {"spec": {"activeDeadlineSeconds": max(1, elapsed)}})

        try:
            manifest = self.job_manifest(job, target, name, timeout)
            if role_group(job):
                ensure_headless_service(core, ns, role_group(job), job.run_id)
            batch.create_namespaced_job(ns, manifest)
            with on_stop(stop, stop_action, name=f"stop-{name}") as watch:
                error, pod = self._wait(batch, core, ns, name, timeout)
            ended = time.monotonic()
            if error.startswith("DeadlineExceeded") and not watch.fired:
                # The cluster enforced the job's timeout: one wording with every executor's timeout.
                error = timed_out(timeout, error)
            if pod is not None:
                output, doc, why = self._read_back(core, ns, pod)
                if doc is None and not error:
                    error = why
                elif doc is None:
                    error = f"{error}; {why}"
                if pod.spec.node_name:
                    facts.update({k: v for k, v in cluster_facts(api, pod.spec.node_name).items()
                                  if k in ("node", "kubelet", "container_runtime", "node_kernel")})
        except ApiException as exc:
            error = f"kubernetes API refused the job: {exc.status} {exc.reason}: {_api_message(exc)}"
        finally:
            if not self.keep:
                try:
                    batch.delete_namespaced_job(name, ns, propagation_policy="Background")
                except ApiException as exc:
                    if exc.status != 404:
                        log.warning("could not delete job %s/%s: %s", ns, name, exc.reason)
        doc = finish(job, doc, archive_path, launched, error=error, output=output, stopped=watch, ended=ended)
        for key in ("cni", "kubelet", "container_runtime"):
            if facts.get(key):
                doc.environment.versions[f"k8s_{key}"] = facts[key]
        for key, value in facts.items():
            doc.labels[f"k8s_{key}"] = value
        doc.labels["k8s_job"] = f"{ns}/{name}"
        doc.write(archive_path)
        return doc

    def _wait(self, batch: Any, core: Any, ns: str, name: str, timeout: float) -> tuple[str, Any]:
        """Poll the Job and its pod until the pod's container has terminated or the job cannot
        run; (error or "", the pod or None)."""
        from kubernetes.client.exceptions import ApiException

        deadline = time.monotonic() + timeout + self.grace + 60
        unschedulable_since = backoff_since = None
        pod = None
        while True:
            job = batch.read_namespaced_job(name, ns)
            pods = core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items
            if pods:
                pod = pods[0]
            elif pod is not None:  # it had a pod, which is gone: deleted (killed) while it ran
                try:
                    pod = core.read_namespaced_pod(pod.metadata.name, ns)
                except ApiException:
                    return (f"pod {pod.metadata.name} was deleted (killed) while it ran"
                            + _events(core, ns, pod.metadata.name) + _job_reason(job)), None
            failed = _job_reason(job)
            if pod is not None:
                state = _container_state(pod)
                if state is not None and state.terminated is not None:
                    return _terminated_error(pod, state.terminated, failed) + (
                        _events(core, ns, pod.metadata.name) if state.terminated.exit_code else ""), pod
                waiting = state.waiting if state is not None else None
                if waiting is not None and waiting.reason in WAITING_FAILURES:
                    backoff_since = backoff_since or time.monotonic()
                    if waiting.reason != "ErrImagePull" and time.monotonic() - backoff_since >= self.pull_backoff_after:
                        return (f"{waiting.reason}: image {pod.spec.containers[0].image!r} could not be pulled: "
                                f"{waiting.message or ''}" + _events(core, ns, pod.metadata.name)), None
                unschedulable = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"
                                      and c.status == "False" and c.reason == "Unschedulable"), None)
                if unschedulable is not None:
                    unschedulable_since = unschedulable_since or time.monotonic()
                    if time.monotonic() - unschedulable_since >= self.unschedulable_after:
                        return (f"Unschedulable: {unschedulable.message}" + _events(core, ns, pod.metadata.name)), None
                else:
                    unschedulable_since = None
                if failed and pod.status.phase in ("Pending", "Failed"):
                    return failed + _events(core, ns, pod.metadata.name), None
            elif failed:
                return failed, None
            if time.monotonic() > deadline:
                return timed_out(timeout, f"job {ns}/{name} still {pod.status.phase if pod else 'without pod'}"), pod
            time.sleep(POLL_S)

    @staticmethod
    def _read_back(core: Any, ns: str, pod: Any) -> tuple[str, ResultDocument | None, str]:
        """(log, document or None, why not)."""
        raw = core.read_namespaced_pod_log(pod.metadata.name, ns, container="workload", _preload_content=False)
        text = raw.data.decode(errors="replace")
        doc, why = decode_result(text)
        tail = text[:text.rfind(BEGIN)] if BEGIN in text else text
        return tail[-4000:], doc, why


def decode_result(text: str) -> tuple[ResultDocument | None, str]:
    """The last complete, verified document between the markers of a pod's log."""
    start = text.rfind(BEGIN)
    if start < 0:
        if "=====DLBENCH-RESULT-NONE=====" in text:
            return None, "the workload wrote no result document"
        return None, "no result document on the pod's log (the container ended before printing it)"
    head, _, rest = text[start:].partition("\n")
    fields = dict(re.findall(r"(\w+)=([0-9a-f]+)", head))
    body, found, _ = rest.partition(END)
    if not found:
        return None, "the result document on the pod's log is incomplete (no end marker: log rotated or cut)"
    encoded = "".join(body.split())
    if str(len(encoded)) != fields.get("encoded"):
        return None, f"the result document on the pod's log is cut: {len(encoded)} of {fields.get('encoded')} chars"
    try:
        data = gzip.decompress(base64.b64decode(encoded))
    except (ValueError, OSError) as exc:
        return None, f"the result document on the pod's log does not decode: {exc}"
    if hashlib.sha256(data).hexdigest() != fields.get("sha256") or str(len(data)) != fields.get("bytes"):
        return None, "the result document on the pod's log fails its checksum"
    try:
        return ResultDocument.model_validate_json(data), ""
    except ValueError as exc:
        return None, f"unreadable result document from the pod's log: {exc}"


def _container_state(pod: Any) -> Any:
    statuses = pod.status.container_statuses or []
    return statuses[0].state if statuses else None


def _job_reason(job: Any) -> str:
    for cond in job.status.conditions or []:
        if cond.type == "Failed" and cond.status == "True":
            return f"{cond.reason}: {cond.message}"
    return ""


def _terminated_error(pod: Any, term: Any, job_failed: str) -> str:
    if term.exit_code == 0 and not job_failed:
        return ""
    limit = ((pod.spec.containers[0].resources or {}).limits or {}) if pod.spec.containers[0].resources else {}
    if term.reason == "OOMKilled":
        return f"OOMKilled: the workload exceeded its memory limit {limit.get('memory', '?')} (exit {term.exit_code})"
    if (pod.status.reason or "") == "DeadlineExceeded" or job_failed.startswith("DeadlineExceeded"):
        return f"DeadlineExceeded: the job ran past activeDeadlineSeconds (exit {term.exit_code})"
    why = f"workload container exited with status {term.exit_code} ({term.reason})"
    return f"{why}; job {job_failed}" if job_failed else why


def _events(core: Any, ns: str, pod_name: str) -> str:
    """The pod's Warning events, oldest first, as one clause."""
    try:
        events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={pod_name}").items
    except Exception:  # noqa: BLE001 - the error is already said; events only add detail
        return ""
    warnings = [f"{e.reason}: {e.message}" for e in events if e.type == "Warning"]
    return f" [events: {'; '.join(dict.fromkeys(warnings))[:1500]}]" if warnings else ""


def _api_message(exc: Any) -> str:
    try:
        return json.loads(exc.body).get("message", "")
    except (TypeError, ValueError):
        return str(exc.body or "")[:500]
