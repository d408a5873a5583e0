"""The devcloud's Kubernetes API stand-in (docs/kubernetes.md): the one Kubernetes boundary not run for real.

A real kube-apiserver + kubelet cannot be installed on these machines, so this process answers the
exact subset of the Kubernetes REST API that dlbench's executor and provider use, with the real
API's object shapes (every object it returns deserialises into the official client's V1 models:
tests/kubernetes check it), and runs pods for real: each pod is one container of the pod's image
on its node's own Docker engine, driven with ``docker`` over SSH (the devcloud nodes are machines
with their own dockerd, docs/node-image.md).

What it implements: ``/version``, ``/api``, ``/apis`` discovery; core/v1 namespaces, nodes, pods
(list with labelSelector/fieldSelector, get, delete, log with ``container``/``tailLines``), events
(fieldSelector ``involvedObject.name``), services (headless); batch/v1 jobs (create, get, list,
patch, delete with ``propagationPolicy``); apps/v1 daemonsets (read-only: the CNI's daemonset,
``kube-flannel-ds`` by default, whose existence says which CNI the cluster runs).

Behaviour (a scheduler, a kubelet and the Job controller in one loop, every 0.5 s):
- scheduling: ``nodeSelector``, ``requiredDuringScheduling`` pod (anti-)affinity on
  ``kubernetes.io/hostname``, requests (cpu, memory, ``nvidia.com/gpu``) vs the node's allocatable
  minus its running pods' requests; no fit = Pending, ``PodScheduled=False`` reason
  ``Unschedulable`` and a ``FailedScheduling`` event;
- images: never pulled (there is no registry): an image missing on the node's engine is waiting
  ``ErrImagePull`` then ``ImagePullBackOff`` with ``Failed``/``BackOff`` events;
- limits: memory -> ``docker --memory``, cpu -> ``--cpus``, ``nvidia.com/gpu`` -> ``--gpus N``;
  an OOM kill is terminated reason ``OOMKilled``, exit 137;
- Jobs: one pod (parallelism 1, restartPolicy Never, backoffLimit 0 honoured as "no retries"),
  ``activeDeadlineSeconds`` kills the pod (SIGTERM, grace, SIGKILL) and fails the Job with
  ``DeadlineExceeded``; a failed or deleted running pod fails it with ``BackoffLimitExceeded``;
- networking: pods use the node's network namespace (``--network host``): pods on different nodes
  reach each other at their node's address; a pod with ``hostname`` + ``subdomain`` naming a
  headless Service gets ``--add-host`` entries for every scheduled pod of that subdomain. There is
  no overlay: the CNI it reports is honest about that (``--cni``).

What it does not do: watches, exec/attach/port-forward, ReplicaSets/Deployments, RBAC and
admission (TLS client certificates are checked, nothing more), resourceVersion conflicts, more
than one container per pod, image pulls, volumes other than hostPath.

Run: ``python devcloud/k8s_standin.py --state-dir DIR --listen 127.0.0.1:PORT --nodes NODES_JSON
[--tls-cert F --tls-key F --client-ca F]`` or :func:`start` / :func:`stop` from Python. Stdlib only
(plus the ``ssh`` and ``docker`` CLIs): it imports nothing of dlbench.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import re
import signal
import socket
import ssl
import string
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

KUBE_VERSION = "v1.33.0-dlbench-standin"
DEFAULT_CNI = "flannel"
CNI_NOTE = "stand-in: no overlay, pods use the node's host network"
CONTAINER_LABEL = "dlbench.k8s-standin"
GRACE_S = 10
TICK_S = 0.5


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def parse_time(text: str) -> float:
    import calendar

    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message,
                "reason": self.reason, "code": self.code}


# -- quantities and selectors ----------------------------------------------------------------------

_SUFFIX = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
           "m": 1e-3}


def quantity(text: Any) -> float:
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text).strip())
    if not match or match.group(2) not in _SUFFIX:
        raise ApiError(422, "Invalid", f"quantities must match the regular expression: {text!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def label_match(labels: dict[str, str], selector: str) -> bool:
    """``a=b,c!=d,e`` (equality-based selectors and existence)."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def field_value(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def field_match(obj: dict[str, Any], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        negate = "!=" in term
        key, value = term.split("!=" if negate else "=", 1)
        if (field_value(obj, key.strip().lstrip("=")) == value.strip().lstrip("=")) == negate:
            return False
    return True


def expr_match(labels: dict[str, str], expressions: list[dict[str, Any]]) -> bool:
    for expr in expressions or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) \
                or (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


def selector_match(labels: dict[str, str], selector: dict[str, Any] | None) -> bool:
    selector = selector or {}
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items()) and \
        expr_match(labels, selector.get("matchExpressions") or [])


# -- nodes -----------------------------------------------------------------------------------------

class Node:
    """A devcloud machine as a Kubernetes node: its engine reached with ``ssh ... docker``."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.name = spec["name"]
        self.address = spec["address"]
        self.user = spec.get("ssh_user", "root")
        self.key = spec["ssh_key_path"]
        self.port = int(spec.get("ssh_port", 22))
        self.labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", **(spec.get("labels") or {})}
        self.capacity = {"cpu": str(spec.get("cpu", "2")), "memory": str(spec.get("memory", "2Gi")), "pods": "110"}
        if spec.get("gpus"):
            self.capacity["nvidia.com/gpu"] = str(spec["gpus"])
        self.engine_version = ""
        self.kernel = ""
        self.created = now()
        self.uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"k8s-standin:{self.name}:{self.address}"))
        self.control = f"/tmp/k8s-standin-{os.getpid()}-{self.uid[:8]}.ssh"

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

    def to_api(self) -> dict[str, Any]:
        ready = bool(self.engine_version)
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "uid": self.uid, "labels": dict(self.labels), "resourceVersion": "1",
                         "creationTimestamp": self.created,
                         "annotations": {"dlbench.standin/network": CNI_NOTE}},
            "spec": {},
            "status": {
                "capacity": dict(self.capacity), "allocatable": dict(self.capacity),
                "addresses": [{"type": "InternalIP", "address": self.address},
                              {"type": "Hostname", "address": self.name}],
                "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                "reason": "KubeletReady" if ready else "EngineUnreachable",
                                "message": "docker answers over ssh" if ready else "docker does not answer",
                                "lastHeartbeatTime": now(), "lastTransitionTime": self.created}],
                "nodeInfo": {"architecture": "amd64", "bootID": self.uid, "machineID": self.uid.replace("-", ""),
                             "systemUUID": self.uid, "kernelVersion": self.kernel or "unknown",
                             "osImage": "dlbench-node (devcloud)", "operatingSystem": "linux",
                             "containerRuntimeVersion": f"docker://{self.engine_version or 'unknown'}",
                             "kubeletVersion": KUBE_VERSION, "kubeProxyVersion": KUBE_VERSION},
            },
        }


# -- the store and the API --------------------------------------------------------------------------

KINDS = {"namespaces": ("v1", "Namespace", False), "pods": ("v1", "Pod", True), "services": ("v1", "Service", True),
         "events": ("v1", "Event", True), "jobs": ("batch/v1", "Job", True),
         "daemonsets": ("apps/v1", "DaemonSet", True)}


class Cluster:
    def __init__(self, state_dir: Path, nodes: list[dict[str, Any]], cni: str = DEFAULT_CNI) -> None:
        self.state_dir = state_dir
        self.lock = threading.RLock()
        self.nodes = {spec["name"]: Node(spec) for spec in nodes}
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in KINDS}
        self.rv = 1
        self.stopping = threading.Event()
        self.cni = cni
        for name in ("default", "kube-system"):
            self.put("namespaces", "", {"metadata": {"name": name}, "spec": {"finalizers": ["kubernetes"]},
                                        "status": {"phase": "Active"}})
        if cni:
            self.put("daemonsets", "kube-system", daemonset(cni))

    # storage
    def put(self, kind: str, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        api_version, kind_name, _ = KINDS[kind]
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now())
        if KINDS[kind][2]:
            meta["namespace"] = ns
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        obj["apiVersion"], obj["kind"] = api_version, kind_name
        self.objects[kind][(ns, meta["name"])] = obj
        return obj

    def get(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        obj = self.objects[kind].get((ns, name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
        return obj

    def items(self, kind: str, ns: str | None = None) -> list[dict[str, Any]]:
        return [o for (n, _), o in sorted(self.objects[kind].items()) if ns is None or n == ns]

    def event(self, obj: dict[str, Any], reason: str, message: str, type_: str = "Normal",
              component: str = "kubelet") -> None:
        meta = obj["metadata"]
        ns = meta.get("namespace", "default")
        for ev in self.items("events", ns):
            if ev["involvedObject"]["uid"] == meta["uid"] and ev["reason"] == reason and ev["message"] == message:
                ev["count"] += 1
                ev["lastTimestamp"] = now()
                return
        name = f"{meta['name']}.{uuid.uuid4().hex[:16]}"
        self.put("events", ns, {
            "metadata": {"name": name}, "reason": reason, "message": message, "type": type_, "count": 1,
            "involvedObject": {"kind": obj["kind"], "namespace": ns, "name": meta["name"], "uid": meta["uid"],
                               "apiVersion": obj["apiVersion"], "resourceVersion": meta["resourceVersion"]},
            "firstTimestamp": now(), "lastTimestamp": now(), "source": {"component": component},
            "reportingComponent": component, "reportingInstance": "dlbench-k8s-standin"})

    # create
    def create(self, kind: str, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
        name = meta.get("name", "")
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", name) or (kind != "events" and len(name) > 63):
            raise ApiError(422, "Invalid", f'{KINDS[kind][1]} "{name}" is invalid: metadata.name: a lowercase '
                                           "RFC 1123 subdomain must consist of lower case alphanumeric characters")
        if KINDS[kind][2] and ("", ns) not in self.objects["namespaces"]:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found')
        if (ns if KINDS[kind][2] else "", name) in self.objects[kind]:
            raise ApiError(409, "AlreadyExists", f'{kind} "{name}" already exists')
        if kind == "namespaces":
            body["spec"] = {"finalizers": ["kubernetes"]}
            body["status"] = {"phase": "Active"}
            return self.put(kind, "", body)
        if kind == "pods":
            return self.create_pod(ns, body)
        if kind == "jobs":
            return self.create_job(ns, body)
        if kind == "services":
            spec = body.setdefault("spec", {})
            spec.setdefault("type", "ClusterIP")
            if spec.get("clusterIP") == "None":
                spec["clusterIPs"] = ["None"]
            body["status"] = {"loadBalancer": {}}
        return self.put(kind, ns, body)

    def create_pod(self, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        spec = body.setdefault("spec", {})
        containers = spec.get("containers") or []
        if len(containers) != 1:
            raise ApiError(422, "Invalid", "the stand-in runs exactly one container per pod")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("schedulerName", "default-scheduler")
        body["status"] = {"phase": "Pending", "qosClass": "Burstable", "conditions": []}
        body["metadata"].setdefault("labels", {})
        pod = self.put("pods", ns, body)
        return pod

    def create_job(self, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        spec = body.setdefault("spec", {})
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completions", 1)
        spec.setdefault("parallelism", 1)
        template = spec.get("template") or {}
        if (template.get("spec") or {}).get("restartPolicy") not in ("Never", "OnFailure"):
            raise ApiError(422, "Invalid", 'Job.batch is invalid: spec.template.spec.restartPolicy: Required value: '
                                           'valid values: "OnFailure", "Never"')
        body["status"] = {"active": 0, "startTime": now()}
        job = self.put("jobs", ns, body)
        uid = job["metadata"]["uid"]
        labels = {**(template.get("metadata") or {}).get("labels", {}), "controller-uid": uid,
                  "batch.kubernetes.io/controller-uid": uid, "job-name": job["metadata"]["name"],
                  "batch.kubernetes.io/job-name": job["metadata"]["name"]}
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        template.setdefault("metadata", {})["labels"] = labels
        pod = copy.deepcopy(template)
        pod["metadata"] = {"generateName": job["metadata"]["name"] + "-", "labels": labels,
                           "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
                           "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "uid": uid,
                                                "name": job["metadata"]["name"], "controller": True,
                                                "blockOwnerDeletion": True}]}
        self.create("pods", ns, pod)
        job["status"]["active"] = 1
        self.event(job, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}", component="job-controller")
        return job

    # delete
    def delete(self, kind: str, ns: str, name: str, propagation: str | None) -> dict[str, Any]:
        obj = self.get(kind, ns if KINDS[kind][2] else "", name)
        if kind == "namespaces":
            for sub in ("jobs", "pods", "services", "events", "daemonsets"):
                for item in self.items(sub, name):
                    self.delete(sub, name, item["metadata"]["name"], "Background")
            obj["status"]["phase"] = "Terminating"
            obj["metadata"]["deletionTimestamp"] = now()
        elif kind == "pods":
            self.kill_pod(obj, "deleted")
        elif kind == "jobs":
            # batch/v1 deletes orphan their pods unless told otherwise (as kube-apiserver does for Jobs).
            if (propagation or "Orphan") != "Orphan":
                for pod in self.items("pods", ns):
                    if any(ref["uid"] == obj["metadata"]["uid"] for ref in pod["metadata"].get("ownerReferences", [])):
                        self.delete("pods", ns, pod["metadata"]["name"], None)
        self.objects[kind].pop((ns if KINDS[kind][2] else "", name), None)
        return obj

    def kill_pod(self, pod: dict[str, Any], why: str, grace: int = GRACE_S) -> None:
        """Stop a pod's container (SIGTERM, ``grace`` s, SIGKILL); ``why`` = deleted keeps nothing."""
        pod.setdefault("_standin", {})["killed"] = why
        container, node = pod["_standin"].get("container"), self.nodes.get(pod["spec"].get("nodeName", ""))
        if container and node:
            if why == "deleted":
                node.docker("rm", "-f", container)
            else:
                node.docker("stop", "-t", str(grace), container, timeout=grace + 60)

    # the control loop ----------------------------------------------------------------------------
    def loop(self) -> None:
        while not self.stopping.wait(TICK_S):
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - one bad pod must not stop the cluster
                print(f"k8s-standin: tick failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    def tick(self) -> None:
        with self.lock:
            pods = [p for p in self.items("pods") if p["status"]["phase"] in ("Pending", "Running")]
        for pod in pods:
            if not pod["spec"].get("nodeName"):
                with self.lock:
                    self.schedule(pod)
        for pod in pods:
            if pod["spec"].get("nodeName"):
                self.kubelet(pod)
        with self.lock:
            for job in self.items("jobs"):
                self.job_controller(job)
            for ns in [n for n in self.items("namespaces") if n["status"]["phase"] == "Terminating"]:
                self.objects["namespaces"].pop(("", ns["metadata"]["name"]), None)

    def requests_of(self, pod: dict[str, Any]) -> dict[str, float]:
        res = pod["spec"]["containers"][0].get("resources") or {}
        wanted = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: quantity(v) for k, v in wanted.items()}

    def schedule(self, pod: dict[str, Any]) -> None:
        spec, ns = pod["spec"], pod["metadata"]["namespace"]
        reasons: dict[str, int] = {}
        fits = []
        affinity = spec.get("affinity") or {}
        others = [p for p in self.items("pods") if p is not pod and p["spec"].get("nodeName")
                  and p["status"]["phase"] in ("Pending", "Running")]
        for node in self.nodes.values():
            why = None
            if not node.engine_version:
                why = "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
            elif not all(node.labels.get(k) == v for k, v in (spec.get("nodeSelector") or {}).items()):
                why = "node(s) didn't match Pod's node affinity/selector"
            else:
                here = [p for p in others if p["spec"]["nodeName"] == node.name]
                for term in (affinity.get("podAntiAffinity") or {}).get(
                        "requiredDuringSchedulingIgnoredDuringExecution") or []:
                    if any(selector_match(p["metadata"].get("labels") or {}, term.get("labelSelector"))
                           and p["metadata"]["namespace"] == ns for p in here):
                        why = "node(s) didn't match pod anti-affinity rules"
                for term in (affinity.get("podAffinity") or {}).get(
                        "requiredDuringSchedulingIgnoredDuringExecution") or []:
                    peers = [p for p in others if selector_match(p["metadata"].get("labels") or {},
                                                                 term.get("labelSelector"))]
                    if peers and not any(p["spec"]["nodeName"] == node.name for p in peers):
                        why = "node(s) didn't match pod affinity rules"
                if why is None:
                    used: dict[str, float] = {}
                    for p in here:
                        for k, v in self.requests_of(p).items():
                            used[k] = used.get(k, 0) + v
                    for k, v in self.requests_of(pod).items():
                        if v > quantity(node.capacity.get(k, "0")) - used.get(k, 0):
                            why = f"Insufficient {k}"
                            break
            if why:
                reasons[why] = reasons.get(why, 0) + 1
            else:
                fits.append(node)
        if fits:
            spec["nodeName"] = fits[0].name
            self.set_condition(pod, "PodScheduled", "True")
            self.event(pod, "Scheduled", f"Successfully assigned {ns}/{pod['metadata']['name']} to {fits[0].name}",
                       component="default-scheduler")
            return
        detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
        message = f"0/{len(self.nodes)} nodes are available: {detail}. preemption: not eligible."
        self.set_condition(pod, "PodScheduled", "False", "Unschedulable", message)
        self.event(pod, "FailedScheduling", message, "Warning", component="default-scheduler")

    @staticmethod
    def set_condition(pod: dict[str, Any], type_: str, status: str, reason: str | None = None,
                      message: str | None = None) -> None:
        conds = pod["status"].setdefault("conditions", [])
        cond = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": now()}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        for i, old in enumerate(conds):
            if old["type"] == type_:
                if old["status"] == status and old.get("reason") == reason:
                    return
                conds[i] = cond
                return
        conds.append(cond)

    def container_status(self, pod: dict[str, Any], state: dict[str, Any], ready: bool = False) -> None:
        c = pod["spec"]["containers"][0]
        extra = pod["_standin"]
        pod["status"]["containerStatuses"] = [{
            "name": c["name"], "image": c["image"], "imageID": extra.get("image_id", ""), "ready": ready,
            "restartCount": 0, "started": "running" in state, "state": state,
            "containerID": f"docker://{extra['container_id']}" if extra.get("container_id") else None}]

    def kubelet(self, pod: dict[str, Any]) -> None:
        """One step of the pod on its node: image check, start, then follow the container."""
        extra = pod.setdefault("_standin", {})
        node = self.nodes[pod["spec"]["nodeName"]]
        c = pod["spec"]["containers"][0]
        if pod["status"]["phase"] == "Pending" and not extra.get("container"):
            if extra.get("killed"):
                return
            found = node.docker("image", "inspect", "--format", "{{.Id}}", c["image"])
            with self.lock:
                pod["status"].setdefault("hostIP", node.address)
                pod["status"].setdefault("startTime", now())
                if found.returncode != 0:
                    first = not extra.get("pull_failed")
                    extra["pull_failed"] = True
                    reason = "ErrImagePull" if first else "ImagePullBackOff"
                    msg = (f'Failed to pull image "{c["image"]}": no registry is reachable from the stand-in and '
                           f"the image is not on node {node.name}'s engine" if first
                           else f'Back-off pulling image "{c["image"]}"')
                    self.container_status(pod, {"waiting": {"reason": reason, "message": msg}})
                    self.event(pod, "Failed" if first else "BackOff", msg, "Warning")
                    if not first:
                        self.event(pod, "Failed", f"Error: {reason}", "Warning")
                    return
                extra["image_id"] = found.stdout.strip()
                argv = self.run_argv(pod, node)
            started = node.docker(*argv, timeout=120)
            if extra.get("killed") and started.returncode == 0:  # deleted while it started
                node.docker("rm", "-f", started.stdout.strip())
                return
            with self.lock:
                if started.returncode != 0:
                    self.finish_pod(pod, "Failed", {"terminated": {
                        "exitCode": 128, "reason": "StartError", "message": started.stderr.strip()[-500:],
                        "startedAt": now(), "finishedAt": now()}})
                    self.event(pod, "Failed", f"Error: {started.stderr.strip()[-300:]}", "Warning")
                    return
                extra["container"], extra["container_id"] = argv[argv.index("--name") + 1], started.stdout.strip()
                pod["status"]["phase"] = "Running"
                pod["status"]["podIP"] = node.address
                pod["status"]["podIPs"] = [{"ip": node.address}]
                self.set_condition(pod, "Initialized", "True")
                self.set_condition(pod, "ContainersReady", "True")
                self.set_condition(pod, "Ready", "True")
                self.container_status(pod, {"running": {"startedAt": now()}}, ready=True)
                self.event(pod, "Pulled", f'Container image "{c["image"]}" already present on machine')
                self.event(pod, "Created", f"Created container {c['name']}")
                self.event(pod, "Started", f"Started container {c['name']}")
            return
        if pod["status"]["phase"] != "Running":
            return
        deadline = pod["spec"].get("activeDeadlineSeconds")
        if deadline and not extra.get("killed") and time.time() - parse_time(pod["status"]["startTime"]) > deadline:
            with self.lock:
                self.event(pod, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline",
                           "Warning")
            extra["deadline"] = True
            self.kill_pod(pod, "deadline", grace=int(pod["spec"].get("terminationGracePeriodSeconds") or GRACE_S))
        inspected = node.docker("inspect", "--format", "{{json .State}}", extra["container"])
        if inspected.returncode != 0:
            return
        state = json.loads(inspected.stdout)
        if state.get("Running") or state.get("Status") in ("created", "running", "restarting"):
            return
        code = int(state.get("ExitCode", 0))
        reason = "OOMKilled" if state.get("OOMKilled") else "Completed" if code == 0 else "Error"
        finished = (state.get("FinishedAt") or "")[:19] + "Z" if state.get("FinishedAt") else now()
        started = (state.get("StartedAt") or "")[:19] + "Z" if state.get("StartedAt") else now()
        with self.lock:
            terminated = {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": finished,
                          "containerID": f"docker://{extra.get('container_id', '')}"}
            if extra.get("deadline"):
                self.finish_pod(pod, "Failed", {"terminated": terminated}, "DeadlineExceeded",
                                "Pod was active on the node longer than the specified deadline")
            else:
                self.finish_pod(pod, "Succeeded" if code == 0 else "Failed", {"terminated": terminated})
            if reason == "OOMKilled":
                limit = (c.get("resources") or {}).get("limits", {}).get("memory")
                self.event(pod, "OOMKilled", f"Container {c['name']} was OOM-killed (memory limit {limit})", "Warning")

    def finish_pod(self, pod: dict[str, Any], phase: str, state: dict[str, Any], reason: str | None = None,
                   message: str | None = None) -> None:
        pod["status"]["phase"] = phase
        if reason:
            pod["status"]["reason"], pod["status"]["message"] = reason, message
        self.set_condition(pod, "Ready", "False", "PodCompleted")
        self.set_condition(pod, "ContainersReady", "False", "PodCompleted")
        self.container_status(pod, state)

    def run_argv(self, pod: dict[str, Any], node: Node) -> list[str]:
        spec, meta, c = pod["spec"], pod["metadata"], pod["spec"]["containers"][0]
        name = f"k8s_{meta['namespace']}_{meta['name']}"[:120]
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
            path = ((volumes.get(mount["name"]) or {}).get("hostPath") or {}).get("path")
            if path:
                argv += ["-v", f"{path}:{mount['mountPath']}:{'ro' if mount.get('readOnly') else 'rw'}"]
        if spec.get("subdomain"):
            for peer in self.items("pods", meta["namespace"]):
                ps = peer["spec"]
                if ps.get("subdomain") == spec["subdomain"] and ps.get("hostname") and ps.get("nodeName"):
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

    def job_controller(self, job: dict[str, Any]) -> None:
        status, spec = job["status"], job["spec"]
        if any(c["type"] in ("Complete", "Failed") for c in status.get("conditions") or []):
            return
        uid = job["metadata"]["uid"]
        pods = [p for p in self.items("pods", job["metadata"]["namespace"])
                if any(r["uid"] == uid for r in p["metadata"].get("ownerReferences", []))]
        extra = job.setdefault("_standin", {})
        known = extra.setdefault("pods", [])
        for pod in pods:
            if pod["metadata"]["uid"] not in known:
                known.append(pod["metadata"]["uid"])
        gone = len([u for u in known if u not in {p["metadata"]["uid"] for p in pods}])
        succeeded = sum(p["status"]["phase"] == "Succeeded" for p in pods)
        failed = sum(p["status"]["phase"] == "Failed" for p in pods) + gone
        status["active"] = sum(p["status"]["phase"] in ("Pending", "Running") for p in pods)
        status["succeeded"], status["failed"] = succeeded, failed
        deadline = spec.get("activeDeadlineSeconds")
        if deadline and time.time() - parse_time(status["startTime"]) > deadline and not succeeded:
            for pod in pods:
                if pod["status"]["phase"] in ("Pending", "Running") and not pod.get("_standin", {}).get("killed"):
                    pod.setdefault("_standin", {})["deadline"] = True
                    pod["_standin"]["killed"] = "deadline"
                    threading.Thread(target=self.kill_pod, args=(pod, "deadline", int(
                        pod["spec"].get("terminationGracePeriodSeconds") or GRACE_S)), daemon=True).start()
                    if not pod["spec"].get("nodeName") or not pod["_standin"].get("container"):
                        self.finish_pod(pod, "Failed", {"terminated": {
                            "exitCode": 137, "reason": "Error", "startedAt": now(), "finishedAt": now()}},
                            "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
            if status["active"]:
                return
            self.job_done(job, "Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
        elif succeeded >= spec.get("completions", 1):
            status["completionTime"] = now()
            self.job_done(job, "Complete", None, None)
        elif failed > spec.get("backoffLimit", 6) or (failed and not status["active"]):
            self.job_done(job, "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")

    def job_done(self, job: dict[str, Any], type_: str, reason: str | None, message: str | None) -> None:
        status = job["status"]
        status["active"] = 0
        cond: dict[str, Any] = {"type": type_, "status": "True", "lastProbeTime": now(), "lastTransitionTime": now()}
        if reason:
            cond["reason"], cond["message"] = reason, message
        conds = status.setdefault("conditions", [])
        conds.append({**cond, "type": "SuccessCriteriaMet" if type_ == "Complete" else "FailureTarget"})
        conds.append(cond)
        self.event(job, "Completed" if type_ == "Complete" else reason or "Failed", message or "Job completed",
                   "Normal" if type_ == "Complete" else "Warning", component="job-controller")

    def logs(self, ns: str, name: str, tail: int | None) -> bytes:
        pod = self.get("pods", ns, name)
        extra = pod.get("_standin") or {}
        if not extra.get("container"):
            raise ApiError(400, "BadRequest", f'container "{pod["spec"]["containers"][0]["name"]}" in pod "{name}" '
                                              "is waiting to start: " + (
                                                  "image can't be pulled" if extra.get("pull_failed")
                                                  else "ContainerCreating"))
        argv = ["logs", *(["--tail", str(tail)] if tail is not None else []), extra["container"]]
        node = self.nodes[pod["spec"]["nodeName"]]
        cmd = node.ssh_argv(*argv)
        out = subprocess.run([*cmd[:-1], cmd[-1] + " 2>&1"], capture_output=True, timeout=300, check=False)
        return out.stdout

    def shutdown(self) -> None:
        """Remove every container this stand-in started (its pods end with it)."""
        self.stopping.set()
        for node in self.nodes.values():
            listed = node.docker("ps", "-aq", "--filter", f"label={CONTAINER_LABEL}=1", timeout=30)
            ids = listed.stdout.split()
            if ids:
                node.docker("rm", "-f", *ids, timeout=60)


def daemonset(cni: str) -> dict[str, Any]:
    name = {"flannel": "kube-flannel-ds", "calico": "calico-node", "cilium": "cilium"}.get(cni, cni)
    labels = {"app": cni, "k8s-app": name}
    return {"metadata": {"name": name, "labels": labels, "annotations": {"dlbench.io/cni-note": CNI_NOTE}},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"hostNetwork": True,
                                           "containers": [{"name": cni, "image": f"{cni}:stand-in"}]}}},
            "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0,
                       "numberReady": 0}}


def public(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "_standin"}


# -- HTTP ------------------------------------------------------------------------------------------

API_RESOURCES = {
    "v1": [("namespaces", "Namespace", False), ("pods", "Pod", True), ("pods/log", "Pod", True),
           ("services", "Service", True), ("events", "Event", True), ("nodes", "Node", False)],
    "batch/v1": [("jobs", "Job", True)], "apps/v1": [("daemonsets", "DaemonSet", True)],
}
ROUTE = re.compile(r"^/(?:api/v1|apis/(?P<group>batch|apps)/v1)"
                   r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<kind>[a-z]+)(?:/(?P<name>[^/]+))?(?P<log>/log)?$")


def make_handler(cluster: Cluster) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:
            if os.environ.get("K8S_STANDIN_DEBUG"):
                super().log_message(fmt, *args)

        def reply(self, code: int, body: Any, content_type: str = "application/json") -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                data = json.loads(self.rfile.read(length) or b"{}")
            except ValueError as exc:
                raise ApiError(400, "BadRequest", f"invalid JSON body: {exc}") from exc
            return data if isinstance(data, dict) else {"_list": data}

        def handle_any(self, method: str) -> None:
            try:
                url = urlparse(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                code, body, ctype = self.route(method, url.path.rstrip("/") or "/", query)
                self.reply(code, body, ctype)
            except ApiError as exc:
                self.reply(exc.code, exc.status())
            except Exception as exc:  # noqa: BLE001
                self.reply(500, ApiError(500, "InternalError", f"{type(exc).__name__}: {exc}").status())

        def do_GET(self) -> None:  # noqa: N802
            self.handle_any("GET")

        def do_POST(self) -> None:  # noqa: N802
            self.handle_any("POST")

        def do_DELETE(self) -> None:  # noqa: N802
            self.handle_any("DELETE")

        def do_PATCH(self) -> None:  # noqa: N802
            self.handle_any("PATCH")

        def route(self, method: str, path: str, query: dict[str, str]) -> tuple[int, Any, str]:
            if path == "/version":
                return 200, {"major": "1", "minor": "33", "gitVersion": KUBE_VERSION, "gitCommit": "standin",
                             "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "n/a",
                             "compiler": "n/a", "platform": "linux/amd64"}, "application/json"
            if path == "/api":
                return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}, \
                    "application/json"
            if path == "/apis":
                groups = [{"name": g, "versions": [{"groupVersion": f"{g}/v1", "version": "v1"}],
                           "preferredVersion": {"groupVersion": f"{g}/v1", "version": "v1"}} for g in ("batch", "apps")]
                return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}, "application/json"
            if path in ("/api/v1", "/apis/batch/v1", "/apis/apps/v1"):
                gv = path.removeprefix("/api/").removeprefix("/apis/")
                return 200, {"kind": "APIResourceList", "groupVersion": gv, "resources": [
                    {"name": n, "singularName": "", "namespaced": nsd, "kind": k,
                     "verbs": ["create", "delete", "get", "list", "patch"]} for n, k, nsd in API_RESOURCES[gv]]}, \
                    "application/json"
            match = ROUTE.match(path)
            if not match:
                raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
            kind, ns, name = match["kind"], match["ns"] or "", match["name"]
            if kind == "namespaces" and ns and not name:
                raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
            with cluster.lock:
                if kind == "nodes":
                    nodes = [n.to_api() for n in cluster.nodes.values()]
                    if name:
                        hit = [n for n in nodes if n["metadata"]["name"] == name]
                        if not hit:
                            raise ApiError(404, "NotFound", f'nodes "{name}" not found')
                        return 200, hit[0], "application/json"
                    wanted = query.get("labelSelector", "")
                    selected = [n for n in nodes if label_match(n["metadata"]["labels"], wanted)]
                    return 200, {"kind": "NodeList", "apiVersion": "v1", "items": selected,
                                 "metadata": {"resourceVersion": str(cluster.rv)}}, "application/json"
                if kind not in KINDS:
                    raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
                if kind == "namespaces" and name:
                    ns, name = name, name
                scope = ns if KINDS[kind][2] else ""
                if match["log"]:
                    tail = int(query["tailLines"]) if "tailLines" in query else None
                    own = cluster.get("pods", ns, name)["spec"]["containers"][0]["name"]
                    pod_container = query.get("container")
                    if pod_container and pod_container != own:
                        raise ApiError(400, "BadRequest", f"container {pod_container} is not valid for pod {name}")
            if match["log"]:
                return 200, cluster.logs(ns, name, tail), "text/plain"
            with cluster.lock:
                if method == "GET" and name:
                    return 200, public(cluster.get(kind, "" if kind == "namespaces" else scope, name)), \
                        "application/json"
                if method == "GET":
                    items = [public(o) for o in cluster.items(kind, scope if KINDS[kind][2] and ns else None)
                             if label_match(o["metadata"].get("labels") or {}, query.get("labelSelector", ""))
                             and field_match(o, query.get("fieldSelector", ""))]
                    return 200, {"kind": KINDS[kind][1] + "List", "apiVersion": KINDS[kind][0],
                                 "metadata": {"resourceVersion": str(cluster.rv)}, "items": items}, "application/json"
                if method == "POST" and not name:
                    return 201, public(cluster.create(kind, scope, self.body())), "application/json"
                if method == "DELETE" and name:
                    body = self.body()
                    policy = query.get("propagationPolicy") or body.get("propagationPolicy")
                    obj = cluster.delete(kind, "" if kind == "namespaces" else scope, name, policy)
                    return 200, public(obj), "application/json"
                if method == "PATCH" and name:
                    obj = cluster.get(kind, "" if kind == "namespaces" else scope, name)
                    patch = self.body()
                    if "_list" in patch:
                        raise ApiError(415, "UnsupportedMediaType", "the stand-in takes merge patches only")
                    merge(obj, patch)
                    cluster.rv += 1
                    obj["metadata"]["resourceVersion"] = str(cluster.rv)
                    return 200, public(obj), "application/json"
            raise ApiError(405, "MethodNotAllowed", f"{method} {path} is not supported by the stand-in")

    return Handler


def merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """RFC 7386 merge patch (what the client's dict patches need for the fields we patch)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = value


def serve(state_dir: Path, listen: str, nodes: list[dict[str, Any]], tls: dict[str, str] | None = None,
          cni: str = DEFAULT_CNI) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(state_dir, nodes, cni)
    for node in cluster.nodes.values():
        node.probe()
    host, port = listen.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), make_handler(cluster))
    server.daemon_threads = True
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls["cert"], tls["key"])
        context.load_verify_locations(tls["client_ca"])
        context.verify_mode = ssl.CERT_REQUIRED
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=cluster.loop, name="k8s-standin-loop", daemon=True).start()

    def on_term(*_: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    (state_dir / "ready").write_text(json.dumps({"pid": os.getpid(), "listen": listen}))
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        cluster.shutdown()
        (state_dir / "ready").unlink(missing_ok=True)


# -- start/stop from Python (the Magnum devcloud driver and the tests) -----------------------------

def start(state_dir: str | Path, nodes: list[dict[str, Any]], port: int, tls: dict[str, str] | None = None,
          host: str = "127.0.0.1", cni: str = DEFAULT_CNI, timeout: float = 60) -> subprocess.Popen[bytes]:
    """Start a stand-in for one cluster; returns when it answers ``/version``.

    ``tls``: ``{"cert": F, "key": F, "client_ca": F}`` (HTTPS with client certificates), else
    plain HTTP. Its output goes to ``<state_dir>/standin.log``."""
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    (state / "nodes.json").write_text(json.dumps(nodes, indent=1))
    (state / "ready").unlink(missing_ok=True)
    argv = [sys.executable, str(Path(__file__).resolve()), "--state-dir", str(state), "--listen", f"{host}:{port}",
            "--nodes", str(state / "nodes.json"), "--cni", cni]
    if tls:
        argv += ["--tls-cert", tls["cert"], "--tls-key", tls["key"], "--client-ca", tls["client_ca"]]
    log = (state / "standin.log").open("ab")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"k8s stand-in exited with {proc.returncode}: see {state / 'standin.log'}")
        if (state / "ready").exists():
            with socket.socket() as sock:
                if sock.connect_ex((host, port)) == 0:
                    return proc
        time.sleep(0.1)
    stop(proc)
    raise RuntimeError(f"k8s stand-in did not answer on {host}:{port} within {timeout:.0f} s")


def stop(proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """SIGTERM (the stand-in removes its pods' containers), then SIGKILL after ``timeout``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--listen", required=True, help="HOST:PORT")
    parser.add_argument("--nodes", required=True, help="a JSON file (or inline JSON) listing the nodes")
    parser.add_argument("--cni", default=DEFAULT_CNI, help="CNI daemonset to report (flannel, calico, cilium)")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--client-ca")
    args = parser.parse_args()
    text = args.nodes if args.nodes.lstrip().startswith("[") else Path(args.nodes).read_text()
    tls = None
    if args.tls_cert or args.tls_key or args.client_ca:
        if not (args.tls_cert and args.tls_key and args.client_ca):
            parser.error("--tls-cert, --tls-key and --client-ca go together")
        tls = {"cert": args.tls_cert, "key": args.tls_key, "client_ca": args.client_ca}
    serve(args.state_dir, args.listen, json.loads(text), tls, args.cni)


if __name__ == "__main__":
    main()
