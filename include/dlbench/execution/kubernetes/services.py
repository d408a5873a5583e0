"""The headless Service of a distributed role group: a stable DNS name for each role's pod.

The roles of one distributed cell (one cluster spec) form a group; each role's pod is reachable
as ``<role>-<index>.dlbench-<group>`` through the group's Service (``clusterIP: None``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from dlbench.execution.kubernetes.labels import k8s_labels
from dlbench.jobs import Job


def role_group(job: Job) -> str:
    """The group of a distributed role (the same for every role of one cell: its cluster spec), or ''."""
    if "role" not in job.args or "cluster" not in job.args:
        return ""
    return hashlib.sha256(f"{job.run_id}/{job.args['cluster']}".encode()).hexdigest()[:12]


def service_name(group: str) -> str:
    """The name of a role group's headless Service (the pods' DNS subdomain)."""
    return f"dlbench-{group}"


def ensure_headless_service(core: Any, ns: str, group: str, run_id: str) -> None:
    """The group's headless Service (``clusterIP: None``): each role resolves as
    ``<role>-<index>.dlbench-<group>``. Created by the first role; removed with the run's namespace."""
    from kubernetes.client.exceptions import ApiException  # heavy client library, only when a cluster is called

    body = {"metadata": {"name": service_name(group), "labels": {**k8s_labels(run_id), "dlbench.group": group}},
            "spec": {"clusterIP": "None", "selector": {"dlbench.group": group}, "publishNotReadyAddresses": True}}
    try:
        core.create_namespaced_service(ns, body)
    except ApiException as exc:
        if exc.status != 409:
            raise
