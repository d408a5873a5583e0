"""The network suite's peer on Kubernetes: a pod of the run on another node.

The client measures against the peer pod's ``status.podIP``, so the number goes pod to pod
through the cluster's CNI, which the path label names; with one node the job is skipped, as on
SSH machines. The pod is the workload image's ``net-serve`` (the command the SSH machines' peer
container runs), deleted afterwards whatever happens.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from dlbench.errors import JobSkipped, PeerError
from dlbench.execution.container import WORKLOAD_ENV
from dlbench.execution.kubernetes.client import client_for
from dlbench.execution.kubernetes.facts import cluster_facts
from dlbench.execution.kubernetes.labels import k8s_annotations, k8s_labels
from dlbench.execution.kubernetes.pods import WAITING_FAILURES, api_message, container_state, warning_events
from dlbench.execution.peer import READY
from dlbench.jobs import Job
from dlbench.polling import Deadline, poll, until

if TYPE_CHECKING:
    from dlbench.execution.targets import KubernetesAccess, Target

log = logging.getLogger(__name__)

PEER_PORT = 5201
"""The network peer's iperf3 port (the latency echo is on the next one), as on SSH machines."""


def _same_cluster(a: Any, b: Any) -> bool:
    return (a.kubeconfig, a.conn_id, a.context, a.namespace) == (b.kubeconfig, b.conn_id, b.context, b.namespace)


def _node_of(target: Target) -> str:
    return getattr(target.access, "node_name", None) or target.instance_id or target.name


def network_endpoint(job: Job, target: Target, targets: list[Target]) -> Iterator[tuple[str | None, str]]:
    """``execution.placement.network_endpoint`` for a Kubernetes target (a generator it delegates to):
    the peer is a pod of the run on **another node** of the same cluster and platform (another
    target), its address the pod IP the cluster reports, so the number goes pod to pod through the
    cluster's CNI, which the path label names. One node: the job is skipped, as on SSH machines."""
    peers = [t for t in targets if t.platform == target.platform and type(t.access) is type(target.access)
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
    from kubernetes import client  # heavy client library, only when a cluster is called
    from kubernetes.client.exceptions import ApiException  # heavy client library, as above

    access = cast("KubernetesAccess", peer.access)  # network_endpoint picked Kubernetes targets only
    api = api or client_for(access)
    core: Any = client.CoreV1Api(api)  # the client's models are read as the API returns them
    ns, node = access.namespace, _node_of(peer)
    name = f"dlbench-netserve-{uuid.uuid4().hex[:8]}"
    labels = {**k8s_labels(run_id, f"netserve-{port}"), "dlbench.role": "netserve"}
    annotations = k8s_annotations(run_id, f"netserve-{port}", peer.expires_at)
    selector = {**(access.node_selector or {}), "kubernetes.io/hostname": node}
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"restartPolicy": "Never", "nodeSelector": selector, "terminationGracePeriodSeconds": 5,
                     "automountServiceAccountToken": False,
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
                            f"{api_message(exc)}") from exc
        created = True

        def look() -> tuple[Any, Any, str]:
            """The pod, its container's state, and its log once the container has started."""
            pod = core.read_namespaced_pod(name, ns)
            state = container_state(pod)
            text = ""
            if state is not None and (state.running is not None or state.terminated is not None):
                text = core.read_namespaced_pod_log(name, ns, container="netserve", _preload_content=False
                                                    ).data.decode(errors="replace")
            return pod, state, text

        def serving(seen: tuple[Any, Any, str]) -> bool:
            pod, state, text = seen
            if READY in text and pod.status.pod_ip and pod.status.phase == "Running":
                return True
            waiting = state.waiting if state is not None else None
            if pod.status.phase in ("Failed", "Succeeded") or (waiting is not None
                                                              and waiting.reason in WAITING_FAILURES):
                why = waiting.reason if waiting is not None and waiting.reason else pod.status.phase
                raise PeerError(f"network peer pod {ns}/{name} on {node} did not serve ({why}): {text.strip()[-600:]}"
                                + warning_events(core, ns, name))
            return False

        def not_serving(seen: tuple[Any, Any, str]) -> PeerError:
            pod, _, text = seen
            return PeerError(f"network peer pod {ns}/{name} on {node} not serving within {ready_timeout:.0f} s "
                             f"(phase {pod.status.phase}): {text.strip()[-600:]}" + warning_events(core, ns, name))

        # API errors are not retried: they reach the job as the cluster's answer.
        pod, _, _ = poll(look, serving, Deadline(ready_timeout, f"network peer pod {ns}/{name}", may_be_spent=True),
                         0.5, retry=False, give_up=not_serving)
        facts["host_network"] = "true" if pod.status.pod_ip == pod.status.host_ip else ""
        log.info("network peer pod %s/%s on %s at %s", ns, name, node, pod.status.pod_ip)
        yield pod.status.pod_ip, facts
    finally:
        if created:
            _delete_pod(core, ns, name)


def _delete_pod(core: Any, ns: str, name: str, timeout: float = 60.0) -> None:
    """Delete a pod and wait until the API no longer has it (PeerError if it stays)."""
    from kubernetes.client.exceptions import ApiException  # heavy client library, only when a cluster is called

    try:
        core.delete_namespaced_pod(name, ns, grace_period_seconds=5)
    except ApiException as exc:
        if exc.status != 404:
            raise PeerError(f"could not delete network peer pod {ns}/{name}: {exc.status} {exc.reason}") from exc

    def gone() -> bool:
        try:
            core.read_namespaced_pod(name, ns)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    if not until(gone, Deadline(timeout, f"deletion of network peer pod {ns}/{name}"), 0.5):
        raise PeerError(f"network peer pod {ns}/{name} still exists {timeout:.0f} s after its deletion")
