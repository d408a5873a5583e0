"""An Airflow connection of type ``kubernetes`` read as the kubeconfig it names.

Why here: reading an Airflow connection is this package's job (``pyproject.toml``'s import
contract), so :mod:`dlbench.execution.kubernetes.client` builds the API client without importing
Airflow itself. The extras are the cncf.kubernetes provider's (``kube_config_path`` or
``kube_config``, ``cluster_context``), with or without its ``extra__kubernetes__`` prefix; they are
read on the worker at execution time, so no credential ever travels in XCom.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml


@dataclass(frozen=True)
class KubeConnection:
    """What a ``kubernetes`` connection says: an inline kubeconfig, or a kubeconfig path, and a context."""

    conn_id: str
    kube_config: dict[str, Any] | None
    """The kubeconfig inlined in the connection (``kube_config``), parsed."""
    kube_config_path: str | None
    context: str | None


def kube_connection(conn_id: str) -> KubeConnection:
    """The kubeconfig of the Airflow connection ``conn_id`` (type ``kubernetes``)."""
    from airflow.sdk.bases.hook import BaseHook  # optional: only a connection id needs Airflow

    extra = BaseHook.get_connection(conn_id).extra_dejson or {}

    def get(key: str) -> Any:
        return extra.get(key) or extra.get(f"extra__kubernetes__{key}")

    inline = get("kube_config")
    loaded = None
    if inline:
        loaded = inline if isinstance(inline, dict) else yaml.safe_load(inline)
    return KubeConnection(conn_id=conn_id, kube_config=loaded, kube_config_path=get("kube_config_path") or None,
                          context=get("cluster_context") or None)
