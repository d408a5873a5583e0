"""Our labels and annotations on Kubernetes objects, and the selector of a run's objects.

Label values are limited (63 characters, alphanumerics at both ends), so the exact ids and the
run's expiry travel as annotations; the labels carry shortened, still unique, values.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

from dlbench.execution.container import labels_for


def label_value(text: str) -> str:
    """A valid Kubernetes label value (63 chars, alphanumerics at both ends) for any id."""
    value = re.sub(r"[^A-Za-z0-9_.-]", "-", text)
    if len(value) > 63 or value != text:
        value = f"{value[:50].strip('-_.')}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"
    return value.strip("-_.") or "x"


def k8s_labels(run_id: str, job_id: str = "") -> dict[str, str]:
    """The labels of every object of a run (and of one job's, with ``job_id``)."""
    labels = {"dlbench": "1", "dlbench.run_id": label_value(run_id), "app.kubernetes.io/managed-by": "dlbench"}
    if job_id:
        labels["dlbench.job_id"] = label_value(job_id)
    return labels


def k8s_annotations(run_id: str, job_id: str, expires_at: datetime | None) -> dict[str, str]:
    """The exact ids and the expiry (the container labels of :func:`labels_for`) as ``dlbench.io/``
    annotations: values a label cannot hold."""
    return {f"dlbench.io/{k.replace('dlbench.', '')}": v
            for k, v in labels_for(run_id, job_id, expires_at).items() if k != "dlbench"}


def run_selector(run_id: str) -> str:
    """The label selector of a run's objects."""
    return f"dlbench=1,dlbench.run_id={label_value(run_id)}"
