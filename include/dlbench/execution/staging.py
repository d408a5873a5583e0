"""Put a dataset on a node before its jobs read it, and prove it arrived whole.

A real-data job reads its TFRecords from the node's own disk (that is what the studies
measure), so a dataset made on the controller (the demo ImageNet set) is copied once per node
as one tar stream over SSH, then checked on the node: same number of files and same total size
as on the controller, else :class:`StagingError` naming both. A manifest left next to the data
makes a second staging of the same set a no-op (after re-checking the files, so a damaged copy
is copied again rather than trusted).

A user's ``data_dir`` that already exists on the node is used as it is:
:func:`check_remote_data` only proves it is there and not empty.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlbench.errors import StagingError

if TYPE_CHECKING:
    from dlbench.execution.transport import RemoteHost

MANIFEST = ".dlbench-stage.json"
"""In the staged directory: {"files": {relative path: size}} as copied and verified."""



@dataclass
class Staged:
    """Where the data is on the node and what staging it took (JSON-able)."""

    remote_dir: str
    files: int
    bytes: int
    copied: bool
    seconds: float

    @property
    def mb_per_s(self) -> float | None:
        return round(self.bytes / 1e6 / self.seconds, 2) if self.copied and self.seconds > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "mb_per_s": self.mb_per_s}


def local_listing(local_dir: str | Path) -> dict[str, int]:
    """Relative path -> size of every regular file under ``local_dir`` (the manifest excluded)."""
    root = Path(local_dir)
    if not root.is_dir():
        raise StagingError(f"dataset directory {root} does not exist on the controller")
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != MANIFEST}


def remote_listing(host: RemoteHost, remote_dir: str) -> dict[str, int] | None:
    """Relative path -> size on the node, or None when ``remote_dir`` is not a directory there."""
    script = 'test -d "$1" || exit 3; exec find "$1" -type f ! -name "$2" -printf "%s %P\\n"'
    status, out = host.run(["sh", "-c", script, "sh", remote_dir, MANIFEST], 600)
    if status == 3:
        return None
    if status != 0:
        raise StagingError(f"cannot list {remote_dir} on {host.address}: {out.strip()[-300:]}")
    listing = {}
    for line in out.splitlines():
        size, _, name = line.partition(" ")
        if size.isdigit() and name:
            listing[name] = int(size)
    return listing


def verify_stage(host: RemoteHost, remote_dir: str, expected: dict[str, int]) -> dict[str, int]:
    """The node's listing, if it has the same files with the same sizes; else StagingError
    naming both counts and totals and the first differing files."""
    found = remote_listing(host, remote_dir) or {}
    if found != expected:
        differ = sorted(n for n in set(found) | set(expected) if found.get(n) != expected.get(n))
        shown = ", ".join(f"{n} (node {found.get(n, 'missing')}, controller {expected.get(n, 'absent')})"
                          for n in differ[:5])
        raise StagingError(
            f"staged data in {remote_dir} on {host.address} does not match: node has {len(found)} files / "
            f"{sum(found.values())} bytes, controller has {len(expected)} files / {sum(expected.values())} bytes; "
            f"differing: {shown}")
    return found


def stage_data(host: RemoteHost, local_dir: str | Path, remote_dir: str) -> Staged:
    """Copy ``local_dir`` to ``remote_dir`` on the node unless the same set is already there.

    The directory is ours (it holds our manifest) or absent/empty: an existing, non-empty
    directory without a manifest is someone's data and is never overwritten.
    """
    started = time.monotonic()
    expected = local_listing(local_dir)
    if not expected:
        raise StagingError(f"dataset directory {local_dir} is empty")
    manifest = _manifest(host, remote_dir)
    if manifest == expected:
        try:
            verify_stage(host, remote_dir, expected)
            return Staged(remote_dir, len(expected), sum(expected.values()), False,
                          round(time.monotonic() - started, 3))
        except StagingError:
            pass  # damaged since it was staged: copy it again
    elif manifest is None and remote_listing(host, remote_dir):
        raise StagingError(f"{remote_dir} on {host.address} holds data dlbench did not stage (no {MANIFEST}); "
                           "not overwriting it: give it as data_dir to use it as it is, or choose another path")
    host.check(["rm", "-rf", "--", remote_dir], 600)
    host.put_tree(local_dir, remote_dir)
    verify_stage(host, remote_dir, expected)
    host.put_bytes(json.dumps({"files": expected}, indent=1).encode(), f"{remote_dir}/{MANIFEST}")
    return Staged(remote_dir, len(expected), sum(expected.values()), True, round(time.monotonic() - started, 3))


def check_remote_data(host: RemoteHost, remote_dir: str) -> Staged:
    """A user-supplied data directory on the node: it must exist and hold files."""
    started = time.monotonic()
    listing = remote_listing(host, remote_dir)
    if listing is None:
        raise StagingError(f"data_dir {remote_dir} does not exist on {host.address} (it must be on every node)")
    if not listing:
        raise StagingError(f"data_dir {remote_dir} on {host.address} is empty")
    return Staged(remote_dir, len(listing), sum(listing.values()), False, round(time.monotonic() - started, 3))


def _manifest(host: RemoteHost, remote_dir: str) -> dict[str, int] | None:
    text = host.read_text(f"{remote_dir}/{MANIFEST}")
    if text is None:
        return None
    try:
        files = json.loads(text).get("files")
    except (ValueError, AttributeError):
        return {}
    return files if isinstance(files, dict) else {}
