"""The workload images: is a Docker engine there, and are the images built (build them if not).

One image per framework of the ``tf_cnn`` suite, all from ``docker/Dockerfile`` (its
``FRAMEWORK`` build argument picks the requirements file): ``dlbench-workload:latest``
(TensorFlow, the study's, and the image of every other suite), ``dlbench-workload-pytorch:latest``
and ``dlbench-workload-jax:latest``. One image each rather than one with all three: a run loads
onto its nodes only the images its request names, and moving an image to a node costs about a
minute per 2 GB. :func:`workload_image` is the one place that maps the TensorFlow image's
reference (the providers' ``docker_image``) to another framework's.

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
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench import settings
from dlbench.execution import docker_build
from dlbench.execution.docker_build import LOCAL_BASE
from dlbench.suites import Suite, framework_of, spec_of
from dlbench.workloads.profiles import Framework

if TYPE_CHECKING:
    from dlbench.jobs import Job

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
WHEELHOUSE = ROOT / "build" / "wheelhouse"
OFFICIAL_BASE = "python:3.11-slim-bookworm"
DEFAULT_TAG = "dlbench-workload:latest"
BUILD_RECORD = ROOT / "build" / "image-build.json"
REQUIREMENTS: dict[Framework, Path] = {
    Framework.TENSORFLOW: ROOT / "requirements-workload.txt",
    Framework.PYTORCH: ROOT / "requirements-workload-pytorch.txt",
    Framework.JAX: ROOT / "requirements-workload-jax.txt",
    Framework.VLLM: ROOT / "requirements-workload-vllm.txt",
}
"""What the benchmarked machine needs to run each framework (every file also carries what the
micro-benchmarks and the workload package need). The images install one each; the node and VM
images install the training frameworks' into one venv (they are compatible: ``pip check`` passes)."""

PINNED_WHOLE: frozenset[Framework] = frozenset({Framework.VLLM})
"""Requirement files that list every package pinned and are installed (and downloaded) without
dependency resolution (``pip --no-deps``): vLLM's CPU build declares CUDA builds of packages it
does not use that break its import on a CPU (requirements-workload-vllm.txt says which)."""


def pip_resolution(framework: Framework) -> list[str]:
    """pip's arguments for how ``framework``'s requirement file is resolved (:data:`PINNED_WHOLE`)."""
    return ["--no-deps"] if framework in PINNED_WHOLE else []


def workload_image(image: str, framework: Framework) -> str:
    """The reference of ``framework``'s workload image, given the TensorFlow image's ``image``.

    ``REPO:TAG`` -> ``REPO-pytorch:TAG`` / ``REPO-jax:TAG`` (TensorFlow's is ``image`` itself), so
    one setting (a provider's ``docker_image``) names all three and a registry holds them side by
    side (``registry:5000/team/dlbench-workload:2.21`` -> ``.../dlbench-workload-pytorch:2.21``).
    A digest reference (``REPO@sha256:...``, or ``REPO:TAG@sha256:...``) pins exactly one image,
    whose framework cannot be derived from it: another framework is refused (ValueError), which
    the providers turn into a visible skip of that framework's jobs. Pin the other frameworks'
    images by tag, or give them the tags this function names.
    """
    if framework is Framework.TENSORFLOW:
        return image
    if "@" in image:
        raise ValueError(f"{image} is pinned by digest: it names the tensorflow image only, so the {framework.value} "
                         "image cannot be derived from it (name the images by tag: REPO:TAG gives "
                         f"REPO-{framework.value}:TAG)")
    slash = image.rfind("/")
    colon = image.rfind(":")
    repo, tag = (image[:colon], image[colon:]) if colon > slash else (image, "")
    return f"{repo}-{framework.value}{tag}"


def job_image(image: str, job: Job) -> str:
    """The image ``job`` runs in, given the TensorFlow image's reference: its framework's."""
    return workload_image(image, framework_of(job.args))


def frameworks_needed(frameworks: Iterable[Framework], suites: Iterable[Suite]) -> list[Framework]:
    """The frameworks whose images a run uses (:attr:`~dlbench.suites.spec.SuiteSpec.frameworks`: those named for
    ``tf_cnn``, PyTorch's for ``transformer``, TensorFlow's for every other suite). In
    :class:`Framework` order, so the images are built and loaded in a stable order."""
    chosen = list(frameworks)
    wanted = set().union(*(spec_of(suite).frameworks(chosen) for suite in suites))
    return [f for f in Framework if f in wanted]


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


def image_exists(tag: str) -> bool:
    return docker_build.docker("image", "inspect", tag, timeout=60).returncode == 0


CONTEXT_LABEL = "dlbench.context"


def context_files() -> list[Path]:
    """Everything the images are built from (and the node image's venv and package)."""
    package = ROOT / "include" / "dlbench"
    workloads = sorted(p for p in (package / "workloads").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return [DOCKERFILE, *REQUIREMENTS.values(), package / "__init__.py", *workloads]


def context_digest() -> str:
    """Hash of everything the images are built from (:func:`context_files`): a stale image (older
    workload code than the controller's) is rebuilt instead of silently benchmarking old code.

    One digest for every framework's image (and the node image's marker): it covers all the
    requirement files, so a change to one framework's pins marks all images stale. Simpler than
    one digest per image and never wrong; the cost is a rebuild of the other images' venv stage
    only when requirements change, which is rare (a code-only change rebuilds the last stage)."""
    digest = hashlib.sha256()
    for path in context_files():
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def image_is_current(tag: str) -> bool:
    proc = docker_build.docker("image", "inspect", "--format", f'{{{{index .Config.Labels "{CONTEXT_LABEL}"}}}}', tag,
                               timeout=60)
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
        if docker_build.docker("pull", OFFICIAL_BASE, timeout=120).returncode == 0:
            return OFFICIAL_BASE
    except subprocess.TimeoutExpired:
        pass
    log.info("no registry reachable: building %s with debootstrap", LOCAL_BASE)
    subprocess.run([str(ROOT / "docker" / "build-base.sh"), LOCAL_BASE], check=True, timeout=3600)
    return LOCAL_BASE


def build_wheelhouse() -> Path:
    """Download every framework's requirements' wheels on the host (pip reaches PyPI; the build
    may not): one wheelhouse for all the images and the node image (shared wheels once).

    Each file is resolved on its own (as each image installs it), so the wheelhouse holds every
    version any one of them picks. One download at a time (a lock beside it): the workload image
    and the node image both need it and are built side by side (``make -j``); a second pip
    would read half-written wheels.

    A stamp named for the requirement files' digest is written once every download succeeded:
    the next call for the same files returns at once (pip's resolve of all three took 17-30 s each
    time, and a fresh CI's prerequisites call it from several targets)."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    with (WHEELHOUSE.parent / "wheelhouse.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = WHEELHOUSE / f".complete-{_requirements_digest()}"
        if stamp.exists():
            return WHEELHOUSE
        for framework, requirements in REQUIREMENTS.items():
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
                            *pip_resolution(framework), "-d", str(WHEELHOUSE), "-r", str(requirements)],
                           check=True, timeout=3600)
        for old in WHEELHOUSE.glob(".complete-*"):
            old.unlink()
        stamp.touch()
    return WHEELHOUSE


def _requirements_digest() -> str:
    """What the wheelhouse was downloaded for: every framework's requirement file, by content."""
    digest = hashlib.sha256()
    for framework, requirements in sorted(REQUIREMENTS.items(), key=lambda item: item[0].value):
        digest.update(framework.value.encode() + b"\0" + requirements.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_image(tag: str = DEFAULT_TAG, base: str | None = None,
                framework: Framework = Framework.TENSORFLOW) -> float:
    """Build ``framework``'s workload image as ``tag``; returns the build time in seconds."""
    base = base or choose_base()
    if base == LOCAL_BASE or settings.offline_build():
        build_wheelhouse()
    else:
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    # The wheelhouse is served to the build, never copied into it (docker_build says why).
    proc = docker_build.build(
        ["-f", str(DOCKERFILE), "--build-arg", f"BASE_IMAGE={base}", "--build-arg", f"FRAMEWORK={framework.value}",
         "--label", f"{CONTEXT_LABEL}={context_digest()}", "-t", tag, str(ROOT)],
        WHEELHOUSE)
    if proc.returncode != 0:
        raise RuntimeError(f"docker build of {tag} from {base} failed: {(proc.stdout + proc.stderr)[-2000:]}")
    elapsed = time.monotonic() - started
    size = image_size(tag)
    record: dict[str, object] = {
        "tag": tag, "framework": framework.value, "base": base, "build_seconds": round(elapsed, 1), "size_bytes": size,
        "context": context_digest(), "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _record_build(record)
    log.info("built %s from %s in %.0f s (%.0f MiB)", tag, base, elapsed, size / 2**20)
    return elapsed


def _record_build(record: dict[str, object]) -> None:
    """``build/image-build.json``: the last build of each image, by tag (the TensorFlow image's
    fields stay at the top level, as before frameworks had images of their own)."""
    try:
        previous = json.loads(BUILD_RECORD.read_text())
    except (OSError, ValueError):
        previous = {}
    previous = previous if isinstance(previous, dict) else {}
    images = {**previous.pop("images", {}), str(record["tag"]): record}
    top = record if record["framework"] == Framework.TENSORFLOW.value else previous
    BUILD_RECORD.parent.mkdir(parents=True, exist_ok=True)
    BUILD_RECORD.write_text(json.dumps({**top, "images": images}, indent=2) + "\n")


def image_size(tag: str) -> int:
    """Size of the image in bytes (what ``docker images`` shows)."""
    proc = docker_build.docker("image", "inspect", "--format", "{{.Size}}", tag, timeout=60, check=True)
    return int(proc.stdout.strip())


def ensure_image(tag: str = DEFAULT_TAG, rebuild: bool = False,
                 framework: Framework = Framework.TENSORFLOW) -> str:
    """The tag of a current workload image of ``framework``, building it when missing, stale, or
    when asked."""
    if rebuild or not image_is_current(tag):
        # One build at a time on this host (docker_build.build_lock): `make -j` builds the serving
        # image beside the training ones, and a build's sweep of leftovers must not run under
        # another's build.
        with docker_build.build_lock():
            if rebuild or not image_is_current(tag):
                build_image(tag, framework=framework)
    return tag


def ensure_images(frameworks: Iterable[Framework], image: str = DEFAULT_TAG) -> dict[Framework, str]:
    """Each framework's image current (built when missing or stale). Returns the frameworks
    whose image is *unavailable*, with why (for a visible skip of that framework's jobs only);
    one failed build does not stop the others."""
    unavailable: dict[Framework, str] = {}
    for framework in frameworks:
        try:
            ensure_image(workload_image(image, framework), framework=framework)
        except Exception as exc:  # noqa: BLE001 - returned for a visible skip of this framework only
            log.warning("the %s workload image is unavailable: %s", framework.value, exc)
            unavailable[framework] = f"{type(exc).__name__}: {exc}"
    return unavailable


def main() -> int:
    """``python -m dlbench.execution.image [--rebuild] [FRAMEWORK...]``: used by ``make image``
    (every framework's image when none is named)."""
    args = sys.argv[1:]
    rebuild = "--rebuild" in args
    frameworks = [Framework(a) for a in args if not a.startswith("--")] or list(Framework)
    ok, reason = docker_available()
    if not ok:
        print(f"cannot build the workload images: {reason}", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for framework in frameworks:
        started = time.monotonic()
        tag = ensure_image(workload_image(DEFAULT_TAG, framework), rebuild=rebuild, framework=framework)
        print(f"{tag} ready ({image_size(tag) / 2**20:.0f} MiB) after {time.monotonic() - started:.0f} s"
              f" (last build recorded in {BUILD_RECORD.relative_to(ROOT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
