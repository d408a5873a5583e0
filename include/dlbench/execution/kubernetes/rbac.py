"""The Kubernetes permissions dlbench needs, stated once (docs/kubernetes.md, "RBAC").

Two scopes, because a run's namespace does not exist before the run:

- :data:`CLUSTER_RULES` (a ClusterRole for the provider): read nodes (targets), the CNI's
  DaemonSet (cluster facts), and the run namespaces' lifecycle: create, label/annotate (lease),
  list by label, delete (the janitor and teardown);
- :data:`NAMESPACE_RULES` (a Role in the run's namespace, for the executor): Jobs, their pods,
  the pods' logs and events, the headless Service of a distributed role group, the network
  suite's peer pod. Nothing outside that namespace.

``python -m dlbench.execution.kubernetes.rbac --namespace NS --service-account SA`` prints the
manifests (JSON, for ``kubectl apply -f -``). tests/kubernetes checks both scopes against a real
kube-apiserver's RBAC: the executor's calls succeed with :data:`NAMESPACE_RULES` alone, and
the same credentials are refused in any other namespace.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

Rule = dict[str, list[str]]

CLUSTER_RULES: tuple[Rule, ...] = (
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create", "get", "list", "patch", "delete"]},
)

NAMESPACE_RULES: tuple[Rule, ...] = (
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["create", "get"]},
)

ROLE_NAME = "dlbench-executor"
CLUSTER_ROLE_NAME = "dlbench-provider"


def manifests(namespace: str, service_account: str, sa_namespace: str | None = None) -> list[dict[str, Any]]:
    """A Role + RoleBinding in ``namespace`` and the ClusterRole + ClusterRoleBinding, both for
    ServiceAccount ``service_account`` (of ``sa_namespace``, by default ``namespace``)."""
    subject = {"kind": "ServiceAccount", "name": service_account, "namespace": sa_namespace or namespace}
    api = "rbac.authorization.k8s.io/v1"
    return [
        {"apiVersion": api, "kind": "Role", "metadata": {"name": ROLE_NAME, "namespace": namespace},
         "rules": [dict(r) for r in NAMESPACE_RULES]},
        {"apiVersion": api, "kind": "RoleBinding", "metadata": {"name": ROLE_NAME, "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE_NAME},
         "subjects": [subject]},
        {"apiVersion": api, "kind": "ClusterRole", "metadata": {"name": CLUSTER_ROLE_NAME},
         "rules": [dict(r) for r in CLUSTER_RULES]},
        {"apiVersion": api, "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{CLUSTER_ROLE_NAME}-{service_account}"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE_NAME},
         "subjects": [subject]},
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="print the RBAC manifests dlbench needs (JSON)")
    parser.add_argument("--namespace", required=True, help="the namespace the executor's Role is bound in")
    parser.add_argument("--service-account", required=True)
    parser.add_argument("--service-account-namespace", default=None)
    args = parser.parse_args(argv)
    print(json.dumps({"apiVersion": "v1", "kind": "List",
                      "items": manifests(args.namespace, args.service_account, args.service_account_namespace)},
                     indent=1))


if __name__ == "__main__":
    main()
