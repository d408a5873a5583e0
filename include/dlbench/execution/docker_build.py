"""``docker build`` for our images: the wheelhouse served, not copied, and nothing left behind.

Why this exists: stop 53's landing CI ran out of disk 651 s in, on a machine that had 31 GiB
free at the start, and its engine held 27.9 GB of images, about 19 GB of them our builds'
untagged leftovers. Two causes, both in how the images were built:

* Offline builds (no package index, as in CI) took their Python wheels from a wheelhouse copied
  into the build context. To keep those wheels out of the image, the venv was built in a stage
  of its own and copied over; the legacy builder keeps every stage as an untagged image. So the
  wheelhouse (1.3 GB) and every venv were stored twice: the four workload images' stages held
  8 GB beside the images themselves.
* The Airflow image's stages were never removed: every build that changed its wheelhouse or its
  code left about 2.2 GB behind (ten of them on that machine).

Here the wheelhouse is served over HTTP on this host's loopback for the build's duration, and
the build's RUN steps use the host's network (``--network host``): pip reads the wheels and the
image holds only what it installed, in one stage. The URL is a build argument, and the legacy
builder keys its cache on build arguments, so the port is fixed (:data:`PORT`): the same
requirements give the same cached venv layer, whatever the wheelhouse's files' dates. When the
port is taken, a free one is used: the build stays right, only uncached.

After each build, :func:`drop_leftovers` removes our untagged images: those with one of our labels
and those built on the project's local base (only our builds use it), old-layout stages and the
Airflow image's unlabelled ones included. Builds and this sweep run one at a time on a host
(:func:`build_lock`): a sweep beside a running build could remove the build's newest step.
"""

from __future__ import annotations

import fcntl
import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LOCK = ROOT / "build" / "image-build.lock"
LOCAL_BASE = "dlbench-base:bookworm-2"
"""The images' base where no registry is reachable (docker/build-base.sh makes it with debootstrap)."""
PORT = 18971
"""Where the wheelhouse is served during a build (127.0.0.1; below Linux's ephemeral range)."""
LABEL_PREFIX = "dlbench."


@contextmanager
def build_lock() -> Iterator[None]:
    """One build (and its sweep) at a time on this host. Not re-entrant: take it once per process."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """``directory`` over HTTP on 127.0.0.1 while the block runs; yields its URL (pip's
    ``--find-links`` reads the listing's links)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), handler)
    except OSError:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="wheelhouse", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def has_wheels(wheelhouse: Path) -> bool:
    return any(wheelhouse.glob("*.whl"))


def build(args: Sequence[str], wheelhouse: Path | None = None, timeout: float = 3600) -> subprocess.CompletedProcess:
    """``docker build ARGS`` (the legacy builder, as everywhere here), with ``WHEELHOUSE`` the served
    wheelhouse's URL when it holds wheels (else the Dockerfile installs from the index). The caller
    holds :func:`build_lock`; leftovers are dropped after a successful build."""
    served = serve(wheelhouse) if wheelhouse is not None and has_wheels(wheelhouse) else nullcontext(None)
    with served as url:
        network = ["--network", "host", "--build-arg", f"WHEELHOUSE={url}"] if url else []
        proc = subprocess.run(["docker", "build", *network, *args], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "DOCKER_BUILDKIT": "0"}, check=False)
    if proc.returncode == 0:
        drop_leftovers()
    return proc


def docker(*args: str, timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess:
    """``docker ARGS``, its output captured (image.py's calls too)."""
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def _inspect(images: Sequence[str]) -> list[tuple[str, dict[str, str], list[str]]]:
    """(id, labels, layers) of each of ``images`` that exists."""
    if not images:
        return []
    proc = docker("image", "inspect", "--format", "{{.Id}}\t{{json .Config.Labels}}\t{{json .RootFS.Layers}}",
                   *images, timeout=120)
    found = []
    for line in proc.stdout.splitlines():
        image_id, labels, layers = (line.split("\t") + ["", ""])[:3]
        found.append((image_id, json.loads(labels or "null") or {}, json.loads(layers or "null") or []))
    return found


def leftovers() -> list[str]:
    """Our untagged images: with one of our labels, or built on :data:`LOCAL_BASE`."""
    dangling = docker("image", "ls", "--quiet", "--no-trunc", "--filter", "dangling=true", timeout=60).stdout.split()
    base = next((layers for _, _, layers in _inspect([LOCAL_BASE])), [])
    return [image_id for image_id, labels, layers in _inspect(dangling)
            if any(key.startswith(LABEL_PREFIX) for key in labels) or (base and layers[:len(base)] == base)]


def drop_leftovers() -> list[str]:
    """Remove :func:`leftovers` (one still used by a container is kept: ``docker rmi`` refuses
    it). Returns what was removed."""
    removed = []
    for image_id in leftovers():
        if docker("image", "rm", image_id).returncode == 0:
            removed.append(image_id)
    return removed


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dlbench.execution.docker_build [--wheelhouse DIR] -- DOCKER_BUILD_ARGS...``
    (the Airflow and the stack's images, docker/build-airflow-image.sh and mk/airflow-image.mk);
    ``--drop-leftovers`` alone sweeps (.ci/run, before its builds)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--drop-leftovers"]:
        with build_lock():
            removed = drop_leftovers()
        print(f"removed {len(removed)} untagged image(s) our builds had left")
        return 0
    wheelhouse = None
    if args[:1] == ["--wheelhouse"]:
        wheelhouse, args = Path(args[1]), args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    with build_lock():
        proc = build(args, wheelhouse)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
