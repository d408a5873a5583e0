"""Which executor starts a workload through which access: one table, keyed by the access types.

Above every executor module and :mod:`dlbench.execution.targets` (the executors import
:class:`~dlbench.execution.targets.Target`, so the access types cannot name their executors
without an import cycle). The executor modules are light: each loads its client library (docker,
paramiko, kubernetes) only when it runs a job (the Docker executor imports ``requests``, whose
timeouts the docker SDK raises).
"""

from __future__ import annotations

from collections.abc import Callable

from dlbench.execution.base import Executor
from dlbench.execution.docker import DockerExecutor
from dlbench.execution.kubernetes.executor import KubernetesExecutor
from dlbench.execution.local import LocalProcessExecutor
from dlbench.execution.ssh import SSHExecutor
from dlbench.execution.targets import (
    ACCESS_TYPES,
    KubernetesAccess,
    LocalDocker,
    LocalProcess,
    SSHDocker,
    SSHHost,
    Target,
    _Access,
)


def _local(access: LocalProcess) -> Executor:
    return LocalProcessExecutor(python=access.python) if access.python else LocalProcessExecutor()


EXECUTORS: dict[type[_Access], Callable[..., Executor]] = {
    LocalProcess: _local,
    LocalDocker: lambda access: DockerExecutor(image=access.image),
    SSHHost: lambda access: SSHExecutor(),
    SSHDocker: lambda access: SSHExecutor(),  # the node's engine over the same SSH session
    KubernetesAccess: lambda access: KubernetesExecutor(),
}
"""Access type -> a factory of the executor for one access (every type of ``ACCESS_TYPES``)."""

assert set(EXECUTORS) == set(ACCESS_TYPES), "every access type needs an executor"


def executor_for(target: Target) -> Executor:
    """The executor for ``target.access``; the seam the pipeline calls (and tests replace)."""
    return EXECUTORS[type(target.access)](target.access)
