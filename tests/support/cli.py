"""The workload CLI (``python -m dlbench.workloads``) run as the benchmarked machine runs it: its
own process, output captured, the exit status left to the test to judge."""

from __future__ import annotations

import os
import subprocess
import sys


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m dlbench.workloads ARGS`` in this interpreter; ``env`` adds to this environment."""
    return subprocess.run([sys.executable, "-m", "dlbench.workloads", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, **(env or {})})
