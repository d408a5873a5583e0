"""The Kubernetes API client of a target, resolved on the worker at execution time.

A cluster is named by a kubeconfig path or an Airflow connection of type ``kubernetes``; the
credentials are read here, when a task talks to the cluster, so none ever travels in XCom.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dlbench.hooks.kubernetes import kube_connection

if TYPE_CHECKING:
    from dlbench.execution.targets import KubernetesAccess


def api_client(kubeconfig: str | None = None, conn_id: str | None = None, context: str | None = None) -> Any:
    """A ``kubernetes.client.ApiClient`` for a kubeconfig path or an Airflow connection of type
    ``kubernetes`` (:func:`dlbench.hooks.kubernetes.kube_connection`: an inline kubeconfig wins over
    its path, and both over ``kubeconfig``), resolved here, at execution time: no credential ever
    travels in XCom."""
    from kubernetes import config  # heavy client library, only when a cluster is called

    if conn_id:
        connection = kube_connection(conn_id)  # dlbench.hooks reads Airflow connections
        context = context or connection.context
        if connection.kube_config is not None:
            return config.new_client_from_config_dict(connection.kube_config, context=context)
        kubeconfig = connection.kube_config_path or kubeconfig
        if not kubeconfig:
            raise ValueError(f"Airflow connection {conn_id!r} has neither kube_config_path nor kube_config")
    return config.new_client_from_config(config_file=kubeconfig, context=context)


def client_for(access: KubernetesAccess) -> Any:
    """The API client of the cluster ``access`` names."""
    return api_client(access.kubeconfig, access.conn_id, access.context)
