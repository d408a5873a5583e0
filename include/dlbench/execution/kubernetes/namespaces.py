"""A run's namespace is usable once its ``default`` ServiceAccount exists.

The ServiceAccount admission plugin refuses every pod of a namespace whose ServiceAccount is not
there yet, and the controller manager creates it a moment after the namespace (measured on the
devcloud's real 1.20 control plane: a peer pod created at once was refused with 500 "No API
token found for service account default"; current clusters refuse it with 403 "serviceaccount
default not found"). A Job's pods are retried by the Job controller, a plain pod (the network
suite's peer) is not: so a namespace is awaited once, where it is created. Our pods do not mount
the account's token (``automountServiceAccountToken: false``: a workload needs no API
credentials), so the account itself is all that is awaited.
"""

from __future__ import annotations

from typing import Any

from dlbench.polling import Deadline, poll

SERVICE_ACCOUNT = "default"


def await_namespace(api: Any, namespace: str, timeout: float = 60.0) -> None:
    """Return once ``namespace``'s default ServiceAccount exists; WaitTimeout names it otherwise."""
    from kubernetes import client  # heavy client library, only when a cluster is called
    from kubernetes.client.exceptions import ApiException  # (the same)

    core: Any = client.CoreV1Api(api)

    def fetch() -> bool:
        try:
            core.read_namespaced_service_account(SERVICE_ACCOUNT, namespace)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise

    poll(fetch, bool, Deadline(timeout, f"the ServiceAccount {SERVICE_ACCOUNT!r} of namespace {namespace}"), 0.2,
         lambda ok: "present" if ok else "not created yet by the cluster's controller manager")
