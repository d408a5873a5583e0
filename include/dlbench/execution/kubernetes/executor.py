"""The Kubernetes executor: one Job per workload run, its document back through the pod's log.

One Job per run (``backoffLimit: 0``, ``restartPolicy: Never``, ``activeDeadlineSeconds`` = the
job's timeout, so the cluster itself enforces it), pinned to the target's node, requests =
limits, our labels and annotations (:mod:`dlbench.execution.kubernetes.labels`). Failures name
the cluster's reason (image pull, OOMKilled, Unschedulable, DeadlineExceeded, a pod deleted while
it ran) with the pod's Warning events; the cluster facts the number went through are recorded in
the document (:mod:`dlbench.execution.kubernetes.facts`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from dlbench.execution.base import DEFAULT_GRACE_S, Executor, StopWatch, finish, on_stop, timed_out
from dlbench.execution.container import WORKLOAD_ENV
from dlbench.execution.image import job_image
from dlbench.execution.kubernetes.client import client_for
from dlbench.execution.kubernetes.facts import cluster_facts
from dlbench.execution.kubernetes.labels import k8s_annotations, k8s_labels, label_value
from dlbench.execution.kubernetes.pods import WAITING_FAILURES, api_message, container_state, warning_events
from dlbench.execution.kubernetes.results import BEGIN, EMIT, RESULT_PATH, WRAPPER, decode_result
from dlbench.execution.kubernetes.services import ensure_headless_service, role_group, service_name
from dlbench.execution.kubernetes.watching import job_changes
from dlbench.jobs import Job
from dlbench.polling import Deadline, until
from dlbench.suites import find_spec
from dlbench.workloads.result import ResultDocument

if TYPE_CHECKING:
    from dlbench.execution.targets import KubernetesAccess, Target

log = logging.getLogger(__name__)

POLL_S = 2.0
"""The fallback poll of a Job's wait (watches wake it at each change, watching.job_changes)."""
NETWORK_NO_PEER = ("the network suite on Kubernetes measures against a peer pod on another node, and this job "
                   "has none (no --server: dlbench.execution.placement.network_endpoint starts it); refusing to "
                   "measure the pod's own loopback instead")


def _access(target: Target) -> KubernetesAccess:
    """The target's access, which :func:`dlbench.execution.executor_for` matched to this executor."""
    return cast("KubernetesAccess", target.access)


class KubernetesExecutor(Executor):
    """One Job per workload run; the document back through the pod's log (see the module doc)."""

    def __init__(self, api: Any = None, grace: float = DEFAULT_GRACE_S, unschedulable_after: float = 60.0,
                 pull_backoff_after: float = 0.0, keep: bool = False) -> None:
        self.api = api
        self.grace = grace
        self.unschedulable_after = unschedulable_after
        """Seconds a pod may stay Unschedulable before the job fails (an autoscaler may add a node)."""
        self.pull_backoff_after = pull_backoff_after
        """Seconds of ImagePullBackOff tolerated (0: the first back-off fails the job)."""
        self.keep = keep

    def workload_command(self, job: Job, data_dir: str | None) -> list[str]:
        """The pod's command: the wrapper around ``python -m dlbench.workloads <job args>``."""
        return ["sh", "-c", WRAPPER, "sh", *job.workload_argv(RESULT_PATH, "/data" if data_dir else None)]

    def job_manifest(self, job: Job, target: Target, name: str, timeout: float) -> dict[str, Any]:
        access = _access(target)
        labels = k8s_labels(job.run_id, job.job_id)
        annotations = k8s_annotations(job.run_id, job.job_id, target.expires_at)
        limits: dict[str, str] = {}
        if access.cpus:
            limits["cpu"] = f"{int(access.cpus * 1000)}m"
        if access.memory:
            limits["memory"] = access.memory
        if access.gpus and access.gpus not in ("0", "all"):
            limits["nvidia.com/gpu"] = access.gpus
        elif access.gpus == "all":
            limits["nvidia.com/gpu"] = str(target.labels.get("gpus", "1"))
        env = [{"name": k, "value": v} for k, v in {**WORKLOAD_ENV, "DLBENCH_RESULT": RESULT_PATH,
                                                     "DLBENCH_EMIT": EMIT}.items()]
        container: dict[str, Any] = {
            # The job's framework's image (a pytorch tf_cnn job: <image>-pytorch), as the cluster pulls it.
            "name": "workload", "image": job_image(access.image, job), "imagePullPolicy": access.image_pull_policy,
            "command": self.workload_command(job, target.data_dir), "env": env,
            "resources": {"limits": limits, "requests": dict(limits)} if limits else {},
            "ports": [{"containerPort": p, "hostPort": p, "protocol": "TCP"}
                      for p in access.publish or ()],
        }
        pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container],
                                    "automountServiceAccountToken": False,  # a workload needs no API token
                                    "terminationGracePeriodSeconds": int(self.grace),
                                    "activeDeadlineSeconds": int(timeout) + 5}
        selector = dict(access.node_selector or {})
        if access.node_name:
            selector["kubernetes.io/hostname"] = access.node_name
        if selector:
            pod_spec["nodeSelector"] = selector
        group = role_group(job)
        if group:
            # A distributed role: TF_CONFIG, a stable DNS name through the group's headless Service
            # (<role>-<index>.<service>), and never two roles of a group on one node.
            role, index = str(job.args["role"]), int(job.args.get("task_index", 0))
            labels["dlbench.group"] = group
            env.append({"name": "TF_CONFIG", "value": json.dumps(
                {"cluster": json.loads(str(job.args["cluster"])), "task": {"type": role, "index": index}})})
            pod_spec["hostname"] = label_value(f"{role}-{index}").lower().replace("_", "-").replace(".", "-")
            pod_spec["subdomain"] = service_name(group)
            # Peers reach a role at its node's address (the scenario's cluster spec): bind its port there.
            own = (json.loads(str(job.args["cluster"])).get(role) or [""] * (index + 1))[index]
            port = own.rpartition(":")[2]
            if port.isdigit() and not any(p["containerPort"] == int(port) for p in container["ports"]):
                container["ports"].append({"containerPort": int(port), "hostPort": int(port), "protocol": "TCP"})
            pod_spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"dlbench.group": group}}, "topologyKey": "kubernetes.io/hostname"}]}}
        if target.data_dir:
            pod_spec["volumes"] = [{"name": "data", "hostPath": {"path": target.data_dir, "type": "Directory"}}]
            container["volumeMounts"] = [{"name": "data", "mountPath": "/data", "readOnly": job.suite != "disk"}]
        shm = spec.shared_memory if (spec := find_spec(job.suite)) else None
        if shm:
            # A pod's /dev/shm is the runtime's 64 MiB unless a memory-backed volume is mounted there
            # (what vLLM's Kubernetes guide does): sized as the suite asks.
            pod_spec.setdefault("volumes", []).append({"name": "dshm", "emptyDir": {"medium": "Memory",
                                                                                    "sizeLimit": str(shm)}})
            container.setdefault("volumeMounts", []).append({"name": "dshm", "mountPath": "/dev/shm"})
        return {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": int(timeout), "ttlSecondsAfterFinished": 3600,
                     "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec}},
        }

    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float, *,
                stop: threading.Event | None = None) -> ResultDocument:
        from kubernetes import client  # heavy client library, only when a cluster is called
        from kubernetes.client.exceptions import ApiException  # heavy client library, as above

        access = _access(target)
        if job.suite == "network" and not job.args.get("server"):
            # Without a peer pod the workload would measure the pod's loopback: a visible failure,
            # never a number of the wrong path (network_endpoint gives it its peer).
            return finish(job, None, archive_path, time.monotonic(), error=NETWORK_NO_PEER)
        api = self.api or client_for(access)
        # The client's models are read as the API returns them (optional fields checked where it matters).
        batch: Any = client.BatchV1Api(api)
        core: Any = client.CoreV1Api(api)
        ns = access.namespace
        name = f"dlbench-{job.job_id[:12]}-{uuid.uuid4().hex[:5]}".lower()
        facts = cluster_facts(api, access.node_name)
        launched = time.monotonic()
        doc: ResultDocument | None = None
        error, output, ended = "", "", None
        watch = StopWatch()

        def stop_action(_: StopWatch) -> None:
            # The cluster ends it: a deadline of "now" makes the Job controller SIGTERM the pod
            # (grace, then SIGKILL) and keeps the pod and its log for the document.
            elapsed = int(time.monotonic() - launched)
            batch.patch_namespaced_job(name, ns, {"spec": {"activeDeadlineSeconds": max(1, elapsed)}})

        try:
            manifest = self.job_manifest(job, target, name, timeout)
            if role_group(job):
                ensure_headless_service(core, ns, role_group(job), job.run_id)
            batch.create_namespaced_job(ns, manifest)
            with on_stop(stop, stop_action, name=f"stop-{name}") as watch:
                error, pod = self._wait(batch, core, ns, name, timeout)
            ended = time.monotonic()
            if error.startswith("DeadlineExceeded") and not watch.fired:
                # The cluster enforced the job's timeout: one wording with every executor's timeout.
                error = timed_out(timeout, error)
            if pod is not None:
                output, doc, why = self._read_back(core, ns, pod)
                if doc is None and not error:
                    error = why
                elif doc is None:
                    error = f"{error}; {why}"
                if pod.spec.node_name:
                    facts.update({k: v for k, v in cluster_facts(api, pod.spec.node_name).items()
                                  if k in ("node", "kubelet", "container_runtime", "node_kernel")})
        except ApiException as exc:
            error = f"kubernetes API refused the job: {exc.status} {exc.reason}: {api_message(exc)}"
        finally:
            if not self.keep:
                try:
                    batch.delete_namespaced_job(name, ns, propagation_policy="Background")
                except ApiException as exc:
                    if exc.status != 404:
                        log.warning("could not delete job %s/%s: %s", ns, name, exc.reason)
        doc = finish(job, doc, archive_path, launched, error=error, output=output, stopped=watch, ended=ended)
        for key in ("cni", "kubelet", "container_runtime"):
            if facts.get(key):
                doc.environment.versions[f"k8s_{key}"] = facts[key]
        for key, value in facts.items():
            doc.labels[f"k8s_{key}"] = value
        doc.labels["k8s_job"] = f"{ns}/{name}"
        doc.write(archive_path)
        return doc

    def _wait(self, batch: Any, core: Any, ns: str, name: str, timeout: float) -> tuple[str, Any]:
        """Poll the Job and its pod until the pod's container has terminated or the job cannot
        run; (error or "", the pod or None)."""
        from kubernetes.client.exceptions import ApiException  # heavy client library, only when a cluster is called

        deadline = Deadline(timeout + self.grace + 60, f"job {ns}/{name}", may_be_spent=True)
        unschedulable_since: float | None = None
        backoff_since: float | None = None
        pod: Any = None
        outcome: tuple[str, Any] | None = None

        def observe() -> tuple[str, Any] | None:
            """One look at the Job and its pod: (error or "", the pod or None) once it has ended
            or cannot run, None while it may still run."""
            nonlocal pod, unschedulable_since, backoff_since
            job = batch.read_namespaced_job(name, ns)
            pods = core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items
            ours = next((p for p in pods if pod is not None and p.metadata.uid == pod.metadata.uid), None)
            failed = _job_reason(job)
            if pod is None and pods:
                pod = pods[0]
            elif ours is not None:
                pod = ours
            elif pod is not None:  # it had a pod, which is gone (or replaced): deleted (killed) while it ran
                try:
                    pod = core.read_namespaced_pod(pod.metadata.name, ns)
                except ApiException:
                    return (f"pod {pod.metadata.name} was deleted (killed) while it ran"
                            + warning_events(core, ns, pod.metadata.name) + failed), None
            # Deleted by someone else while it ran (not by the Job's deadline, ours or a stop's).
            # The Job controller would replace it (before Kubernetes 1.26 a deleted pod is no
            # failure): a second attempt is never measured.
            killed = pod is not None and pod.metadata.deletion_timestamp is not None \
                and not failed.startswith("DeadlineExceeded") and not _past_deadline(job)
            if killed and not failed:
                return (f"pod {pod.metadata.name} was deleted (killed) while it ran"
                        + warning_events(core, ns, pod.metadata.name)), None
            if pod is not None:
                state = container_state(pod)
                if state is not None and state.terminated is not None:
                    return _terminated_error(pod, state.terminated, failed, killed) + (
                        warning_events(core, ns, pod.metadata.name) if state.terminated.exit_code else ""), pod
                waiting = state.waiting if state is not None else None
                if waiting is not None and waiting.reason in WAITING_FAILURES:
                    backoff_since = backoff_since or time.monotonic()
                    if waiting.reason != "ErrImagePull" and time.monotonic() - backoff_since >= self.pull_backoff_after:
                        return (f"{waiting.reason}: image {pod.spec.containers[0].image!r} could not be pulled: "
                                f"{waiting.message or ''}" + warning_events(core, ns, pod.metadata.name)), None
                unschedulable = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"
                                      and c.status == "False" and c.reason == "Unschedulable"), None)
                if unschedulable is not None:
                    unschedulable_since = unschedulable_since or time.monotonic()
                    if time.monotonic() - unschedulable_since >= self.unschedulable_after:
                        return (f"Unschedulable: {unschedulable.message}"
                                + warning_events(core, ns, pod.metadata.name)), None
                else:
                    unschedulable_since = None
                if failed and pod.status.phase in ("Pending", "Failed"):
                    return failed + warning_events(core, ns, pod.metadata.name), None
            elif failed:
                return failed, None
            return None

        def ended() -> bool:
            nonlocal outcome
            outcome = observe()
            return outcome is not None

        # API errors are not retried here: the run reports the cluster's refusal as it is. A watch
        # on the Job and its pods wakes the wait at each change; the poll is the fallback.
        with job_changes(batch, core, ns, name) as wake:
            if not until(ended, deadline, POLL_S, wake):
                return timed_out(timeout, f"job {ns}/{name} still {pod.status.phase if pod else 'without pod'}"), pod
        assert outcome is not None  # until() is True only once observe() has returned one
        return outcome

    @staticmethod
    def _read_back(core: Any, ns: str, pod: Any) -> tuple[str, ResultDocument | None, str]:
        """(log, document or None, why not)."""
        raw = core.read_namespaced_pod_log(pod.metadata.name, ns, container="workload", _preload_content=False)
        text = raw.data.decode(errors="replace")
        doc, why = decode_result(text)
        tail = text[:text.rfind(BEGIN)] if BEGIN in text else text
        return tail[-4000:], doc, why


def _past_deadline(job: Any) -> bool:
    """The Job's own deadline (the timeout, or the one a stop set) has passed: its controller is
    deleting the pod for that, and will say so in the Job's Failed condition."""
    start, limit = job.status.start_time, job.spec.active_deadline_seconds
    return bool(start and limit) and (datetime.now(UTC) - start).total_seconds() >= limit - 1


def _job_reason(job: Any) -> str:
    for cond in job.status.conditions or []:
        if cond.type == "Failed" and cond.status == "True":
            return f"{cond.reason}: {cond.message}"
    return ""


def _terminated_error(pod: Any, term: Any, job_failed: str, killed: bool = False) -> str:
    if term.exit_code == 0 and not job_failed:
        return ""
    resources = pod.spec.containers[0].resources
    limit = (resources.limits or {}) if resources else {}
    if term.reason == "OOMKilled":
        return f"OOMKilled: the workload exceeded its memory limit {limit.get('memory', '?')} (exit {term.exit_code})"
    if (pod.status.reason or "") == "DeadlineExceeded" or job_failed.startswith("DeadlineExceeded"):
        return f"DeadlineExceeded: the job ran past activeDeadlineSeconds (exit {term.exit_code})"
    if killed:
        # Deleted by someone else while it ran (a kubelet reports the stopped container, then the
        # pod goes): not the workload's own failure, whatever its exit status says.
        return (f"pod {pod.metadata.name} was deleted (killed) while it ran (exit {term.exit_code})"
                + (f"; job {job_failed}" if job_failed else ""))
    why = f"workload container exited with status {term.exit_code} ({term.reason})"
    return f"{why}; job {job_failed}" if job_failed else why
