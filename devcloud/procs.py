"""Stopping the devcloud's processes: one home for the signal sequence every part uses (the
Ironic, Nova and Magnum parts through ``devcloud.py``, the Kubernetes control planes through
``k8s_control.py``). Stdlib only."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (the ironic master forks its service worker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                found.append(int(entry.name))
    return found


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """SIGCONT (it may be frozen by a fault knob), SIGTERM, then SIGKILL after ``timeout``."""
    stop_group([pid, *children(pid)], timeout)


def stop_group(group: list[int], timeout: float = 10.0) -> None:
    """:func:`stop_pid` for several processes at once: all signalled together, one deadline."""
    for p in group:
        for sig in (signal.SIGCONT, signal.SIGTERM):
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{p}").exists() and not _zombie(p) for p in group) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in group:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def alive(pid: int) -> bool:
    """The process runs (a zombie has ended; our own ended child is reaped here)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    return Path(f"/proc/{pid}").exists() and not _zombie(pid)
