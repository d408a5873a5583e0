"""The workload image: is a Docker engine there, and is the image built (build it if not).

Users with a registry build from the official Python image (the Dockerfile's default
``BASE_IMAGE``). Where no registry is reachable (this project's CI), the base is made locally
with debootstrap (``docker/build-base.sh``) and the Python wheels come from a wheelhouse
downloaded on the host by pip, so the build itself needs no network.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from dlbench import settings

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
WHEELHOUSE = ROOT / "build" / "wheelhouse"
OFFICIAL_BASE = "python:3.11-slim-bookworm"
LOCAL_BASE = "dlbench-base:bookworm-2"
DEFAULT_TAG = "dlbench-workload:latest"
BUILD_RECORD = ROOT / "build" / "image-build.json"


def docker_available(timeout: float = 10) -> tuple[bool, str]:
    """(True, "") when a Docker engine answers, else (False, why) for a visible skip."""
    try:
        import docker  # optional: the docker SDK may be absent (then there is no engine to use), slow to import
    except ImportError:
        return False, "the docker Python SDK is not installed"
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        client.close()
    except Exception as exc:  # noqa: BLE001 - any failure means "no usable engine", reported as such
        return False, f"no Docker engine reachable ({type(exc).__name__}: {str(exc)[:200]})"
    return True, ""


def _docker(*args: str, timeout: float = 3600, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def image_exists(tag: str) -> bool:
    return _docker("image", "inspect", tag, timeout=60, check=False).returncode == 0


CONTEXT_LABEL = "dlbench.context"


def context_digest() -> str:
    """Hash of everything the image is built from: a stale image (older workload code than the
    controller's) is rebuilt instead of silently benchmarking old code."""
    digest = hashlib.sha256()
    package = ROOT / "include" / "dlbench"
    workloads = sorted(p for p in (package / "workloads").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    files = [DOCKERFILE, ROOT / "requirements-workload.txt", package / "__init__.py", *workloads]
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def image_is_current(tag: str) -> bool:
    proc = _docker("image", "inspect", "--format", f'{{{{index .Config.Labels "{CONTEXT_LABEL}"}}}}', tag,
                   timeout=60, check=False)
    return proc.returncode == 0 and proc.stdout.strip() == context_digest()


def choose_base() -> str:
    """DLBENCH_BASE_IMAGE, else an official or local base already present, else pull, else debootstrap."""
    chosen = settings.base_image()
    if chosen:
        return chosen
    for candidate in (OFFICIAL_BASE, LOCAL_BASE):
        if image_exists(candidate):
            return candidate
    try:
        if _docker("pull", OFFICIAL_BASE, timeout=120, check=False).returncode == 0:
            return OFFICIAL_BASE
    except subprocess.TimeoutExpired:
        pass
    log.info("no registry reachable: building %s with debootstrap", LOCAL_BASE)
    subprocess.run([str(ROOT / "docker" / "build-base.sh"), LOCAL_BASE], check=True, timeout=3600)
    return LOCAL_BASE


def build_wheelhouse() -> Path:
    """Download the workload requirements' wheels on the host (pip reaches PyPI; the build may not).

    One download at a time (a lock beside it): the workload image and the node image both need
    it and are built side by side (``make -j``); a second pip would read half-written wheels."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    with (WHEELHOUSE.parent / "wheelhouse.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(WHEELHOUSE),
                        "-r", str(ROOT / "requirements-workload.txt")], check=True, timeout=3600)
    return WHEELHOUSE


def build_image(tag: str = DEFAULT_TAG, base: str | None = None) -> float:
    """Build the workload image; returns the build time in seconds."""
    base = base or choose_base()
    if base == LOCAL_BASE or settings.offline_build():
        build_wheelhouse()
    else:
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run(
        ["docker", "build", "-f", str(DOCKERFILE), "--build-arg", f"BASE_IMAGE={base}", "--label",
         f"{CONTEXT_LABEL}={context_digest()}", "-t", tag, str(ROOT)],
        capture_output=True, text=True, timeout=3600, env={**os.environ, "DOCKER_BUILDKIT": "0"}, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"docker build of {tag} from {base} failed: {(proc.stdout + proc.stderr)[-2000:]}")
    elapsed = time.monotonic() - started
    # The image this one replaced is now untagged: drop it (only ours, by label) so each workload
    # code change does not leave another 2 GB behind. Images still used by a container are kept.
    _docker("image", "prune", "--force", "--filter", f"label={CONTEXT_LABEL}", timeout=300, check=False)
    _drop_outdated_venv_stages()
    size = image_size(tag)
    record = {"tag": tag, "base": base, "build_seconds": round(elapsed, 1), "size_bytes": size,
              "context": context_digest(), "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    BUILD_RECORD.parent.mkdir(parents=True, exist_ok=True)
    BUILD_RECORD.write_text(json.dumps(record, indent=2) + "\n")
    log.info("built %s from %s in %.0f s (%.0f MiB)", tag, base, elapsed, size / 2**20)
    return elapsed


def _drop_outdated_venv_stages() -> None:
    """The legacy builder keeps each build's venv stage (1.5+ GB) as an untagged image. The newest
    one is the cache that makes a workload-code-only rebuild take seconds: keep it, drop the rest."""
    listing = _docker("image", "ls", "--filter", "label=dlbench.stage=venv", "--filter", "dangling=true",
                      "--format", "{{.CreatedAt}}\t{{.ID}}", timeout=60, check=False).stdout.split("\n")
    stale = [line.split("\t")[1] for line in sorted(filter(None, listing))[:-1]]
    if stale:
        _docker("image", "rm", *stale, timeout=300, check=False)


def image_size(tag: str) -> int:
    """Size of the image in bytes (what ``docker images`` shows)."""
    return int(_docker("image", "inspect", "--format", "{{.Size}}", tag, timeout=60).stdout.strip())


def ensure_image(tag: str = DEFAULT_TAG, rebuild: bool = False) -> str:
    """The tag of a current workload image, building it when missing, stale, or when asked."""
    if rebuild or not image_is_current(tag):
        build_image(tag)
    return tag


def main() -> int:
    """``python -m dlbench.execution.image [--rebuild]``: used by ``make image``."""
    rebuild = "--rebuild" in sys.argv[1:]
    ok, reason = docker_available()
    if not ok:
        print(f"cannot build the workload image: {reason}", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    started = time.monotonic()
    tag = ensure_image(DEFAULT_TAG, rebuild=rebuild)
    print(f"{tag} ready ({image_size(tag) / 2**20:.0f} MiB) after {time.monotonic() - started:.0f} s"
          f" (last build recorded in {BUILD_RECORD.relative_to(ROOT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
