"""The Kubernetes API stand-in itself: every object it returns deserialises into the official
client's V1 models (the real API's schema), Jobs go Pending -> Running -> Succeeded with the
Job's Complete condition, logs come back, cascading deletes remove pods by label, scheduling
and image failures are reported the way a kubelet and scheduler report them."""

from __future__ import annotations

import json
import time

from kubernetes import client


def _raw(api, path: str, model: str):
    """GET ``path`` raw and deserialise it into ``model`` with the client's own ApiClient (which
    validates required fields and types)."""
    import urllib.request

    with urllib.request.urlopen(api.configuration.host + path, timeout=30) as resp:
        data = resp.read()
    obj = api.deserialize(data.decode(), model, "application/json")
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


def job_body(name: str, command: list[str], image: str = "dlbench-workload:latest", **pod: object) -> dict:
    return {"metadata": {"name": name, "labels": {"dlbench": "1", "test": name}},
            "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"test": name}}, "spec": {
                "restartPolicy": "Never", **pod,
                "containers": [{"name": "main", "image": image, "command": command}]}}}}


def test_objects_match_the_client_models_and_a_job_completes(cluster, run_id):
    api = cluster.api
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    ns = cluster.namespace(run_id)
    batch.create_namespaced_job(ns, job_body("ok", ["sh", "-c", "echo hello; echo from-the-pod"]))
    pod = _wait("pod", lambda: core.list_namespaced_pod(ns, label_selector="job-name=ok").items)[0]
    assert pod.status.phase in ("Pending", "Running", "Succeeded")
    job = _wait("complete", lambda: (j := batch.read_namespaced_job("ok", ns)).status.succeeded and j)
    assert [c.type for c in job.status.conditions if c.status == "True"][-1] == "Complete"
    pod = core.read_namespaced_pod(pod.metadata.name, ns)
    assert pod.status.phase == "Succeeded" and pod.spec.node_name == cluster.node_name
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 0 and term.reason == "Completed"
    log = core.read_namespaced_pod_log(pod.metadata.name, ns, container="main")
    assert log.splitlines() == ["hello", "from-the-pod"]
    assert core.read_namespaced_pod_log(pod.metadata.name, ns, container="main", tail_lines=1) == "from-the-pod\n"
    # Every kind, raw, into its V1 model (client-side validation of required fields included).
    for path, model in [(f"/api/v1/namespaces/{ns}/pods", "V1PodList"), ("/api/v1/nodes", "V1NodeList"),
                        (f"/apis/batch/v1/namespaces/{ns}/jobs", "V1JobList"),
                        (f"/api/v1/namespaces/{ns}/events", "CoreV1EventList"),
                        ("/api/v1/namespaces", "V1NamespaceList"),
                        ("/apis/apps/v1/namespaces/kube-system/daemonsets", "V1DaemonSetList"),
                        (f"/api/v1/namespaces/{ns}/services", "V1ServiceList"), ("/version", "VersionInfo")]:
        obj, raw = _raw(api, path, model)
        if "items" in raw:
            assert len(obj.items) == len(raw["items"])
    node = core.list_node().items[0]
    assert node.status.node_info.kubelet_version.endswith("standin")
    assert node.status.node_info.container_runtime_version.startswith("docker://2")
    assert any(a.type == "InternalIP" and a.address == cluster.machine.address for a in node.status.addresses)
    reasons = [e.reason for e in core.list_namespaced_event(
        ns, field_selector=f"involvedObject.name={pod.metadata.name}").items]
    assert {"Scheduled", "Pulled", "Created", "Started"} <= set(reasons), reasons
    # A headless service round-trips.
    svc = core.create_namespaced_service(ns, {"metadata": {"name": "roles"}, "spec": {
        "clusterIP": "None", "selector": {"test": "ok"}, "ports": [{"port": 2222}]}})
    assert svc.spec.cluster_ip == "None"
    # Cascading delete: the Job's pod goes with it; nothing of ours stays on the node.
    batch.delete_namespaced_job("ok", ns, propagation_policy="Foreground")
    assert core.list_namespaced_pod(ns, label_selector="job-name=ok").items == []
    core.delete_namespace(ns)
    _wait("namespace gone", lambda: ns not in [n.metadata.name for n in core.list_namespace().items])


def test_unschedulable_and_missing_image_are_reported_like_kubernetes(cluster, run_id):
    core, batch = client.CoreV1Api(cluster.api), client.BatchV1Api(cluster.api)
    ns = cluster.namespace(run_id)
    big = job_body("big", ["true"])
    big["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"memory": "64Gi"}}
    batch.create_namespaced_job(ns, big)
    batch.create_namespaced_job(ns, job_body("elsewhere", ["true"], nodeSelector={"dlbench.io/pool": "gpu"}))
    batch.create_namespaced_job(ns, job_body("noimage", ["true"], image="dlbench-no-such-image:0"))
    for name, why in (("big", "Insufficient memory"), ("elsewhere", "didn't match Pod's node affinity/selector")):
        pod = _wait(name, lambda n=name: [p for p in core.list_namespaced_pod(ns, label_selector=f"job-name={n}").items
                                          if p.status.conditions])[0]
        cond = pod.status.conditions[0]
        assert (cond.type, cond.status, cond.reason) == ("PodScheduled", "False", "Unschedulable")
        assert why in cond.message and pod.status.phase == "Pending"
        events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={pod.metadata.name}").items
        assert events[0].reason == "FailedScheduling" and events[0].type == "Warning"

    def backoff():
        pods = core.list_namespaced_pod(ns, label_selector="job-name=noimage").items
        statuses = pods and pods[0].status.container_statuses
        return statuses and statuses[0].state.waiting.reason == "ImagePullBackOff" and pods[0]

    pod = _wait("ImagePullBackOff", backoff)
    reasons = [e.reason for e in core.list_namespaced_event(
        ns, field_selector=f"involvedObject.name={pod.metadata.name}").items]
    assert "Failed" in reasons and "BackOff" in reasons
    core.delete_namespace(ns)
    _wait("pods gone", lambda: not core.list_pod_for_all_namespaces(label_selector="dlbench=1").items or
          all(p.metadata.namespace != ns for p in core.list_pod_for_all_namespaces().items))


def test_tls_requires_a_client_certificate_signed_by_the_cluster_ca(tmp_path):
    """How Magnum's kubeconfigs authenticate: HTTPS, a client certificate signed by --client-ca.
    No node needed (nothing is scheduled)."""
    import base64
    import ssl
    import subprocess
    import urllib.request

    from kubernetes import config

    from tests.kubernetes.conftest import free_port, k8s_standin

    def sh(*argv: str) -> None:
        subprocess.run(argv, check=True, capture_output=True, cwd=tmp_path)

    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
       "-subj", "/CN=standin-ca")
    for name, subj, ext in (("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1"),
                            ("client", "/CN=admin/O=system:masters", "extendedKeyUsage=clientAuth")):
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
           "-subj", subj)
        (tmp_path / f"{name}.ext").write_text(ext + "\n")
        sh("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
           "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext")
    port = free_port()
    proc = k8s_standin.start(tmp_path / "state", [], port, tls={
        "cert": str(tmp_path / "server.crt"), "key": str(tmp_path / "server.key"),
        "client_ca": str(tmp_path / "ca.crt")})
    try:
        def b64(name: str) -> str:
            return base64.b64encode((tmp_path / name).read_bytes()).decode()

        kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": "magnum",
                      "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                             "certificate-authority-data": b64("ca.crt")}}],
                      "users": [{"name": "admin", "user": {"client-certificate-data": b64("client.crt"),
                                                           "client-key-data": b64("client.key")}}],
                      "contexts": [{"name": "magnum", "context": {"cluster": "c", "user": "admin"}}]}
        api = config.new_client_from_config_dict(kubeconfig)
        assert client.VersionApi(api).get_code().git_version.endswith("standin")
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "tls-ok"}})
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))  # no client certificate
        try:
            urllib.request.urlopen(f"https://127.0.0.1:{port}/version", context=context, timeout=10)
            raise AssertionError("a request without a client certificate was answered")
        except (ssl.SSLError, ConnectionError, OSError):
            pass
        assert "tls-ok" in [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]  # still serving
    finally:
        k8s_standin.stop(proc)
