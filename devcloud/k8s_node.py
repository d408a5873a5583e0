"""The devcloud's node agent: our program in the kubelet's place, under a real control plane
(``k8s_control.py``, docs/kubernetes.md).

Why not the real kubelet: a kubelet sets machine-wide kernel settings at start
(``vm.overcommit_memory``, ``kernel.panic``, ``kernel.panic_on_oops``), and nothing the devcloud
runs may change this host's kernel settings. Everything above this agent is real: the apiserver
(admission, RBAC), the scheduler that binds pods to nodes, the Job, namespace and garbage
collector controllers.

What it does, for every node of one cluster (the devcloud's machines, each with its own Docker
engine reached with ``ssh ... docker``, docs/node-image.md):
- registers the Node (labels, capacity = allocatable, addresses, ``Ready`` with a heartbeat every
  10 s, the kubelet endpoint: this agent's HTTPS port, at the node's ``InternalDNS`` address
  ``localhost`` because the agent runs on the controller);
- runs each pod the scheduler bound to one of its nodes as one container of the pod's image on
  that node's engine (``--network host``: no CNI, the pod IP is the node's address; limits:
  memory -> ``--memory``, cpu -> ``--cpus``, ``nvidia.com/gpu`` -> ``--gpus``; hostPath volumes;
  emptyDir volumes, ``medium: Memory`` as a tmpfs of its ``sizeLimit`` (a serving pod's /dev/shm);
  ``hostname``/``subdomain`` peers as ``--add-host``), writes the pod's status the way the kubelet
  does (phases, container states, ``OOMKilled``, ``ErrImagePull``/``ImagePullBackOff`` since there
  is no registry) and the kubelet's events;
- enforces the pod's ``activeDeadlineSeconds``; stops a pod being deleted (SIGTERM, its grace
  period, SIGKILL) and then removes it from the API (what the kubelet does for the namespace and
  Job controllers' deletions);
- serves the kubelet API's ``/containerLogs`` to the apiserver (``kubectl logs`` and the client's
  ``read_namespaced_pod_log`` go through the apiserver to here), with client certificates.

What it does not: more than one container per pod, init containers, probes, restarts
(``restartPolicy: Always`` pods run once), exec/attach/port-forward, volumes other than hostPath
and emptyDir (the service-account token volume is not mounted), image pulls.

Stdlib only (plus the ``ssh`` and ``docker`` CLIs): it imports nothing of dlbench.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

AGENT_VERSION = "v1.20.2-dlbench-node-agent"
CONTAINER_LABEL = "dlbench.k8s-node-agent"
TICK_S = 0.5
"""How often a node with a pod that runs is looked at (its container's state: ``docker inspect``)."""
RESYNC_S = 5.0
"""How often everything is looked at when nothing runs; watches wake the loop at every change."""
WATCH_S = 60
HEARTBEAT_S = 10
GRACE_S = 30
NETWORK_ANNOTATION = "dlbench.io/network"  # read by dlbench.execution.kubernetes.facts
NETWORK_NOTE = "no CNI: the devcloud's node agent runs pods in the node's host network, the pod IP is the node's"

_SUFFIX = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
           "m": 1e-3}


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def parse_time(text: str) -> float:
    import calendar

    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))


def quantity(text: Any) -> float:
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text).strip())
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a quantity: {text!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def empty_dir_mount(empty_dir: dict[str, Any], path: str) -> str:
    """A pod's ``emptyDir`` as the kubelet makes it, in ``docker run --mount`` form: ``medium:
    Memory`` is a tmpfs of ``sizeLimit`` (vLLM's engine needs a /dev/shm larger than the runtime's
    64 MiB, and Kubernetes gives one this way), any other an anonymous volume on the node's disk
    (removed with the container: ``rm -v``)."""
    if empty_dir.get("medium") == "Memory":
        size = f",tmpfs-size={int(quantity(empty_dir['sizeLimit']))}" if empty_dir.get("sizeLimit") else ""
        return f"type=tmpfs,destination={path}{size}"
    return f"type=volume,destination={path}"


def log(message: str) -> None:
    print(f"{now()} node-agent: {message}", file=sys.stderr, flush=True)


# -- the apiserver ---------------------------------------------------------------------------------

class ApiError(Exception):
    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code}: {text[:300]}")
        self.code = code


class Api:
    """The apiserver, with the agent's client certificate (from its kubeconfig). One kept-alive
    connection per thread: a new TLS handshake for every look would cost the apiserver and this
    agent CPU the whole time the cluster idles (the machine's own load is measured by the jobs)."""

    def __init__(self, kubeconfig: Path) -> None:
        config = json.loads(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        url = urllib.parse.urlparse(cluster["server"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.ctx.load_cert_chain(user["client-certificate"], user["client-key"])
        self.local = threading.local()

    def connection(self, timeout: float = 30) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def call(self, method: str, path: str, body: Any = None,
             content_type: str = "application/json") -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        for attempt in (1, 2):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = self.connection()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                payload = resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
                continue  # the kept-alive connection was closed by the server: once more on a new one
            if resp.status >= 400:
                raise ApiError(resp.status, payload.decode(errors="replace"))
            return dict(json.loads(payload or b"{}"))
        raise AssertionError("unreachable")

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("PATCH", path, body, "application/merge-patch+json")

    def watch(self, path: str, wake: threading.Event, stop: threading.Event) -> None:
        """``GET path&watch=true`` again and again (the server ends each after WATCH_S): every event
        sets ``wake``. A failed watch is retried after a second; the loop's resync covers the gap."""
        while not stop.is_set():
            conn = self.connection(timeout=WATCH_S + 30)
            try:
                conn.request("GET", f"{path}&watch=true&timeoutSeconds={WATCH_S}")
                resp = conn.getresponse()
                while not stop.is_set():
                    line = resp.readline()
                    if not line:
                        break
                    wake.set()
            except (OSError, http.client.HTTPException) as exc:
                log(f"watch {path}: {exc}")
                stop.wait(1.0)
            finally:
                conn.close()


# -- nodes -----------------------------------------------------------------------------------------

class Node:
    """A devcloud machine as a Kubernetes node: its engine reached with ``ssh ... docker``."""

    def __init__(self, spec: dict[str, Any], agent_port: int) -> None:
        self.name = spec["name"]
        self.address = spec["address"]
        self.user = spec.get("ssh_user", "root")
        self.key = spec["ssh_key_path"]
        self.port = int(spec.get("ssh_port", 22))
        self.agent_port = agent_port
        self.labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", **(spec.get("labels") or {})}
        self.capacity = {"cpu": str(spec.get("cpu", "2")), "memory": str(spec.get("memory", "2Gi")), "pods": "110"}
        if spec.get("gpus"):
            self.capacity["nvidia.com/gpu"] = str(spec["gpus"])
        self.engine_version = ""
        self.kernel = ""
        self.uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"k8s-node:{self.name}:{self.address}"))
        self.control = f"/tmp/k8s-node-{self.uid[:8]}-{int(time.time() * 1000) % 10**8}.ssh"

    def ssh_argv(self, *argv: str) -> list[str]:
        """``ssh ... docker ARGV`` (one master connection per node, reused for 60 s)."""
        quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in ("docker", *argv))
        return ["ssh", "-i", self.key, "-p", str(self.port), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
                "-o", "ControlMaster=auto", "-o", f"ControlPath={self.control}", "-o", "ControlPersist=60",
                f"{self.user}@{self.address}", quoted]

    def docker(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = self.ssh_argv(*argv)
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(cmd, 124, "", f"timed out: {exc}")

    def probe(self) -> None:
        out = self.docker("version", "--format", "{{.Server.Version}} {{.Server.KernelVersion}}", timeout=30)
        if out.returncode == 0 and out.stdout.split():
            self.engine_version, *kernel = out.stdout.split()
            self.kernel = kernel[0] if kernel else ""
        else:
            self.engine_version = ""

    def status(self) -> dict[str, Any]:
        ready = bool(self.engine_version)
        return {
            "capacity": dict(self.capacity), "allocatable": dict(self.capacity),
            "addresses": [{"type": "InternalIP", "address": self.address},
                          {"type": "InternalDNS", "address": "localhost"},
                          {"type": "Hostname", "address": self.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.agent_port}},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                            "reason": "KubeletReady" if ready else "KubeletNotReady",
                            "message": "the node agent reaches the node's Docker engine" if ready
                            else "the node's Docker engine does not answer over ssh",
                            "lastHeartbeatTime": now(), "lastTransitionTime": now()}],
            "nodeInfo": {"architecture": "amd64", "bootID": self.uid, "machineID": self.uid.replace("-", ""),
                         "systemUUID": self.uid, "kernelVersion": self.kernel or "unknown",
                         "osImage": "dlbench-node (devcloud)", "operatingSystem": "linux",
                         "containerRuntimeVersion": f"docker://{self.engine_version or 'unknown'}",
                         "kubeletVersion": AGENT_VERSION, "kubeProxyVersion": "none"},
        }


# -- the agent -------------------------------------------------------------------------------------

class Agent:
    def __init__(self, api: Api, nodes: list[Node]) -> None:
        self.api = api
        self.nodes = {n.name: n for n in nodes}
        self.lock = threading.RLock()
        self.local: dict[str, dict[str, Any]] = {}  # pod uid -> what this agent knows of its container
        self.events: set[tuple[str, str, str]] = set()
        self.stopping = threading.Event()

    # nodes
    def register(self) -> None:
        for node in self.nodes.values():
            node.probe()
            body = {"metadata": {"name": node.name, "labels": node.labels,
                                 "annotations": {NETWORK_ANNOTATION: NETWORK_NOTE}},
                    "spec": {}}
            try:
                self.api.call("POST", "/api/v1/nodes", body)
            except ApiError as exc:
                if exc.code != 409:
                    raise
                self.api.patch(f"/api/v1/nodes/{node.name}", {"metadata": {"labels": node.labels}})
            self.api.patch(f"/api/v1/nodes/{node.name}/status", {"status": node.status()})

    def heartbeat(self) -> None:
        while not self.stopping.wait(HEARTBEAT_S):
            for node in self.nodes.values():
                try:
                    node.probe()
                    self.api.patch(f"/api/v1/nodes/{node.name}/status", {"status": node.status()})
                except Exception as exc:  # noqa: BLE001 - the next beat tries again
                    log(f"heartbeat of {node.name}: {exc}")

    # events
    def event(self, pod: dict[str, Any], reason: str, message: str, type_: str = "Normal") -> None:
        meta = pod["metadata"]
        key = (meta["uid"], reason, message)
        if key in self.events:
            return
        self.events.add(key)
        try:
            self.api.call("POST", f"/api/v1/namespaces/{meta['namespace']}/events", {
                "metadata": {"generateName": f"{meta['name']}."}, "reason": reason, "message": message,
                "type": type_, "count": 1, "firstTimestamp": now(), "lastTimestamp": now(),
                "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": meta["namespace"],
                                   "name": meta["name"], "uid": meta["uid"],
                                   "fieldPath": f"spec.containers{{{pod['spec']['containers'][0]['name']}}}"},
                "source": {"component": "kubelet", "host": pod["spec"].get("nodeName", "")}})
        except ApiError as exc:
            log(f"event {reason} of {meta['name']}: {exc}")

    # pod status
    def patch_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            self.api.patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status", {"status": status})
        except ApiError as exc:
            if exc.code != 404:
                raise

    @staticmethod
    def conditions(pod: dict[str, Any], **wanted: str) -> list[dict[str, Any]]:
        conds = [dict(c) for c in (pod.get("status") or {}).get("conditions") or []]
        for type_, status in wanted.items():
            reason = None
            if ":" in status:
                status, reason = status.split(":", 1)
            cond = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": now()}
            if reason:
                cond["reason"] = reason
            old = next((c for c in conds if c["type"] == type_), None)
            if old is None:
                conds.append(cond)
            elif old["status"] != status or old.get("reason") != reason:
                old.update(cond)
        return conds

    def container_status(self, pod: dict[str, Any], state: dict[str, Any], ready: bool = False) -> list[Any]:
        c = pod["spec"]["containers"][0]
        extra = self.local.get(pod["metadata"]["uid"], {})
        status: dict[str, Any] = {"name": c["name"], "image": c["image"], "imageID": extra.get("image_id", ""),
                                  "ready": ready, "restartCount": 0, "started": "running" in state, "state": state}
        if extra.get("container_id"):
            status["containerID"] = f"docker://{extra['container_id']}"
        return [status]

    # the loop
    def loop(self) -> None:
        """Look at every node's pods when a watch says something changed, every TICK_S while a
        container runs (its exit is seen only by asking the engine), else every RESYNC_S."""
        wake = threading.Event()
        for node in self.nodes.values():
            selector = urllib.parse.quote(f"spec.nodeName={node.name}")
            threading.Thread(target=self.api.watch, args=(f"/api/v1/pods?fieldSelector={selector}", wake,
                                                          self.stopping),
                             name=f"watch-{node.name}", daemon=True).start()
        while not self.stopping.is_set():
            wake.clear()
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - one bad pod must not stop the node
                log(f"tick failed: {type(exc).__name__}: {exc}")
            with self.lock:
                busy = any(e.get("container") and not e.get("done") for e in self.local.values())
            wake.wait(TICK_S if busy else RESYNC_S)

    def tick(self) -> None:
        seen: set[str] = set()
        for node in self.nodes.values():
            selector = urllib.parse.quote(f"spec.nodeName={node.name}")
            pods = self.api.call("GET", f"/api/v1/pods?fieldSelector={selector}").get("items") or []
            for pod in pods:
                seen.add(pod["metadata"]["uid"])
                try:
                    self.sync(pod, node)
                except Exception as exc:  # noqa: BLE001
                    log(f"pod {pod['metadata']['namespace']}/{pod['metadata']['name']}: {type(exc).__name__}: {exc}")
        with self.lock:
            gone = [uid for uid in self.local if uid not in seen and not self.local[uid].get("stopping")]
        for uid in gone:  # removed from the API without us (forced deletion): its container goes too
            extra = self.local.pop(uid)
            if extra.get("container"):
                self.nodes[extra["node"]].docker("rm", "-f", "-v", extra["container"])

    def sync(self, pod: dict[str, Any], node: Node) -> None:
        uid, phase = pod["metadata"]["uid"], (pod.get("status") or {}).get("phase", "Pending")
        extra = self.local.setdefault(uid, {"node": node.name})
        if pod["metadata"].get("deletionTimestamp"):
            if not extra.get("stopping"):
                extra["stopping"] = True
                threading.Thread(target=self.terminate, args=(pod, node), daemon=True).start()
            return
        if phase in ("Succeeded", "Failed"):
            extra["done"] = True  # nothing left to follow on the engine
            return
        if not extra.get("container"):
            self.start_pod(pod, node, extra)
            return
        deadline = pod["spec"].get("activeDeadlineSeconds")
        started = (pod.get("status") or {}).get("startTime")
        if deadline and started and not extra.get("deadline") and time.time() - parse_time(started) > deadline:
            extra["deadline"] = True
            self.event(pod, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline",
                       "Warning")
            grace = int(pod["spec"].get("terminationGracePeriodSeconds") or GRACE_S)
            threading.Thread(target=node.docker, args=("stop", "-t", str(grace), extra["container"]),
                             kwargs={"timeout": grace + 60}, daemon=True).start()
        self.follow(pod, node, extra)

    def start_pod(self, pod: dict[str, Any], node: Node, extra: dict[str, Any]) -> None:
        c = pod["spec"]["containers"][0]
        found = node.docker("image", "inspect", "--format", "{{.Id}}", c["image"])
        start_time = (pod.get("status") or {}).get("startTime") or now()
        base = {"hostIP": node.address, "startTime": start_time}
        if found.returncode != 0:
            first = not extra.get("pull_failed")
            if not first and time.monotonic() - extra.get("pull_at", 0) < 5:
                return
            extra["pull_failed"], extra["pull_at"] = True, time.monotonic()
            reason = "ErrImagePull" if first else "ImagePullBackOff"
            msg = (f'Failed to pull image "{c["image"]}": the devcloud has no registry and the image is not on '
                   f"node {node.name}'s engine" if first else f'Back-off pulling image "{c["image"]}"')
            # Events before the status (the kubelet's order): whoever sees the waiting reason finds them.
            self.event(pod, "Failed" if first else "BackOff", msg, "Warning")
            self.event(pod, "Failed", f"Error: {reason}", "Warning")
            self.patch_status(pod, {**base, "phase": "Pending",
                                    "conditions": self.conditions(pod, Initialized="True",
                                                                  Ready="False:ContainersNotReady",
                                                                  ContainersReady="False:ContainersNotReady"),
                                    "containerStatuses": self.container_status(
                                        pod, {"waiting": {"reason": reason, "message": msg}})})
            return
        extra["image_id"] = found.stdout.strip()
        argv = self.run_argv(pod, node)
        self.event(pod, "Pulled", f'Container image "{c["image"]}" already present on machine')
        out = node.docker(*argv, timeout=120)
        if out.returncode != 0:
            self.patch_status(pod, {**base, "phase": "Failed", "containerStatuses": self.container_status(pod, {
                "terminated": {"exitCode": 128, "reason": "StartError", "message": out.stderr.strip()[-500:],
                               "startedAt": now(), "finishedAt": now()}})})
            self.event(pod, "Failed", f"Error: {out.stderr.strip()[-300:]}", "Warning")
            return
        extra["container"], extra["container_id"] = argv[argv.index("--name") + 1], out.stdout.strip()
        self.event(pod, "Created", f"Created container {c['name']}")
        self.event(pod, "Started", f"Started container {c['name']}")
        self.patch_status(pod, {**base, "phase": "Running", "podIP": node.address, "podIPs": [{"ip": node.address}],
                                "conditions": self.conditions(pod, Initialized="True", Ready="True",
                                                              ContainersReady="True"),
                                "containerStatuses": self.container_status(pod, {"running": {"startedAt": now()}},
                                                                           ready=True)})

    def follow(self, pod: dict[str, Any], node: Node, extra: dict[str, Any]) -> None:
        inspected = node.docker("inspect", "--format", "{{json .State}}", extra["container"])
        if inspected.returncode != 0:
            if "No such" in inspected.stderr:
                self.patch_status(pod, {"phase": "Failed", "reason": "ContainerGone", "message":
                                        "the pod's container was removed from the node's engine"})
            return
        state = json.loads(inspected.stdout)
        if state.get("Running") or state.get("Status") in ("created", "running", "restarting"):
            return
        code = int(state.get("ExitCode", 0))
        reason = "OOMKilled" if state.get("OOMKilled") else "Completed" if code == 0 else "Error"
        finished = state["FinishedAt"][:19] + "Z" if state.get("FinishedAt") else now()
        started = state["StartedAt"][:19] + "Z" if state.get("StartedAt") else now()
        terminated = {"terminated": {"exitCode": code, "reason": reason, "startedAt": started,
                                     "finishedAt": finished, "containerID": f"docker://{extra['container_id']}"}}
        status: dict[str, Any] = {"phase": "Succeeded" if code == 0 else "Failed",
                                  "conditions": self.conditions(pod, Ready="False:PodCompleted",
                                                                ContainersReady="False:PodCompleted"),
                                  "containerStatuses": self.container_status(pod, terminated)}
        if extra.get("deadline"):
            status.update(phase="Failed", reason="DeadlineExceeded",
                          message="Pod was active on the node longer than the specified deadline")
        self.patch_status(pod, status)
        if reason == "OOMKilled":
            c = pod["spec"]["containers"][0]
            limit = (c.get("resources") or {}).get("limits", {}).get("memory")
            self.event(pod, "OOMKilled", f"Container {c['name']} was OOM-killed (memory limit {limit})", "Warning")

    def terminate(self, pod: dict[str, Any], node: Node) -> None:
        """A pod being deleted: its container stopped (SIGTERM, grace, SIGKILL) and removed, then the
        pod removed from the API with grace 0 (the kubelet's last step of every deletion)."""
        meta = pod["metadata"]
        extra = self.local.get(meta["uid"], {})
        grace = pod["metadata"].get("deletionGracePeriodSeconds")
        grace = int(grace if grace is not None else pod["spec"].get("terminationGracePeriodSeconds") or GRACE_S)
        try:
            if extra.get("container"):
                c = pod["spec"]["containers"][0]
                self.event(pod, "Killing", f"Stopping container {c['name']}")
                node.docker("stop", "-t", str(grace), extra["container"], timeout=grace + 60)
                if (pod.get("status") or {}).get("phase") == "Running":
                    # The kubelet's last status of a pod it stopped: the Job controller counts it as
                    # failed from this (it would otherwise replace a pod that vanished).
                    self.follow(pod, node, extra)
                node.docker("rm", "-f", "-v", extra["container"])
            try:
                self.api.call("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                              {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                               "preconditions": {"uid": meta["uid"]}})
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise
        except Exception as exc:  # noqa: BLE001 - retried on a later tick
            log(f"terminating {meta['namespace']}/{meta['name']}: {exc}")
            extra["stopping"] = False
            return
        with self.lock:
            self.local.pop(meta["uid"], None)

    def run_argv(self, pod: dict[str, Any], node: Node) -> list[str]:
        spec, meta, c = pod["spec"], pod["metadata"], pod["spec"]["containers"][0]
        name = f"k8s_{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}"[:120]
        argv = ["run", "-d", "--name", name, "--network", "host", "--label", f"{CONTAINER_LABEL}=1",
                "--label", f"io.kubernetes.pod.name={meta['name']}",
                "--label", f"io.kubernetes.pod.namespace={meta['namespace']}",
                "--label", f"io.kubernetes.pod.uid={meta['uid']}"]
        for env in c.get("env") or []:
            argv += ["-e", f"{env['name']}={env.get('value') or ''}"]
        limits = (c.get("resources") or {}).get("limits") or {}
        if limits.get("memory"):
            argv += ["--memory", str(int(quantity(limits["memory"]))), "--memory-swap",
                     str(int(quantity(limits["memory"])))]
        if limits.get("cpu"):
            argv += ["--cpus", f"{quantity(limits['cpu']):g}"]
        if limits.get("nvidia.com/gpu"):
            argv += ["--gpus", str(int(quantity(limits["nvidia.com/gpu"])))]
        if c.get("workingDir"):
            argv += ["--workdir", c["workingDir"]]
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for mount in c.get("volumeMounts") or []:
            volume = volumes.get(mount["name"]) or {}
            path = (volume.get("hostPath") or {}).get("path")
            if path:
                argv += ["-v", f"{path}:{mount['mountPath']}:{'ro' if mount.get('readOnly') else 'rw'}"]
            elif "emptyDir" in volume:
                argv += ["--mount", empty_dir_mount(volume["emptyDir"] or {}, mount["mountPath"])]
        if spec.get("subdomain"):
            peers = self.api.call("GET", f"/api/v1/namespaces/{meta['namespace']}/pods").get("items") or []
            for peer in peers:
                ps = peer["spec"]
                if ps.get("subdomain") == spec["subdomain"] and ps.get("hostname") and ps.get("nodeName") \
                        and ps["nodeName"] in self.nodes:
                    address = self.nodes[ps["nodeName"]].address
                    fqdn = f"{ps['hostname']}.{spec['subdomain']}.{meta['namespace']}.svc.cluster.local"
                    for host in (fqdn, f"{ps['hostname']}.{spec['subdomain']}",
                                 f"{ps['hostname']}.{spec['subdomain']}.{meta['namespace']}"):
                        argv += ["--add-host", f"{host}:{address}"]
        command, args = c.get("command") or [], c.get("args") or []
        if command:
            argv += ["--entrypoint", command[0], c["image"], *command[1:], *args]
        else:
            argv += [c["image"], *args]
        return argv

    # the kubelet API's logs
    def logs(self, ns: str, name: str, container: str, query: dict[str, str]) -> tuple[int, bytes]:
        with self.lock:
            hit = next(((uid, e) for uid, e in self.local.items()
                        if e.get("container", "").startswith(f"k8s_{ns}_{name}_")), None)
        if hit is None:
            return 404, f"container {container} of pod {ns}/{name} is not on this node agent".encode()
        extra = hit[1]
        argv = ["logs", *(["--tail", query["tailLines"]] if query.get("tailLines") else []),
                *(["--timestamps"] if query.get("timestamps") == "true" else []), extra["container"]]
        cmd = self.nodes[extra["node"]].ssh_argv(*argv)
        out = subprocess.run([*cmd[:-1], cmd[-1] + " 2>&1"], capture_output=True, timeout=300, check=False)
        return 200, out.stdout

    def shutdown(self) -> None:
        """Remove every container this agent started (the cluster's pods end with it)."""
        self.stopping.set()
        for node in self.nodes.values():
            listed = node.docker("ps", "-aq", "--filter", f"label={CONTAINER_LABEL}=1", timeout=30)
            ids = listed.stdout.split()
            if ids:
                node.docker("rm", "-f", "-v", *ids, timeout=60)


def make_handler(agent: Agent) -> type[BaseHTTPRequestHandler]:
    route = re.compile(r"^/containerLogs/(?P<ns>[^/]+)/(?P<pod>[^/]+)/(?P<container>[^/]+)$")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:
            pass

        def reply(self, code: int, data: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            url = urllib.parse.urlparse(self.path)
            if url.path == "/healthz":
                self.reply(200, b"ok")
                return
            match = route.match(url.path)
            if not match:
                self.reply(404, f"the node agent serves /containerLogs only, not {url.path}".encode())
                return
            query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
            self.reply(*agent.logs(match["ns"], match["pod"], match["container"], query))

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("--nodes", required=True, type=Path, help="a JSON file listing the nodes")
    parser.add_argument("--listen", required=True, help="HOST:PORT of the kubelet API (logs)")
    parser.add_argument("--tls-cert", required=True)
    parser.add_argument("--tls-key", required=True)
    parser.add_argument("--client-ca", required=True, help="CA of the apiserver's kubelet client certificate")
    parser.add_argument("--ready-file", type=Path)
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    nodes = [Node(spec, int(port)) for spec in json.loads(args.nodes.read_text())]
    agent = Agent(Api(args.kubeconfig), nodes)
    server = ThreadingHTTPServer((host, int(port)), make_handler(agent))
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.tls_cert, args.tls_key)
    context.load_verify_locations(args.client_ca)
    context.verify_mode = ssl.CERT_REQUIRED
    server.socket = context.wrap_socket(server.socket, server_side=True)
    agent.register()
    threading.Thread(target=agent.loop, name="pods", daemon=True).start()
    threading.Thread(target=agent.heartbeat, name="heartbeat", daemon=True).start()

    def on_term(*_: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    if args.ready_file:
        args.ready_file.write_text(json.dumps({"nodes": sorted(agent.nodes)}))
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        agent.shutdown()


if __name__ == "__main__":
    main()
