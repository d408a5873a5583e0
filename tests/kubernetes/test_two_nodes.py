"""Two stand-in nodes (two devcloud machines): the network suite pod to pod across nodes, its peer a
pod of the run on the other node (``execution.placement.network_endpoint``'s Kubernetes branch),
deleted afterwards whatever happens; and a distributed cell whose roles are Jobs on different nodes
(TF_CONFIG, the headless Service, required anti-affinity), measured end to end by the scenario
code, its network figures included."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client

from dlbench.errors import JobSkipped
from dlbench.execution.executors import executor_for
from dlbench.execution.kubernetes.executor import KubernetesExecutor
from dlbench.execution.kubernetes.services import role_group, service_name
from dlbench.execution.placement import network_endpoint
from dlbench.workloads.result import ResultDocument, Status
from tests.support.fleet import job


def _pods_gone(api, ns: str, timeout: float = 60) -> list:
    """The namespace's pods once the cluster has finished deleting what was deleted (the garbage
    collector and the node agent work in the background): [] when all went."""
    deadline = time.monotonic() + timeout
    while (left := client.CoreV1Api(api).list_namespaced_pod(ns).items) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def _containers(machine, ns: str, timeout: float = 30) -> list[str]:
    """The namespace's containers left on ``machine`` once the node agent has removed those of
    deleted pods (it does so on its next look, as a kubelet does)."""
    deadline = time.monotonic() + timeout
    with machine.host() as host:
        while True:
            status, out = host.run(["docker", "ps", "-aq", "--filter", f"label=io.kubernetes.pod.namespace={ns}"], 30)
            if status != 0 or not out.split() or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert status == 0, out
    return out.split()


def test_network_suite_pod_to_pod_across_two_nodes(two_nodes, run_id, tmp_path):
    ns = two_nodes.namespace(run_id)
    targets = two_nodes.targets(ns)
    net = job(run_id, platform="container_on_bare_metal", suite="network", command="network")
    started = time.monotonic()
    with network_endpoint(net, targets[0], targets) as (peer, path):
        (pod,) = client.CoreV1Api(two_nodes.api).list_namespaced_pod(ns).items
        assert pod.metadata.labels["dlbench.run_id"] == run_id and pod.metadata.name.startswith("dlbench-netserve")
        assert pod.spec.node_name == two_nodes.node_names[1] and peer == pod.status.pod_ip
        assert peer == two_nodes.machines[1].address  # the node agent runs pods in the node's host network
        doc = executor_for(targets[0]).execute(net.model_copy(update={"args": {"server": peer}}), targets[0],
                                               tmp_path / "n.json", timeout=180)
    took = time.monotonic() - started
    assert doc.status is Status.OK, doc.error
    assert doc.labels["k8s_node"] == two_nodes.node_names[0] and doc.labels["network_peer"] == peer
    throughput = doc.sample("tcp_throughput").value
    assert throughput > 0
    assert path.startswith("pod-to-pod across nodes via none (no CNI: the devcloud's node agent"), path
    assert f"{two_nodes.node_names[0]} -> {two_nodes.node_names[1]}" in path
    assert _pods_gone(two_nodes.api, ns) == [] and _containers(two_nodes.machines[1], ns) == []
    latency = next((s for s in doc.samples if "latency" in s.metric), None)
    print(f"pod-to-pod TCP {throughput:.3g} Gbit/s"
          + (f", {latency.metric} {latency.value:.4g} {latency.unit}" if latency else "")
          + f"; peer pod + measurement {took:.1f} s; path: {path}")
    # Whatever happens in the block, the peer pod is deleted.
    with pytest.raises(RuntimeError, match="boom"), network_endpoint(net, targets[1], targets) as (peer, _):
        assert peer == two_nodes.machines[0].address
        raise RuntimeError("boom")
    assert _pods_gone(two_nodes.api, ns) == [] and _containers(two_nodes.machines[0], ns) == []


def test_network_suite_with_one_node_is_skipped_like_ssh_machines(two_nodes, run_id):
    targets = two_nodes.targets("t-one")
    net = job(run_id, platform="container_on_bare_metal", suite="network", command="network")
    with pytest.raises(JobSkipped, match="needs a second node"), network_endpoint(net, targets[0], targets[:1]):
        pass


def test_distributed_roles_as_jobs_on_two_nodes(two_nodes, run_id, tmp_path, monkeypatch):
    from dlbench.jobs import Job, job_id_for
    from dlbench.pipeline.scenarios import run_scenario
    from dlbench.workloads.profiles import Scenario

    ns = two_nodes.namespace(run_id)
    targets = two_nodes.targets(ns)
    args = {"model": "alexnet", "data": "synthetic", "mode": "multi_worker_mirrored"}  # 2 roles: 2 workers
    cell = Job(job_id=job_id_for(run_id, "container_on_bare_metal", "tf_cnn", args, 0, Scenario.DISTRIBUTED),
               run_id=run_id, platform="container_on_bare_metal", suite="tf_cnn", command="tf-cnn", args=args,
               profile="smoke", scenario=Scenario.DISTRIBUTED)
    submitted = []
    manifest = KubernetesExecutor.job_manifest

    def spy(self, one, target, name, timeout):  # noqa: ANN001, ANN202
        submitted.append(made := manifest(self, one, target, name, timeout))
        return made

    monkeypatch.setattr(KubernetesExecutor, "job_manifest", spy)
    started = time.monotonic()
    doc = run_scenario(cell, targets, 600, lambda j: tmp_path / f"{j.job_id}.json")
    took = time.monotonic() - started
    docs = [ResultDocument.read(p) for p in tmp_path.glob("*.json")]
    roles = [d for d in docs if d.labels.get("role") == "worker"]
    assert doc.status is Status.OK, (doc.error, [(d.labels.get("role"), d.error) for d in docs])
    assert len(roles) == 2 and all(d.status is Status.OK for d in roles)
    assert {d.labels["k8s_node"] for d in roles} == set(two_nodes.node_names)  # one role per node
    jobs = [m for m in submitted if "dlbench.group" in m["metadata"]["labels"]]
    assert len(jobs) == 2
    group = jobs[0]["metadata"]["labels"]["dlbench.group"]
    for m in jobs:
        spec = m["spec"]["template"]["spec"]
        env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
        tf_config = json.loads(env["TF_CONFIG"])
        assert tf_config["task"]["type"] == "worker" and len(tf_config["cluster"]["worker"]) == 2
        assert spec["subdomain"] == service_name(group)
        term = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert term["topologyKey"] == "kubernetes.io/hostname" and term["labelSelector"]["matchLabels"] == {
            "dlbench.group": group}
    assert {json.loads({e["name"]: e["value"] for e in m["spec"]["template"]["spec"]["containers"][0]["env"]}[
        "TF_CONFIG"])["task"]["index"] for m in jobs} == {0, 1}
    svc = client.CoreV1Api(two_nodes.api).read_namespaced_service(service_name(group), ns)
    assert svc.spec.cluster_ip == "None"
    # The scenario measured the network between the two role nodes, pod to pod through the CNI.
    (net,) = [d for d in docs if d.labels.get("role") == "network"]
    assert net.status is Status.OK, net.error
    assert net.labels["network_path"].startswith("pod-to-pod across nodes via none (no CNI"), net.labels["network_path"]
    assert _pods_gone(two_nodes.api, ns) == []  # role Jobs and the peer pod deleted
    assert role_group(cell) == ""  # the cell itself is no role
    print(f"distributed multi_worker_mirrored on 2 nodes: {took:.1f} s; network {net.labels['network_path']}; "
          f"cell samples {[(s.metric, round(s.value, 3)) for s in doc.samples][:6]}")
