"""The Kubernetes tier's clusters as its tests reach them: a real control plane
(``devcloud/k8s_control.py``) over devcloud nodes, the target and namespace of a run on it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from tests.support.prereqs import ROOT

sys.path.insert(0, str(ROOT / "devcloud"))
import k8s_control  # noqa: E402, F401 - devcloud/k8s_control.py (stdlib only); the tier's fixtures start it


@dataclass
class Cluster:
    kubeconfig: str
    api: Any
    machine: Any
    node_name: str
    plane: Any

    def target(self, namespace: str, image: str = "dlbench-workload:latest", **access: Any) -> Any:
        from dlbench.execution.targets import KubernetesAccess, Target

        fields = {"node_name": self.node_name, **access}
        return Target(name=self.node_name, platform="container_on_bare_metal", address=self.machine.address,
                      access=KubernetesAccess(image=image, namespace=namespace, kubeconfig=self.kubeconfig, **fields))

    def namespace(self, run_id: str) -> str:
        from kubernetes import client

        from dlbench.execution.kubernetes.labels import k8s_labels
        from dlbench.execution.kubernetes.namespaces import await_namespace

        name = f"t-{run_id}".lower()
        client.CoreV1Api(self.api).create_namespace({"metadata": {"name": name, "labels": k8s_labels(run_id)}})
        await_namespace(self.api, name)  # what the provider does after creating a run's namespace
        return name


@dataclass
class TwoNodes:
    """A second cluster over two devcloud nodes (the tier's node and one more): pods of one run on
    different nodes, reached at each other's pod IP (the node address: host network)."""

    kubeconfig: str
    api: Any
    machines: list[Any]
    node_names: list[str]

    def targets(self, namespace: str, image: str = "dlbench-workload:latest", **access: Any) -> list[Any]:
        from dlbench.execution.targets import KubernetesAccess, Target

        return [Target(name=node, platform="container_on_bare_metal", address=machine.address, instance_id=node,
                       access=KubernetesAccess(image=image, namespace=namespace, kubeconfig=self.kubeconfig,
                                               node_name=node, **access))
                for machine, node in zip(self.machines, self.node_names, strict=True)]

    def namespace(self, run_id: str) -> str:
        return Cluster.namespace(self, run_id)  # type: ignore[arg-type]
