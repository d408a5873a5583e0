"""A job across instances, for every framework: each process's role, parsed once, and its run.

The controller starts one process per role with ``--mode --role --task-index --cluster``
(docs/distributed-training.md); :func:`parse_role` validates them together into a
:class:`ClusterRole`, whose labels and parameters every framework's documents carry alike (the
role is a label: every role's document has the same parameters). A worker trains in a helper
thread (:func:`run_worker_interruptibly`): a step blocked at a barrier for a peer that died must
not keep the executor's SIGTERM from writing the document. Imports no framework.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlbench.workloads import harness
from dlbench.workloads.profiles import DistributedMode, DistributedRole
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.training.measure import StepSummary

MODES = tuple(mode.value for mode in DistributedMode)
ROLES = tuple(role.value for role in DistributedRole)


@dataclass(frozen=True)
class ClusterRole:
    """This process's place in the job: mode, role, index, and the whole cluster."""

    mode: str
    role: str
    task_index: int
    cluster: dict[str, list[str]]
    cluster_json: str

    @property
    def address(self) -> str:
        return self.cluster[self.role][self.task_index]

    @property
    def workers(self) -> int:
        return len(self.cluster["worker"])

    @property
    def parameter_servers(self) -> int:
        return len(self.cluster.get("ps", []))

    @property
    def is_chief(self) -> bool:
        return self.role == "worker" and self.task_index == 0

    def labels(self) -> dict[str, str]:
        return {"role": self.role, "task_index": str(self.task_index), "cluster": self.cluster_json,
                "address": self.address}

    def parameters(self) -> dict[str, Any]:
        """What the whole job was asked to be: equal in every role's document (the role is a label)."""
        return {"mode": self.mode, "workers": self.workers, "parameter_servers": self.parameter_servers,
                "variable_update": self.mode, "local_parameter_device": "worker_device"}


def parse_role(mode: str | None, role: str | None, task_index: int | None, cluster: str | None) -> ClusterRole:
    """Validate the distributed arguments; ValueError says what is wrong."""
    if mode not in MODES:
        raise ValueError(f"--mode is required with --scenario distributed ({' or '.join(MODES)})")
    if role not in ROLES:
        raise ValueError("--role is required with --scenario distributed (ps or worker)")
    if task_index is None or task_index < 0:
        raise ValueError("--task-index N (N >= 0) is required with --scenario distributed")
    if not cluster:
        raise ValueError('--cluster \'{"ps": ["host:port", ...], "worker": ["host:port", ...]}\' is required')
    try:
        spec = json.loads(cluster)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--cluster is not JSON: {exc}") from None
    if not isinstance(spec, dict) or set(spec) - {"ps", "worker"}:
        raise ValueError('--cluster must be an object with the keys "worker" and (distributed_replicated) "ps"')
    for job, addresses in spec.items():
        if not isinstance(addresses, list) or not addresses or not all(
                isinstance(a, str) and a.rpartition(":")[2].isdigit() and a.rpartition(":")[0] for a in addresses):
            raise ValueError(f'--cluster "{job}" must be a non-empty list of "host:port" strings')
    if "worker" not in spec:
        raise ValueError('--cluster needs a "worker" list')
    if mode == "distributed_replicated" and "ps" not in spec:
        raise ValueError('distributed_replicated needs a "ps" list in --cluster')
    if not DistributedMode(mode).has_parameter_servers:
        if "ps" in spec:
            raise ValueError(f'{mode} has no parameter server: no "ps" key in --cluster')
        if role == "ps":
            raise ValueError(f"{mode} has workers only (--role worker)")
    if task_index >= len(spec[role]):
        raise ValueError(f"--task-index {task_index} is outside the cluster's {len(spec[role])} {role} task(s)")
    return ClusterRole(mode=mode, role=role, task_index=task_index, cluster=spec, cluster_json=cluster)


def run_worker_interruptibly(doc: ResultDocument, train: Callable[[ResultDocument], StepSummary]) -> StepSummary:
    """Run ``train`` in a helper thread (:func:`harness.interruptible`) on a scratch document.

    The helper may still be running when SIGTERM ends the main thread's wait, so it never writes
    the real document while the harness serialises it: what it recorded is copied over at the end,
    whatever the end."""
    scratch = ResultDocument(benchmark=doc.benchmark, environment=doc.environment, labels=dict(doc.labels))
    try:
        return harness.interruptible(lambda: train(scratch))
    finally:
        doc.samples.extend(list(scratch.samples))
        doc.labels.update(dict(scratch.labels))
