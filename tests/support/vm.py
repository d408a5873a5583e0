"""The VM tier's guests as its tests reach them: waiting for the VM image that .ci/run builds beside
the tests, and this host's QEMU processes (what a test started, whether one is still alive)."""

from __future__ import annotations

from pathlib import Path

from dlbench.providers.qemu import DEFAULT_VM_IMAGE_DIR, QEMU
from tests.support import prereqs

BUILD_LOCK = Path(DEFAULT_VM_IMAGE_DIR).parent / "vm-image.lock"
"""Held by a VM image build running beside the tests (.ci/run builds it so)."""


def wait_for_build(timeout: float = 1200) -> None:
    """Wait (bounded) for a VM image build that holds :data:`BUILD_LOCK` to end."""
    prereqs.wait_for_build(BUILD_LOCK, "the VM image", timeout)


def qemu_pids() -> set[int]:
    """Every running QEMU process on this host (leak checks compare before and after)."""
    pids = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "cmdline").read_bytes().split(b"\0")[0].endswith(QEMU.encode()):
                    pids.add(int(proc.name))
            except OSError:
                continue
    return pids


def alive(pid: int) -> bool:
    """A running process (a zombie waiting for this host's init to reap it is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
