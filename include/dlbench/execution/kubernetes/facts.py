"""The cluster facts a container-on-Kubernetes number went through: the CNI (found by its
DaemonSet), the node's kubelet, container runtime and kernel. Recorded in the document's
``environment.versions`` and labels; a fact that cannot be read is said, never guessed."""

from __future__ import annotations

from typing import Any

CNI_DAEMONSETS = (("kube-flannel", "flannel"), ("flannel", "flannel"), ("calico-node", "calico"),
                  ("cilium", "cilium"), ("weave-net", "weave"), ("kube-router", "kube-router"),
                  ("canal", "canal"), ("antrea-agent", "antrea"), ("kube-ovn", "kube-ovn"))
"""DaemonSet name prefixes of the common CNIs (kube-system or their own namespace)."""
NETWORK_ANNOTATION = "dlbench.io/network"
"""A node annotation saying how its pods are networked where no CNI runs (the devcloud's node
agent: host network); read only when no CNI DaemonSet is found."""


def cluster_facts(api: Any, node_name: str | None) -> dict[str, str]:
    """CNI (by its DaemonSet, else the node's :data:`NETWORK_ANNOTATION`), kubelet and runtime
    versions of ``node_name`` (or the first node)."""
    from kubernetes import client  # heavy client library, only when a cluster is called

    facts: dict[str, str] = {}
    try:
        apps: Any = client.AppsV1Api(api)  # the client's models are read as the API returns them
        for ds in apps.list_daemon_set_for_all_namespaces().items:
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
        core: Any = client.CoreV1Api(api)
        nodes = [core.read_node(node_name)] if node_name else core.list_node().items[:1]
        for node in nodes:
            network = (node.metadata.annotations or {}).get(NETWORK_ANNOTATION)
            if network and facts["cni"].startswith("unknown"):
                facts["cni"], facts["cni_note"] = "none", network
            info = node.status.node_info
            facts.update(node=node.metadata.name, kubelet=info.kubelet_version,
                         container_runtime=info.container_runtime_version, node_kernel=info.kernel_version)
    except Exception as exc:  # noqa: BLE001
        facts["kubelet"] = f"unknown ({type(exc).__name__})"
    return facts
