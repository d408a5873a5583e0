"""Running external benchmark tools and failing clearly when their output is not what we parse."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence


class ToolError(RuntimeError):
    """A tool is missing or exited with an error."""


class ToolOutputError(ToolError):
    """A tool's output could not be parsed: names the tool and the offending line."""

    def __init__(self, tool: str, line: str, expected: str) -> None:
        super().__init__(f"{tool}: cannot parse output line {line.strip()[:300]!r} (expected {expected})")
        self.tool, self.line = tool, line


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolError(f"{name} is not installed (Debian package: {PACKAGES.get(name, name)})")
    return path


PACKAGES = {"ioping": "ioping", "fio": "fio", "iperf3": "iperf3", "hpcc": "hpcc", "mpirun": "openmpi-bin",
            "dd": "coreutils", "nvcc": "nvidia-cuda-toolkit"}


def run_tool(argv: Sequence[str], *, timeout: float, cwd: str | None = None, env: dict[str, str] | None = None,
             ok_codes: Sequence[int] = (0,)) -> subprocess.CompletedProcess:
    require_tool(argv[0])
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"{argv[0]} timed out after {timeout:.0f} s") from exc
    if proc.returncode not in ok_codes:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ToolError(f"{argv[0]} exited with status {proc.returncode}: {' | '.join(tail)[:500]}")
    return proc


def tool_version(argv: Sequence[str]) -> str:
    """First line of a tool's version output ('' when unavailable: versions are informative)."""
    if shutil.which(argv[0]) is None:
        return ""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0][:120] if text else ""
