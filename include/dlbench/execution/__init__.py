"""Execution: how a workload starts on a target and how its result document comes back.

One executor per access kind (:mod:`dlbench.execution.targets`); :func:`executor_for` is the
only place that maps one to the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dlbench.execution.base import Executor
    from dlbench.execution.targets import Target


def executor_for(target: Target) -> Executor:
    """The executor for ``target.access`` (heavy clients imported only here, at run time)."""
    access = target.access
    if access.kind == "process":
        from dlbench.execution.local import LocalProcessExecutor

        return LocalProcessExecutor(python=access.python) if access.python else LocalProcessExecutor()
    if access.kind == "docker":
        from dlbench.execution.docker import DockerExecutor

        return DockerExecutor(image=access.image)
    if access.kind in ("ssh", "ssh_docker"):
        from dlbench.execution.ssh import SSHExecutor

        return SSHExecutor()
    if access.kind == "kubernetes":
        from dlbench.execution.kubernetes import KubernetesExecutor

        return KubernetesExecutor()
    raise ValueError(f"no executor for access kind {access.kind!r}")
