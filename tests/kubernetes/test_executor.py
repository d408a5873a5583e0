"""KubernetesExecutor against the devcloud's real Kubernetes control plane (pods bound by the
real scheduler, run by the node agent on a devcloud node's engine): a job's document comes back
through the pod's log (also one over 1 MiB), the cluster's network and kubelet/runtime versions
are recorded, and every failure names the cluster's reason: ImagePullBackOff, OOMKilled,
Unschedulable, DeadlineExceeded, a pod killed while it ran. Jobs are deleted afterwards, the
run's namespace by label by the provider backend."""

from __future__ import annotations

import threading
import time

from kubernetes import client

from dlbench.execution.executors import executor_for
from dlbench.execution.kubernetes.executor import KubernetesExecutor
from dlbench.execution.kubernetes.labels import k8s_labels
from dlbench.execution.kubernetes.results import RESULT_PATH, decode_result
from dlbench.workloads.result import ResultDocument, Status
from tests.support.fleet import job


def _pods(cluster, ns: str) -> list:
    return client.CoreV1Api(cluster.api).list_namespaced_pod(ns).items


def _pods_gone(cluster, ns: str, timeout: float = 60) -> list:
    """The pods left once the cluster has finished deleting (the garbage collector deletes a
    deleted Job's pods in the background, the node agent then stops them): [] when all went."""
    deadline = time.monotonic() + timeout
    while (left := _pods(cluster, ns)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def test_job_succeeds_and_its_document_comes_back_through_the_log(cluster, run_id, tmp_path):
    ns = cluster.namespace(run_id)
    target = cluster.target(ns)
    one = job(run_id, platform="container_on_bare_metal")
    executor = executor_for(target)
    assert isinstance(executor, KubernetesExecutor)
    started = time.monotonic()
    doc = executor.execute(one, target, tmp_path / "r.json", timeout=300)
    took = time.monotonic() - started
    assert doc.status is Status.OK, doc.error
    assert doc.job_id == one.job_id and doc.sample("throughput").value > 0
    assert ResultDocument.read(tmp_path / "r.json").environment.versions["k8s_cni"] == "none"
    assert doc.environment.versions["k8s_kubelet"].endswith("dlbench-node-agent")
    assert doc.environment.versions["k8s_container_runtime"].startswith("docker://")
    assert "host network" in doc.labels["k8s_cni_note"] and doc.labels["k8s_node"] == cluster.node_name
    assert doc.environment.container.inside
    print(f"submit-to-result {took:.1f} s (workload elapsed {doc.sample('elapsed_time').value:.1f} s)")
    assert _pods_gone(cluster, ns) == []  # the Job and its pod are deleted, and so is the container on the node
    deadline = time.monotonic() + 30  # the node agent removes a deleted pod's container next (as a kubelet does)
    with cluster.machine.host() as host:
        while True:
            status, out = host.run(["docker", "ps", "-aq", "--filter", f"label=io.kubernetes.pod.namespace={ns}"], 30)
            if status != 0 or not out.split() or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert status == 0 and out.split() == [], out


def test_a_pytorch_job_runs_in_its_frameworks_image_on_the_node(cluster, run_id, tmp_path):
    """A tenant's framework in a pod: the job's image is PyTorch's (derived from the target's
    TensorFlow image), loaded on the node by prepare; the document says PyTorch trained."""
    target = cluster.target(cluster.namespace(run_id))
    one = job(run_id, platform="container_on_bare_metal", framework="pytorch")
    doc = executor_for(target).execute(one, target, tmp_path / "r.json", timeout=300)
    assert doc.status is Status.OK, doc.error
    assert doc.benchmark.parameters["framework"] == "pytorch" and doc.labels["framework"] == "pytorch"
    assert doc.environment.versions["torch"].startswith("2.13.0") and "tensorflow" not in doc.environment.versions
    assert doc.sample("throughput").value > 0 and doc.environment.container.inside


class BigDocument(KubernetesExecutor):
    """The same wrapper and transport, with a workload that writes a 1.5 MiB document."""

    def workload_command(self, job, data_dir):  # noqa: ANN001, ANN201
        make = ("import os,sys;from dlbench.workloads.result import *;"
                "d=ResultDocument(job_id=sys.argv[2],run_id=sys.argv[3],benchmark=Benchmark(suite='cpu',name='big'),"
                "environment=Environment(hostname='pod'));d.labels['big']=os.urandom(786432).hex();"
                "d.add('size',1.0,'B');d.write(sys.argv[1])")
        return ["sh", "-c", f'mkdir -p /tmp/dlbench-result && python -c "{make}" "$DLBENCH_RESULT" "$1" "$2"; '
                'python -c "$DLBENCH_EMIT" "$DLBENCH_RESULT"', "sh", job.job_id, job.run_id]


def test_a_document_over_one_mib_comes_back_intact(cluster, run_id, tmp_path):
    ns = cluster.namespace(run_id)
    one = job(run_id, platform="container_on_bare_metal", suite="cpu", command="cpu")
    started = time.monotonic()
    doc = BigDocument().execute(one, cluster.target(ns), tmp_path / "r.json", timeout=120)
    assert doc.status is Status.OK, doc.error
    assert len(doc.labels["big"]) == 2 * 786432 and (tmp_path / "r.json").stat().st_size > 2**20
    print(f"1.5 MiB document: submit-to-result {time.monotonic() - started:.1f} s")
    assert RESULT_PATH.startswith("/tmp/")


def test_log_transport_refuses_a_cut_or_altered_block():
    from dlbench.execution.kubernetes.results import BEGIN, END

    assert decode_result("no markers")[1].startswith("no result document")
    assert "incomplete" in decode_result(f"{BEGIN} sha256=ab bytes=1 encoded=4=====\nAAAA\n")[1]
    assert "cut" in decode_result(f"{BEGIN} sha256=ab bytes=1 encoded=8=====\nAAAA\n{END} sha256=ab=====\n")[1]


def test_missing_image_is_image_pull_back_off(cluster, run_id, tmp_path):
    ns = cluster.namespace(run_id)
    doc = KubernetesExecutor().execute(job(run_id, platform="container_on_bare_metal"),
                                       cluster.target(ns, image="dlbench-no-such-image:0"), tmp_path / "r.json",
                                       timeout=60)
    assert doc.status is Status.FAILED and doc.error.startswith("ImagePullBackOff"), doc.error
    assert "dlbench-no-such-image:0" in doc.error and "events:" in doc.error
    assert _pods_gone(cluster, ns) == []


def test_memory_limit_exceeded_is_oom_killed(cluster, run_id, tmp_path):
    ns = cluster.namespace(run_id)
    doc = KubernetesExecutor().execute(job(run_id, platform="container_on_bare_metal"),
                                       cluster.target(ns, memory="48Mi"), tmp_path / "r.json", timeout=120)
    assert doc.status is Status.FAILED and "OOMKilled" in doc.error and "48Mi" in doc.error, doc.error
    assert "exit 137" in doc.error


def test_unschedulable_names_the_scheduler_reason(cluster, run_id, tmp_path):
    ns = cluster.namespace(run_id)
    doc = KubernetesExecutor(unschedulable_after=2).execute(
        job(run_id, platform="container_on_bare_metal"), cluster.target(ns, memory="64Gi"), tmp_path / "r.json",
        timeout=60)
    assert doc.status is Status.FAILED and doc.error.startswith("Unschedulable"), doc.error
    assert "Insufficient memory" in doc.error and "FailedScheduling" in doc.error
    assert _pods_gone(cluster, ns) == []


def test_deadline_is_enforced_by_the_cluster(cluster, run_id, tmp_path):
    """The job cannot end by itself (100,000 measured steps), on any machine: only the cluster's
    deadline ends it (a smoke inception3 job finished inside 6 s on a faster machine)."""
    ns = cluster.namespace(run_id)
    slow = job(run_id, platform="container_on_bare_metal", measured_steps=100000)
    doc = KubernetesExecutor(grace=5).execute(slow, cluster.target(ns), tmp_path / "r.json", timeout=6)
    assert doc.status is Status.FAILED and "DeadlineExceeded" in doc.error, doc.error


def test_a_pod_killed_while_it_runs_fails_the_job(cluster, run_id, tmp_path):
    ns = cluster.namespace(run_id)
    core = client.CoreV1Api(cluster.api)
    slow = job(run_id, platform="container_on_bare_metal", measured_steps=100000)  # still running when killed
    result = {}
    worker = threading.Thread(target=lambda: result.update(doc=KubernetesExecutor().execute(
        slow, cluster.target(ns), tmp_path / "r.json", timeout=120)))
    worker.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = [p for p in core.list_namespaced_pod(ns).items if p.status.phase == "Running"]
        if running:
            break
        time.sleep(0.3)
    assert running, "the pod never ran"
    core.delete_namespaced_pod(running[0].metadata.name, ns)
    worker.join(120)
    doc = result["doc"]
    assert doc.status is Status.FAILED and "deleted (killed)" in doc.error, doc.error


def test_stop_ends_the_job_through_the_cluster_and_keeps_its_document(cluster, run_id, tmp_path):
    """The stop comes while the pod runs (seen through the API, then 3 s for TensorFlow to be in
    its run), and the job could not end by itself before the test's timeout: a fixed delay from
    submission raced the pod's start on a fast machine (CI: the job finished first)."""
    ns = cluster.namespace(run_id)
    stop, seen_running = threading.Event(), []
    endless = job(run_id, platform="container_on_bare_metal", measured_steps=100000)

    def stop_when_running() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not stop.is_set():
            if any(p.status.phase == "Running" for p in _pods(cluster, ns)):
                seen_running.append(time.monotonic())
                time.sleep(3)
                stop.set()
                return
            time.sleep(0.5)

    threading.Thread(target=stop_when_running, daemon=True).start()
    doc = KubernetesExecutor(grace=5).execute(endless, cluster.target(ns), tmp_path / "r.json", timeout=300,
                                              stop=stop)
    assert seen_running, "the pod never ran"
    assert doc.labels.get("stopped_by_executor") == "true", doc.error
    assert doc.status is Status.FAILED and doc.job_id == endless.job_id
    assert ResultDocument.read(tmp_path / "r.json").labels.get("stopped_by_executor") == "true"
    assert _pods_gone(cluster, ns) == []


def test_backend_namespace_per_run_targets_per_node_and_cleanup_by_label(cluster, run_id):
    from dlbench.providers.base import Tags
    from dlbench.providers.kubernetes import KubernetesBackend, KubernetesSettings, find_namespaces, sweep
    from dlbench.providers.registry import backend_for
    from dlbench.request import BenchmarkRequest

    settings = KubernetesSettings(kubeconfig=cluster.kubeconfig, node_selector={"dlbench.io/pool": "bench"},
                                  gpus="none")
    backend = backend_for(settings)
    assert isinstance(backend, KubernetesBackend)
    request = BenchmarkRequest.model_validate({"providers": [settings.model_dump()],
                                               "platforms": ["container_on_bare_metal"], "suites": ["cpu"]})
    tags = Tags(run_id=run_id)
    targets = backend.acquire(request, tags)
    try:
        (target,) = targets
        assert target.access.kind == "kubernetes" and target.access.node_name == cluster.node_name
        assert target.labels["k8s_kubelet"].endswith("dlbench-node-agent") and target.address == cluster.machine.address
        found = find_namespaces(cluster.api)[run_id]
        assert [name for name, _ in found] == [target.access.namespace]
        assert found[0][1].lease_until is not None
        backend.renew(tags)
        actions, kept = sweep(settings, lambda _t: True, api=cluster.api)
        assert run_id in {k["run_id"] for k in kept} and not [a for a in actions if a.run_id == run_id]
    finally:
        backend.release(request, tags, targets)
    assert run_id not in find_namespaces(cluster.api)
    # The janitor: a namespace whose lease lapsed is deleted; one without our label never is.
    from datetime import UTC, datetime, timedelta

    from dlbench.providers.kubernetes import _annotations

    core = client.CoreV1Api(cluster.api)
    dead = Tags(run_id=f"{run_id}d", lease_until=datetime.now(UTC) - timedelta(minutes=1))
    core.create_namespace({"metadata": {"name": f"dlbench-{run_id}d", "labels": k8s_labels(dead.run_id),
                                        "annotations": _annotations(dead)}})
    core.create_namespace({"metadata": {"name": f"theirs-{run_id}", "annotations": _annotations(dead)}})
    actions, _ = sweep(settings, lambda _t: True, api=cluster.api)
    mine = [a for a in actions if a.run_id.startswith(run_id)]
    assert [(a.run_id, a.released) for a in mine] == [(dead.run_id, True)] and "lease lapsed" in mine[0].reason
    names = [n.metadata.name for n in core.list_namespace().items]  # sweep waited: Terminating -> gone
    assert f"dlbench-{run_id}d" not in names and f"theirs-{run_id}" in names
    core.delete_namespace(f"theirs-{run_id}")


class RoleProbe(KubernetesExecutor):
    """A distributed role whose "workload" records its TF_CONFIG and what its peer's DNS name
    (``<role>-<index>.<headless service>``) resolves to, after ``pause`` seconds."""

    def __init__(self, pause: int = 0, **kwargs) -> None:  # noqa: ANN003
        super().__init__(**kwargs)
        self.pause = pause

    def workload_command(self, job, data_dir):  # noqa: ANN001, ANN201
        from dlbench.execution.kubernetes.services import role_group, service_name

        make = ("import os,sys,socket;from dlbench.workloads.result import *;"
                "d=ResultDocument(job_id=sys.argv[2],run_id=sys.argv[3],benchmark=Benchmark(suite='tf_cnn',name='r'),"
                "environment=Environment(hostname='pod'));d.labels['tf_config']=os.environ['TF_CONFIG'];"
                "d.labels['resolved']=socket.gethostbyname(sys.argv[4]);d.write(sys.argv[1])")
        return ["sh", "-c", f'sleep {self.pause}; mkdir -p /tmp/dlbench-result && python -c "{make}" '
                '"$DLBENCH_RESULT" "$1" "$2" "$3"; python -c "$DLBENCH_EMIT" "$DLBENCH_RESULT"', "sh",
                job.job_id, job.run_id, f"ps-0.{service_name(role_group(job))}"]


def test_distributed_roles_get_tf_config_a_headless_service_and_anti_affinity(cluster, run_id, tmp_path):
    import json

    from dlbench.execution.kubernetes.services import role_group, service_name

    ns = cluster.namespace(run_id)
    spec = json.dumps({"ps": [f"{cluster.machine.address}:2222"], "worker": ["198.18.99.2:2223"]})
    ps = job(run_id, platform="container_on_bare_metal", role="ps", task_index=0, cluster=spec)
    worker = job(run_id, platform="container_on_bare_metal", role="worker", task_index=0, cluster=spec)
    assert role_group(ps) == role_group(worker) != ""
    result = {}
    first = threading.Thread(target=lambda: result.update(ps=RoleProbe(pause=12).execute(
        ps, cluster.target(ns), tmp_path / "ps.json", timeout=120)))
    first.start()
    core = client.CoreV1Api(cluster.api)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not [p for p in core.list_namespaced_pod(ns).items
                                               if p.status.phase == "Running"]:
        time.sleep(0.3)
    # One node: the second role of the group may not share it (required anti-affinity).
    doc = RoleProbe(unschedulable_after=2).execute(worker, cluster.target(ns), tmp_path / "w.json", timeout=60)
    assert doc.status is Status.FAILED and "anti-affinity" in doc.error, doc.error
    first.join(120)
    doc = result["ps"]
    assert doc.status is Status.OK, doc.error
    assert json.loads(doc.labels["tf_config"]) == {"cluster": json.loads(spec), "task": {"type": "ps", "index": 0}}
    assert doc.labels["resolved"] == cluster.machine.address  # ps-0.<service> -> the node (host network)
    svc = core.read_namespaced_service(service_name(role_group(ps)), ns)
    assert svc.spec.cluster_ip == "None" and svc.spec.selector == {"dlbench.group": role_group(ps)}


def test_network_suite_without_a_peer_fails_visibly_instead_of_measuring_loopback(tmp_path):
    from dlbench.execution.kubernetes.executor import NETWORK_NO_PEER
    from dlbench.execution.targets import KubernetesAccess, Target

    target = Target(name="n", platform="container_on_bare_metal",
                    access=KubernetesAccess(image="x", namespace="ns", kubeconfig="/nonexistent"))
    doc = KubernetesExecutor().execute(job("r1", platform="container_on_bare_metal", suite="network",
                                           command="network"), target, tmp_path / "r.json", timeout=10)
    assert doc.status is Status.FAILED and doc.error == NETWORK_NO_PEER
