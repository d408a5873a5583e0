"""The serving suite's tests' shared parts: vLLM servers alive on this host."""

from __future__ import annotations

import os
from pathlib import Path

from dlbench.execution import workload_env
from dlbench.workloads.profiles import Framework
from tests.support.prereqs import require, wait_for_build

SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def vllm_servers(containing: str = "") -> list[int]:
    """Live vLLM server processes (a container's are visible from the host too) whose command line
    holds ``containing`` (a job's model directory, say)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if SERVER_MODULE in cmd and containing in cmd:
            found.append(int(pid))
    return found


def serving_python() -> str:
    """The interpreter of this host's vLLM environment (``build/workload-env-vllm``), once a build of
    it beside the tests (.ci/run's ``CI_BACKGROUND``) has ended; a missing one is a missing
    prerequisite (``make workload-env-vllm``)."""
    wait_for_build(workload_env.SERVING.lock, str(workload_env.SERVING.directory))
    env = workload_env.local(Framework.VLLM)
    require(env.label == workload_env.SERVING.label,
            f"no current {workload_env.SERVING.directory} (make workload-env-vllm)")
    return env.python
