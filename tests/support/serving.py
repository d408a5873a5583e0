"""The serving suite's tests' shared parts: vLLM servers alive on this host."""

from __future__ import annotations

import os
from pathlib import Path

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
