"""The real control plane (kube-apiserver, controller manager, scheduler 1.20.2) with our node
agent in the kubelet's place: what only a real control plane can fail. Objects deserialise into
the official client's models; the real Job controller completes Jobs and enforces deadlines; the
real scheduler decides requests and selectors with its own events; the garbage collector and the
namespace controller cascade deletions through the agent; the real RBAC limits a run's
credentials to its namespace (dlbench.execution.kubernetes.rbac); Magnum-style TLS client
certificates authenticate."""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.support.kubernetes import k8s_control


def _raw(cluster, path: str, model: str):
    """GET ``path`` raw (the admin client certificate) and deserialise it into ``model`` with the
    client's own ApiClient (which validates required fields and types)."""
    pki = cluster.plane.state_dir / "pki"
    ctx = ssl.create_default_context(cafile=str(cluster.plane.ca))
    ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    with urllib.request.urlopen(cluster.plane.server + path, context=ctx, timeout=30) as resp:
        data = resp.read()
    obj = cluster.api.deserialize(data.decode(), model, "application/json")
    assert obj is not None
    return obj, json.loads(data)


def _wait(what, fn, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _containers(cluster, ns: str) -> list[str]:
    with cluster.machine.host() as host:
        out = host.check(["docker", "ps", "-aq", "--filter", f"label=io.kubernetes.pod.namespace={ns}"], timeout=60)
    return out.split()


def job_body(name: str, command: list[str], image: str = "dlbench-workload:latest", **pod: object) -> dict:
    return {"metadata": {"name": name, "labels": {"dlbench": "1", "test": name}},
            "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"test": name}}, "spec": {
                "restartPolicy": "Never", **pod,
                "containers": [{"name": "main", "image": image, "command": command}]}}}}


def test_objects_match_the_client_models_and_a_job_completes(cluster, run_id):
    api = cluster.api
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    assert client.VersionApi(api).get_code().git_version == k8s_control.KUBE_VERSION
    ns = cluster.namespace(run_id)
    batch.create_namespaced_job(ns, job_body("ok", ["sh", "-c", "echo hello; echo from-the-pod"]))
    pod = _wait("pod", lambda: core.list_namespaced_pod(ns, label_selector="job-name=ok").items)[0]
    job = _wait("complete", lambda: (j := batch.read_namespaced_job("ok", ns)).status.succeeded and j)
    assert [c.type for c in job.status.conditions if c.status == "True"][-1] == "Complete"
    pod = core.read_namespaced_pod(pod.metadata.name, ns)
    assert pod.status.phase == "Succeeded" and pod.spec.node_name == cluster.node_name
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 0 and term.reason == "Completed"
    # Logs go apiserver -> the node agent's kubelet endpoint (TLS both ways) -> the node's engine.
    log = core.read_namespaced_pod_log(pod.metadata.name, ns, container="main")
    assert log.splitlines() == ["hello", "from-the-pod"]
    assert core.read_namespaced_pod_log(pod.metadata.name, ns, container="main", tail_lines=1) == "from-the-pod\n"
    for path, model in [(f"/api/v1/namespaces/{ns}/pods", "V1PodList"), ("/api/v1/nodes", "V1NodeList"),
                        (f"/apis/batch/v1/namespaces/{ns}/jobs", "V1JobList"),
                        (f"/api/v1/namespaces/{ns}/events", "CoreV1EventList"),
                        ("/api/v1/namespaces", "V1NamespaceList"),
                        ("/apis/apps/v1/namespaces/kube-system/daemonsets", "V1DaemonSetList"),
                        (f"/api/v1/namespaces/{ns}/services", "V1ServiceList"), ("/version", "VersionInfo")]:
        obj, raw = _raw(cluster, path, model)
        if "items" in raw:
            assert len(obj.items) == len(raw["items"])
    node = core.read_node(cluster.node_name)
    assert node.status.node_info.kubelet_version.endswith("dlbench-node-agent")
    assert node.status.node_info.container_runtime_version.startswith("docker://2")
    assert any(a.type == "InternalIP" and a.address == cluster.machine.address for a in node.status.addresses)
    events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={pod.metadata.name}").items
    by_reason = {e.reason: e.reporting_component or e.source.component for e in events}
    assert by_reason.get("Scheduled") == "default-scheduler", by_reason  # the real scheduler bound it
    assert {"Pulled", "Created", "Started"} <= set(by_reason), by_reason
    job_events = core.list_namespaced_event(ns, field_selector="involvedObject.kind=Job").items
    assert {e.reason for e in job_events} >= {"SuccessfulCreate", "Completed"}  # the real Job controller
    assert job.spec.ttl_seconds_after_finished is None  # not set by this body; the executor's is tested there
    # Foreground deletion: the garbage collector deletes the pod, the agent removes its container.
    batch.delete_namespaced_job("ok", ns, propagation_policy="Foreground")
    _wait("pod deleted", lambda: not core.list_namespaced_pod(ns, label_selector="job-name=ok").items)
    _wait("container removed", lambda: not _containers(cluster, ns))


def test_namespace_deletion_cascades_to_running_jobs_and_their_containers(cluster, run_id):
    core, batch = client.CoreV1Api(cluster.api), client.BatchV1Api(cluster.api)
    ns = cluster.namespace(run_id)
    batch.create_namespaced_job(ns, job_body("sleeper", ["sleep", "600"], terminationGracePeriodSeconds=2))
    _wait("running", lambda: [p for p in core.list_namespaced_pod(ns).items if p.status.phase == "Running"])
    assert len(_containers(cluster, ns)) == 1
    started = time.monotonic()
    core.delete_namespace(ns)
    _wait("namespace gone", lambda: ns not in [n.metadata.name for n in core.list_namespace().items], timeout=120)
    assert not _containers(cluster, ns)
    assert time.monotonic() - started < 60


def test_empty_dir_volumes_as_the_kubelet_makes_them(cluster, run_id):
    """A memory-backed emptyDir is a tmpfs of its sizeLimit (a serving pod's /dev/shm: vLLM's engine
    fails in the runtime's 64 MiB), any other a volume on the node's disk; both go with the pod."""
    core, batch = client.CoreV1Api(cluster.api), client.BatchV1Api(cluster.api)
    ns = cluster.namespace(run_id)
    body = job_body("vols", ["sh", "-c", "stat -f -c '%T' /dev/shm /scratch; df -B1 --output=size /dev/shm | tail -n 1;"
                             " echo kept > /scratch/f && cat /scratch/f"],
                    volumes=[{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}},
                             {"name": "scratch", "emptyDir": {}}])
    body["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "dshm", "mountPath": "/dev/shm"}, {"name": "scratch", "mountPath": "/scratch"}]
    batch.create_namespaced_job(ns, body)
    _wait("complete", lambda: batch.read_namespaced_job("vols", ns).status.succeeded, timeout=120)
    pod = core.list_namespaced_pod(ns, label_selector="job-name=vols").items[0]
    shm_fs, scratch_fs, size, kept = core.read_namespaced_pod_log(pod.metadata.name, ns, container="main").split()
    assert (shm_fs, int(size), kept) == ("tmpfs", 256 * 2**20, "kept")
    assert scratch_fs != "tmpfs"  # on the node's disk, as a kubelet's emptyDir without a medium
    (container,) = _containers(cluster, ns)
    with cluster.machine.host() as host:
        volumes = host.check(["docker", "inspect", "--format", "{{range .Mounts}}{{.Name}} {{end}}", container],
                             timeout=60).split()
    assert len(volumes) == 1, volumes  # the tmpfs has no volume; the disk one is the container's own
    batch.delete_namespaced_job("vols", ns, propagation_policy="Foreground")
    _wait("container removed", lambda: not _containers(cluster, ns))
    with cluster.machine.host() as host:
        status, out = host.run(["docker", "volume", "inspect", volumes[0]], 60)
    assert status != 0, out  # removed with its container, as the kubelet removes a pod's emptyDir


def test_the_scheduler_and_the_agent_report_failures_like_kubernetes(cluster, run_id):
    core, batch = client.CoreV1Api(cluster.api), client.BatchV1Api(cluster.api)
    ns = cluster.namespace(run_id)
    big = job_body("big", ["true"])
    big["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"memory": "64Gi"}}
    batch.create_namespaced_job(ns, big)
    batch.create_namespaced_job(ns, job_body("elsewhere", ["true"], nodeSelector={"dlbench.io/pool": "gpu"}))
    batch.create_namespaced_job(ns, job_body("noimage", ["true"], image="dlbench-no-such-image:0"))
    for name, why in (("big", "Insufficient memory"), ("elsewhere", "didn't match Pod's node affinity")):
        pod = _wait(name, lambda n=name: [p for p in core.list_namespaced_pod(ns, label_selector=f"job-name={n}").items
                                          if p.status.conditions])[0]
        cond = pod.status.conditions[0]
        assert (cond.type, cond.status, cond.reason) == ("PodScheduled", "False", "Unschedulable")
        assert why in cond.message and pod.status.phase == "Pending", cond.message
        events = _wait("FailedScheduling", lambda p=pod: core.list_namespaced_event(
            ns, field_selector=f"involvedObject.name={p.metadata.name}").items)
        assert events[0].reason == "FailedScheduling" and events[0].type == "Warning"
        assert "default-scheduler" in (events[0].reporting_component, events[0].source.component)

    def backoff():
        pods = core.list_namespaced_pod(ns, label_selector="job-name=noimage").items
        statuses = pods and pods[0].status.container_statuses
        return statuses and statuses[0].state.waiting and \
            statuses[0].state.waiting.reason == "ImagePullBackOff" and pods[0]

    pod = _wait("ImagePullBackOff", backoff)
    reasons = [e.reason for e in core.list_namespaced_event(
        ns, field_selector=f"involvedObject.name={pod.metadata.name}").items]
    assert "Failed" in reasons and "BackOff" in reasons
    core.delete_namespace(ns)
    _wait("namespace gone", lambda: ns not in [n.metadata.name for n in core.list_namespace().items], timeout=120)


def test_a_run_s_credentials_are_limited_to_its_namespace_by_rbac(cluster, run_id):
    """A ServiceAccount bound to dlbench's executor Role (rbac.NAMESPACE_RULES) in the run's
    namespace runs a Job and reads its log there; the real RBAC refuses it anywhere else and
    refuses what the Role does not name."""
    from dlbench.execution.kubernetes import rbac

    core, rbac_api = client.CoreV1Api(cluster.api), client.RbacAuthorizationV1Api(cluster.api)
    ns, other = cluster.namespace(run_id), cluster.namespace(run_id + "x")
    core.create_namespaced_service_account(ns, {"metadata": {"name": "runner"}})
    role, binding = rbac.manifests(ns, "runner")[:2]
    rbac_api.create_namespaced_role(ns, role)
    rbac_api.create_namespaced_role_binding(ns, binding)
    secret = _wait("token", lambda: [s for s in core.list_namespaced_secret(ns).items
                                     if s.type == "kubernetes.io/service-account-token"
                                     and s.metadata.annotations.get("kubernetes.io/service-account.name") == "runner"])
    token = base64.b64decode(secret[0].data["token"]).decode()
    scoped = config.new_client_from_config_dict({
        "apiVersion": "v1", "kind": "Config", "current-context": "run",
        "clusters": [{"name": "c", "cluster": {"server": cluster.plane.server,
                                               "certificate-authority": str(cluster.plane.ca)}}],
        "users": [{"name": "runner", "user": {"token": token}}],
        "contexts": [{"name": "run", "context": {"cluster": "c", "user": "runner"}}]})
    batch, score = client.BatchV1Api(scoped), client.CoreV1Api(scoped)
    batch.create_namespaced_job(ns, job_body("mine", ["echo", "scoped"]))
    _wait("complete", lambda: batch.read_namespaced_job("mine", ns).status.succeeded)
    pod = score.list_namespaced_pod(ns, label_selector="job-name=mine").items[0]
    assert score.read_namespaced_pod_log(pod.metadata.name, ns) == "scoped\n"
    assert score.list_namespaced_event(ns).items
    for call in (lambda: batch.create_namespaced_job(other, job_body("theirs", ["true"])),
                 lambda: score.list_namespaced_pod(other), lambda: score.list_node(),
                 lambda: score.list_namespaced_secret(ns), lambda: score.delete_namespace(other)):
        with pytest.raises(ApiException) as refused:
            call()
        assert refused.value.status == 403, refused.value
    assert [p.metadata.name for p in core.list_namespaced_pod(other).items] == []
    for name in (ns, other):
        core.delete_namespace(name)


def test_magnum_style_tls_client_certificates(tmp_path):
    """How Magnum's kubeconfigs authenticate: the apiserver serves a certificate of the cluster's
    (Magnum) CA and accepts client certificates of that CA; without one a request is anonymous
    and the real RBAC refuses it. No node needed (nothing is scheduled)."""
    import subprocess

    def sh(*argv: str) -> None:
        subprocess.run(argv, check=True, capture_output=True, cwd=tmp_path)

    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
       "-subj", "/CN=magnum-ca")
    for name, subj, ext in (("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1"),
                            ("client", "/CN=admin/O=system:masters", "extendedKeyUsage=clientAuth")):
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
           "-subj", subj)
        (tmp_path / f"{name}.ext").write_text(ext + "\n")
        sh("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
           "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext")
    plane = k8s_control.start(tmp_path / "state", [], tls={
        "cert": str(tmp_path / "server.crt"), "key": str(tmp_path / "server.key"),
        "client_ca": str(tmp_path / "ca.crt")})
    try:
        def b64(name: str) -> str:
            return base64.b64encode((tmp_path / name).read_bytes()).decode()

        kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": "magnum",
                      "clusters": [{"name": "c", "cluster": {"server": plane.server,
                                                             "certificate-authority-data": b64("ca.crt")}}],
                      "users": [{"name": "admin", "user": {"client-certificate-data": b64("client.crt"),
                                                           "client-key-data": b64("client.key")}}],
                      "contexts": [{"name": "magnum", "context": {"cluster": "c", "user": "admin"}}]}
        api = config.new_client_from_config_dict(kubeconfig)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "tls-ok"}})
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))  # no client certificate
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{plane.server}/api/v1/namespaces", context=context, timeout=10)
        assert refused.value.code in (401, 403)
        assert "tls-ok" in [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]
    finally:
        k8s_control.stop(plane)
