"""Fixtures of the Kubernetes tier: a real Kubernetes control plane over real devcloud nodes.

``devcloud/k8s_control.py`` starts etcd, kube-apiserver, kube-controller-manager and
kube-scheduler 1.20.2 (built from Debian's source, ``make kube``) and our node agent
(``devcloud/k8s_node.py``) in the kubelet's place: the agent runs each pod the real scheduler
bound to a node as a container of the pod's image on that node's own Docker engine. The node is
deployed through the devcloud's real Ironic (``tests.support.fleet.Fleet``) with the
dlbench-node image, and the workload image is loaded into its engine by ``prepare`` (about a
minute, once for the tier).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dlbench.workloads.profiles import Framework
from tests.support.fleet import NODE_IMAGE, Fleet, conn  # noqa: F401 - conn is a fixture used here
from tests.support.kubernetes import Cluster, TwoNodes, k8s_control
from tests.support.prereqs import require


@pytest.fixture(scope="package")
def cluster(conn: Any, tmp_path_factory: pytest.TempPathFactory, workload_image: str,  # noqa: F811
            framework_images: dict[str, str]) -> Iterator[Cluster]:
    from kubernetes import config

    from dlbench.execution.prepare import image_archives, prepare

    require(NODE_IMAGE.exists(), f"no dlbench-node image at {NODE_IMAGE} (run `make node-image`)")
    require(k8s_control.ready(), k8s_control.missing_reason())
    work = tmp_path_factory.mktemp("k8s")
    nodes = Fleet(conn, work)
    plane = None
    try:
        (machine,) = nodes.deploy(1, image="dlbench-node")
        with image_archives(machines=1), machine.host() as host:  # one machine: streamed, no archive
            # PyTorch's image too: a tenant's framework in a pod (test_executor's pytorch job).
            prep = prepare(host, host_runtime=False, docker_image=workload_image,
                           frameworks=(Framework.TENSORFLOW, Framework.PYTORCH))
        require(bool(prep.engine), f"no container engine on the devcloud node: {prep.engine_reason}")
        assert prep.image_loaded, prep.image_reason
        node_name = f"k8s-{machine.name}".lower()
        spec = [{"name": node_name, "address": machine.address, "ssh_user": "root", "ssh_key_path": machine.key_path,
                 "labels": {"dlbench.io/pool": "bench"}, "cpu": "2", "memory": "3Gi"}]
        plane = k8s_control.start(work / "control", spec)
        kubeconfig = str(plane.admin_kubeconfig)
        yield Cluster(kubeconfig, config.new_client_from_config(config_file=kubeconfig), machine, node_name, plane)
    finally:
        if plane is not None:
            k8s_control.stop(plane)
        nodes.release()


@pytest.fixture(scope="package")
def vllm_on_the_node(cluster: Cluster, workload_image: str, serving_image: str) -> str:
    """The serving suite's vLLM image in the tier's node engine, loaded by ``prepare`` as a run's
    preparation of a node does (about two minutes: 4 GB), for the tier's serving run; its tag."""
    from dlbench.execution.prepare import image_archives, prepare

    # one machine: the 4 GB image streamed to the node, no archive on this disk beside its copy
    with image_archives(machines=1), cluster.machine.host() as host:
        prep = prepare(host, host_runtime=False, docker_image=workload_image, frameworks=(Framework.VLLM,))
    assert prep.images.get(Framework.VLLM.value) == serving_image, prep.image_reason
    return serving_image


@pytest.fixture(scope="module")
def two_nodes(cluster: Cluster, conn: Any, tmp_path_factory: pytest.TempPathFactory,  # noqa: F811
              workload_image: str) -> Iterator[TwoNodes]:
    """The tier's node (workload image already loaded) plus one more deployed through Ironic with
    the image loaded by ``prepare``, under their own control plane (module-scoped: one extra node,
    about 80 s). Its stop removes the node agent's containers on both nodes: no test of the tier
    runs then."""
    from kubernetes import config

    from dlbench.execution.prepare import prepare

    work = tmp_path_factory.mktemp("k8s2")
    nodes = Fleet(conn, work)
    plane = None
    try:
        (second,) = nodes.deploy(1, image="dlbench-node")
        with second.host() as host:
            prep = prepare(host, host_runtime=False, docker_image=workload_image)
        require(bool(prep.engine), f"no container engine on the devcloud node: {prep.engine_reason}")
        assert prep.image_loaded, prep.image_reason
        machines = [cluster.machine, second]
        names = [f"k8s2-{m.name}".lower() for m in machines]
        spec = [{"name": n, "address": m.address, "ssh_user": "root", "ssh_key_path": m.key_path,
                 "labels": {"dlbench.io/pool": "bench"}, "cpu": "2", "memory": "3Gi"}
                for n, m in zip(names, machines, strict=True)]
        plane = k8s_control.start(work / "control", spec)
        kubeconfig = str(plane.admin_kubeconfig)
        yield TwoNodes(kubeconfig, config.new_client_from_config(config_file=kubeconfig), machines, names)
    finally:
        if plane is not None:
            k8s_control.stop(plane)
        nodes.release()

