"""Reading what the cluster says about a pod: its container's state, its Warning events, and why
the API refused a call; shared by the executor's Job and the network peer's pod."""

from __future__ import annotations

import json
from typing import Any

WAITING_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                    "CreateContainerError", "ErrImageNeverPull")
"""Waiting reasons of a container that will not start by waiting longer."""


def container_state(pod: Any) -> Any:
    """The state of the pod's (first) container, or None before the kubelet reported one."""
    statuses = pod.status.container_statuses or []
    return statuses[0].state if statuses else None


def warning_events(core: Any, ns: str, pod_name: str) -> str:
    """The pod's Warning events, oldest first, as one clause."""
    try:
        events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={pod_name}").items
    except Exception:  # noqa: BLE001 - the error is already said; events only add detail
        return ""
    warnings = [f"{e.reason}: {e.message}" for e in events if e.type == "Warning"]
    return f" [events: {'; '.join(dict.fromkeys(warnings))[:1500]}]" if warnings else ""


def api_message(exc: Any) -> str:
    """The message of an ``ApiException``'s JSON body (its raw body when it is not JSON)."""
    try:
        return json.loads(exc.body).get("message", "")
    except (TypeError, ValueError):
        return str(exc.body or "")[:500]
