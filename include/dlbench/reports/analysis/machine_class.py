"""What makes two executions "the same kind of machine": the key a case's history is kept under.

Why not the environment fingerprint: it hashes every fact of the environment, the hostname
included, and a container's hostname is its id, a VM's and a node's are named per run. After one
``make run`` the warehouse held 44 environments for 44 container jobs, so no container or per-run
VM series ever reached the three earlier runs regression detection needs (issue 39); and a
driver or kernel upgrade started a new, untested history, hiding the most common cause of a
regression.

A machine class is the platform and the hardware and placement facts that define the machine a
tenant would be given again: CPU model and count, memory (whole GiB: the kernel's MemTotal moves
by megabytes between boots), GPU model and count, the container's limits, and where the cloud
says so, the flavor or resource class and the image *name* (execution labels ``flavor``,
``resource_class``, ``image``, ``provider``). Never a hostname, a container id or anything named
per run. Software (kernel, driver, framework versions, image digest) is not in it: those are
:func:`software` facts, recorded on each point of a series and shown as events, not a reset.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

GIB = 1024 ** 3
PLACEMENT_LABELS = ("provider", "flavor", "resource_class", "image")
"""Execution labels that name the kind of machine a cloud gave (not this machine in particular)."""


def machine_class(platform: str, env: Mapping[str, Any], labels: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The facts of the machine class, as a dict (readable in a report); ``env`` holds the
    warehouse's environment columns (``cpu_model``, ``cpu_count``, ``memory_bytes``,
    ``gpu_model``, ``gpu_count``, ``cpu_limit_cores``, ``memory_limit_bytes``)."""
    memory = env.get("memory_bytes")
    limit = env.get("memory_limit_bytes")
    facts: dict[str, Any] = {
        "platform": platform, "cpu_model": env.get("cpu_model"), "cpu_count": env.get("cpu_count"),
        "memory_gib": round(memory / GIB) if memory else None, "gpu_model": env.get("gpu_model"),
        "gpu_count": int(env.get("gpu_count") or 0), "cpu_limit_cores": env.get("cpu_limit_cores"),
        "memory_limit_gib": round(limit / GIB, 1) if limit else None}
    for key in PLACEMENT_LABELS:
        value = (labels or {}).get(key)
        if value:
            facts[key] = str(value)
    return facts


def class_key(platform: str, env: Mapping[str, Any], labels: Mapping[str, Any] | None = None) -> str:
    """A short stable digest of :func:`machine_class`: the key a history is kept under."""
    text = json.dumps(machine_class(platform, env, labels), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def software(details: Mapping[str, Any] | None, gpu_driver: str | None = None) -> dict[str, str]:
    """The software facts of an environment (its ``details``: kernel, OS, Python, every
    ``versions`` entry, the GPU driver): what may change along one machine class's series."""
    details = details or {}
    found = {key: str(details[key]) for key in ("kernel", "os", "python") if details.get(key)}
    found.update({f"{name}": str(version) for name, version in (details.get("versions") or {}).items() if version})
    if gpu_driver:
        found.setdefault("nvidia_driver", str(gpu_driver))
    return found


def software_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """``tensorflow 2.15.0 -> 2.16.1``, one per fact that changed, appeared or went away."""
    changes = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old != new:
            changes.append(f"{key} {old or '(none)'} -> {new or '(none)'}")
    return changes
