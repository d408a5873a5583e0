"""Make a freshly provisioned machine ready to run workloads: detect first, install only what is missing.

A machine deployed from the project's ``dlbench-node`` image says so in
``/etc/dlbench/node-image.json``; when its ``context`` equals the controller's
:func:`~dlbench.execution.image.context_digest` the node already runs this code and nothing is
done. Any other machine (a ``stock`` image: python3 and sshd) gets, for the host runtime:

- the workload package (``include/dlbench/__init__.py`` and ``include/dlbench/workloads/``,
  exactly what docker/Dockerfile copies) under ``<prefix>/include``;
- its pinned dependencies (the requirement files of the frameworks the run names:
  ``requirements-workload.txt`` for TensorFlow and the other suites,
  ``requirements-workload-<framework>.txt`` for the others; a node prepared for more frameworks
  is reused as is) from a wheelhouse the controller resolves for the node's Python version and
  glibc (``pip --only-binary=:all: --python-version
  --platform``; ``build/wheelhouse`` is used as is when it satisfies them, else wheels are
  downloaded once into ``DLBENCH_HOME/wheelhouse``), installed offline into ``<prefix>/venv``
  (or with ``pip install --target`` where ``venv`` is missing) by a pip wheel pushed along;
- a marker ``<prefix>/prepared.json``, so preparing the same node again is a no-op.

A framework that is not a training framework (vLLM, the serving suite's engine: its pinned set
shares no versions with the training frameworks') gets a venv of its own, ``<prefix>/venv-<framework>``,
on every machine, the node image's included (it carries the training frameworks only: vLLM would
add 3.4 GB to every node for a suite few runs name), made only when a run names it and kept with a
marker of its requirements' digest; the job of that framework runs that venv's interpreter
(:attr:`Preparation.pythons`), as this host's own serving environment does (``workload_env``).

Nothing is configured by hand and nothing is installed from the node's own package manager (a
cloud node may have no mirror): system tools the suites need and the node lacks are *reported*
in the :class:`Preparation` (``missing_tools``). For the docker runtime, an engine must answer
on the node; the workload image of each framework the run names (and only those:
:func:`~dlbench.execution.image.frameworks_needed`) is streamed (``docker save | ssh docker
load``) only when the node's copy is missing or built from other code (its ``dlbench.context``
label). A framework whose image cannot be had is reported in ``framework_skips`` (its jobs are
skipped, naming the image and ``make image``), not the whole platform.

:func:`prepare_many` prepares several machines in parallel, one connection per thread.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from dlbench import paths
from dlbench.errors import ExecutionError
from dlbench.execution.gpus import GpuFacts, parse_probe, probe_argv
from dlbench.execution.image import (
    CONTEXT_LABEL,
    REQUIREMENTS,
    ROOT,
    WHEELHOUSE,
    context_digest,
    pip_resolution,
    workload_image,
)
from dlbench.workloads.profiles import TRAINING_FRAMEWORKS, Framework
from dlbench.workloads.training.frameworks import PACKAGES

if TYPE_CHECKING:
    from dlbench.execution.transport import RemoteHost

log = logging.getLogger(__name__)

NODE_IMAGE_MARKER = "/etc/dlbench/node-image.json"
"""Written into the dlbench-node image by its build: {"image", "context", "python", "pythonpath"}."""
DEFAULT_PREFIX = "/opt/dlbench"
PACKAGE_ROOT = ROOT / "include"
SUITE_TOOLS = ("fio", "ioping", "iperf3", "hpcc", "mpirun", "gcc")
"""System tools of the micro-benchmark suites (disk: fio, ioping; network: iperf3; cpu: hpcc,
mpirun, gcc for HPCG). Reported when missing: the node may have no package mirror."""
PIP_ENV = ("PIP_CONFIG_FILE=/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
"""The node's own pip configuration (mirrors, constraints) must not change what gets installed."""

_PROBE = """
import importlib.util, json, os, platform, sys
libc, libc_version = platform.libc_ver()
print(json.dumps({"executable": sys.executable, "version": "%d.%d" % sys.version_info[:2],
                  "full_version": platform.python_version(), "machine": platform.machine(),
                  "libc": libc, "libc_version": libc_version,
                  "venv": importlib.util.find_spec("venv") is not None, "uid": os.getuid(),
                  "home": os.path.expanduser("~")}))
"""


@dataclass
class Preparation:
    """What a machine offers after :func:`prepare`, and what it took. JSON-able (XCom, logs).

    ``host_ready``/``host_reason`` and ``engine``/``image_loaded``/``image_reason`` are what the
    pipeline turns into visible skips; ``actions`` lists what was done (empty: nothing to do).
    """

    address: str
    python: str | None = None
    python_version: str | None = None
    pythonpath: str | None = None
    pythons: dict[str, str] = field(default_factory=dict)
    """framework -> the interpreter of its own venv on the node (frameworks outside the training
    venv: vLLM); a job of another framework runs :attr:`python`."""
    node_image: bool = False
    host_ready: bool | None = None
    host_reason: str = ""
    engine: bool | None = None
    engine_reason: str = ""
    engine_version: str = ""
    engine_id: str = ""
    image: str | None = None
    """The TensorFlow image's reference as asked for (the others are derived from it)."""
    images: dict[str, str] = field(default_factory=dict)
    """framework -> the image loaded (or found current) for it on the node."""
    image_loaded: bool | None = None
    """Every asked-for framework's image is on the node and current."""
    image_reason: str = ""
    framework_skips: dict[str, str] = field(default_factory=dict)
    """framework -> why its image is not on the node (its jobs are skipped, the others run)."""
    missing_tools: list[str] = field(default_factory=list)
    gpus: int = 0
    """NVIDIA GPUs nvidia-smi lists on the machine."""
    engine_passes_gpus: bool = False
    """The engine has the NVIDIA runtime (``--gpus`` works)."""
    actions: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Preparation:
        return cls(**data)


class _Clock:
    def __init__(self, prep: Preparation) -> None:
        self.prep = prep

    def __call__(self, phase: str) -> _Phase:
        return _Phase(self.prep, phase)


class _Phase:
    def __init__(self, prep: Preparation, phase: str) -> None:
        self.prep, self.phase = prep, phase

    def __enter__(self) -> None:
        self.started = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.prep.timings[self.phase] = round(self.prep.timings.get(self.phase, 0.0)
                                              + time.monotonic() - self.started, 3)


def prepare(host: RemoteHost, *, host_runtime: bool, docker_image: str | None,
            prefix: str = DEFAULT_PREFIX, engine: str = "docker",
            frameworks: Sequence[Framework] = (Framework.TENSORFLOW,)) -> Preparation:
    """Detect what ``host`` has and add only what is missing for the runtimes asked for, for
    ``frameworks`` (their requirements on the host, their images in the engine; ``docker_image``
    is TensorFlow's reference, the others' are derived by :func:`workload_image`).

    Raises :class:`ExecutionError` when an installation step fails; a node that *cannot* run a
    runtime (no python3, no engine) is reported in the result instead, for a visible skip.
    """
    started = time.monotonic()
    prep = Preparation(address=host.address)
    clock = _Clock(prep)
    digest = context_digest()
    with clock("detect"):
        marker = _read_json(host, NODE_IMAGE_MARKER)
    if marker and marker.get("context") == digest and marker.get("python"):
        prep.node_image = True
        prep.python, prep.pythonpath = marker["python"], marker.get("pythonpath")
        prep.python_version = marker.get("python_version")
    if host_runtime:
        if prep.node_image:
            prep.host_ready = True
        else:
            _prepare_host(host, prep, clock, prefix, digest, _training(frameworks))
        for framework in frameworks:
            if framework not in TRAINING_FRAMEWORKS and prep.host_ready:
                _prepare_own_env(host, prep, clock, prefix, framework)
    if docker_image:
        _prepare_engine(host, prep, clock, docker_image, engine, frameworks)
    with clock("detect"):
        status, out = host.run(probe_argv(engine), 60)
        facts = parse_probe(out) if status == 0 else GpuFacts()
        prep.gpus, prep.engine_passes_gpus = facts.count, facts.engine_passes_gpus
    prep.seconds = round(time.monotonic() - started, 3)
    log.info("prepared %s in %.1f s: %s", host.name, prep.seconds, ", ".join(prep.actions) or "nothing to do")
    return prep


def prepare_many(hosts: Sequence[RemoteHost], *, host_runtime: bool, docker_image: str | None,
                 prefix: str = DEFAULT_PREFIX, engine: str = "docker",
                 frameworks: Sequence[Framework] = (Framework.TENSORFLOW,)) -> list[Preparation | BaseException]:
    """:func:`prepare` on every host in parallel (one thread and one connection each); a host
    that failed yields its exception in its place, so one bad node does not hide the others."""
    if not hosts:
        return []

    def one(host: RemoteHost) -> Preparation:
        with host:
            return prepare(host, host_runtime=host_runtime, docker_image=docker_image, prefix=prefix, engine=engine,
                           frameworks=frameworks)

    results: list[Preparation | BaseException] = []
    with ThreadPoolExecutor(max_workers=min(8, len(hosts)), thread_name_prefix="dlbench-prepare") as pool:
        futures = [pool.submit(one, host) for host in hosts]
        for future in futures:
            try:
                results.append(future.result())
            except Exception as exc:  # noqa: BLE001 - returned in the host's place
                results.append(exc)
    return results


# -- host runtime --------------------------------------------------------------------------------


def _training(frameworks: Sequence[Framework]) -> list[Framework]:
    """The frameworks of the node's training venv: those of ``frameworks`` that train, TensorFlow's
    requirements when none does (what the workload package and the micro-benchmarks need)."""
    return [f for f in frameworks if f in TRAINING_FRAMEWORKS] or [Framework.TENSORFLOW]


def _probe(host: RemoteHost) -> dict[str, Any] | str:
    """The node's Python (:data:`_PROBE`), or why there is none usable."""
    status, out = host.run(["sh", "-c", 'command -v python3 && exec python3 -c "$1"', "sh", _PROBE], 60)
    if status != 0:
        return f"no usable python3 on {host.address}: {out.strip()[-300:]}"
    node: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return node


def _own_prefix(node: dict[str, Any], prefix: str) -> str:
    """``prefix``, or the SSH user's own place when it is not root (/opt needs root)."""
    return f"{node['home']}/.local/dlbench" if node["uid"] != 0 and prefix == DEFAULT_PREFIX else prefix


def _prepare_host(host: RemoteHost, prep: Preparation, clock: _Clock, prefix: str, digest: str,
                  frameworks: Sequence[Framework]) -> None:
    with clock("detect"):
        node = _probe(host)
        if isinstance(node, str):
            prep.host_ready, prep.host_reason = False, node
            return
        prep.python_version = node["version"]
        prep.missing_tools = _missing_tools(host)
        prefix = _own_prefix(node, prefix)
        mine = _read_json(host, f"{prefix}/prepared.json") or {}
        python_ok = bool(mine.get("python")) and host.run(["test", "-x", mine["python"]], 30)[0] == 0
        # A record without frameworks predates them: TensorFlow's requirements only.
        installed = [Framework(f) for f in mine.get("frameworks", [Framework.TENSORFLOW.value])]
        current = (python_ok and set(frameworks) <= set(installed)
                   and mine.get("requirements") == requirements_digest(installed))
    if current and mine.get("context") == digest:
        prep.python, prep.pythonpath, prep.host_ready = mine["python"], mine["pythonpath"], True
        return
    if not current:
        installed = [f for f in Framework if f in frameworks]
        python, pythonpath = _install_dependencies(host, prep, clock, node, prefix, installed)
    else:
        python, pythonpath = mine["python"], mine["pythonpath"]
    with clock("push_package"):
        host.check(["sh", "-c", 'rm -rf -- "$1/include/dlbench" && mkdir -p -- "$1/include"', "sh", prefix], 60)
        host.stream_from(["tar", "-c", "-f", "-", "-C", str(PACKAGE_ROOT), "--exclude=__pycache__",
                          "dlbench/__init__.py", "dlbench/workloads"],
                         ["tar", "-x", "-f", "-", "-C", f"{prefix}/include", "--no-same-owner"], 600)
        prep.actions.append("pushed the workload package")
    with clock("hpcg"):
        if "gcc" not in prep.missing_tools:  # the image prebuilds it the same way (docker/Dockerfile)
            source = f"{prefix}/include/dlbench/workloads/micro/hpcg.c"
            host.check(["sh", "-c", 'mkdir -p -- "$1/bin" && gcc -O3 -o "$1/bin/dlbench-hpcg" "$2" -lm',
                        "sh", prefix, source], 300)
    _verify(host, clock, python, pythonpath, installed)
    record = {"context": digest, "frameworks": [f.value for f in installed],
              "requirements": requirements_digest(installed), "python": python, "pythonpath": pythonpath,
              "python_version": prep.python_version, "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    host.put_bytes(json.dumps(record, indent=2).encode() + b"\n", f"{prefix}/prepared.json")
    prep.python, prep.pythonpath, prep.host_ready = python, pythonpath, True


def _verify(host: RemoteHost, clock: _Clock, python: str, pythonpath: str, frameworks: Sequence[Framework]) -> None:
    """The workload package and its own requirements import with ``python``, and ``frameworks``' packages are there."""
    with clock("verify"):
        check = ("import importlib.util, sys, dlbench.workloads.cli, pydantic, yaml\n"
                 "for p in sys.argv[1:]: assert importlib.util.find_spec(p), p + ' is not importable'")
        host.check(["env", f"PYTHONPATH={pythonpath}", python, "-c", check,
                    *(PACKAGES.get(f, f.value) for f in frameworks)], 120)


def _install_dependencies(host: RemoteHost, prep: Preparation, clock: _Clock, node: dict[str, Any],
                          prefix: str, frameworks: Sequence[Framework], venv: str = "venv") -> tuple[str, str]:
    """The pinned requirements of ``frameworks``, offline from a pushed wheelhouse: a venv
    (``<prefix>/<venv>``) when the node's Python has the ``venv`` module, else ``pip install
    --target`` (then on PYTHONPATH; only for the training venv)."""
    with clock("wheelhouse"):
        wheels = resolve_wheels(node["version"], node["machine"], node["libc_version"] if node["libc"] == "glibc"
                                else "", frameworks)
        pip_wheel = pip_wheel_path()
    remote_wheels = f"{prefix}/wheelhouse-{venv}"
    with clock("push_wheels"):
        # the training venv's --target fallback (site) is its own to replace, never another venv's
        stale = [f"{prefix}/{venv}", *([f"{prefix}/site"] if venv == "venv" else [])]
        host.check(["sh", "-c", 'rm -rf -- "$@" && mkdir -p -- "$1"', "sh", remote_wheels, *stale], 120)
        tar = ["tar", "-c", "-f", "-"]
        for wheel in [*wheels, pip_wheel]:
            tar += ["-C", str(wheel.parent), wheel.name]
        host.stream_from(tar, ["tar", "-x", "-f", "-", "-C", remote_wheels, "--no-same-owner"], 3600)
        files = [REQUIREMENTS[f] for f in frameworks]
        for file in files:
            host.put_file(file, f"{remote_wheels}/{file.name}")
        size = sum(w.stat().st_size for w in wheels)
        prep.actions.append(f"pushed {len(wheels)} wheels ({size / 2**20:.0f} MiB) for "
                            f"{', '.join(f.value for f in frameworks)}")
    pip = [f"{remote_wheels}/{pip_wheel.name}/pip", "install", "--no-index", "--find-links", remote_wheels,
           "--only-binary=:all:", "--no-warn-script-location", *_resolution(frameworks),
           *(a for file in files for a in ("-r", f"{remote_wheels}/{file.name}"))]
    with clock("pip_install"):
        python, pythonpath = f"{prefix}/{venv}/bin/python", f"{prefix}/include"
        # A framework's own venv is made as its image's and this host's are (`python3 -m venv`, with
        # the distribution's pip and setuptools): vLLM imports setuptools through
        # torch.utils.cpp_extension at start-up. The training venv needs neither (pip is pushed).
        bare = ["--without-pip"] if venv == "venv" else []
        made = node["venv"] and host.run([node["executable"], "-m", "venv", *bare, f"{prefix}/{venv}"], 300)[0] == 0
        if made:
            host.check(["env", *PIP_ENV, python, *pip], 3600)
            prep.actions.append(f"installed the requirements into a venv ({prefix}/{venv})")
        elif venv != "venv":
            host.run(["rm", "-rf", "--", remote_wheels], 120)
            raise ExecutionError(f"{host.address}'s python3 ({node['executable']}) has no venv module: "
                                 f"{', '.join(f.value for f in frameworks)} needs a venv of its own "
                                 "(install python3-venv on the node, or use the dlbench-node image)")
        else:
            python, pythonpath = node["executable"], f"{prefix}/include:{prefix}/site"
            host.check(["env", *PIP_ENV, python, *pip, "--target", f"{prefix}/site"], 3600)
            prep.actions.append(f"installed the requirements with pip --target ({prefix}/site)")
        host.run(["rm", "-rf", "--", remote_wheels], 120)
    return python, pythonpath


def _prepare_own_env(host: RemoteHost, prep: Preparation, clock: _Clock, prefix: str,
                     framework: Framework) -> None:
    """``<prefix>/venv-<framework>`` on the node, with ``framework``'s pinned set, unless its
    marker says it is there for the same requirements; its interpreter in :attr:`Preparation.pythons`."""
    with clock("detect"):
        node = _probe(host)
        if isinstance(node, str):
            raise ExecutionError(f"{framework.value} cannot be prepared: {node}")
        prefix = _own_prefix(node, prefix)
        venv = f"venv-{framework.value}"
        python, marker = f"{prefix}/{venv}/bin/python", f"{prefix}/{venv}/dlbench-env.json"
        digest = requirements_digest([framework])
        mine = _read_json(host, marker) or {}
        current = mine.get("requirements") == digest and host.run(["test", "-x", python], 30)[0] == 0
    if not current:
        python, _ = _install_dependencies(host, prep, clock, node, prefix, [framework], venv)
        _verify(host, clock, python, prep.pythonpath or f"{prefix}/include", [framework])
        host.put_bytes(json.dumps({"framework": framework.value, "requirements": digest, "python": python,
                                   "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                                  indent=2).encode() + b"\n", marker)
    prep.pythons[framework.value] = python


def _missing_tools(host: RemoteHost) -> list[str]:
    script = 'for t in "$@"; do command -v "$t" >/dev/null 2>&1 || echo "$t"; done'
    _, out = host.run(["sh", "-c", script, "sh", *SUITE_TOOLS], 60)
    return [line.strip() for line in out.splitlines() if line.strip() in SUITE_TOOLS]


def _read_json(host: RemoteHost, path: str) -> dict[str, Any] | None:
    text = host.read_text(path)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        log.warning("%s on %s is not JSON: ignored", path, host.name)
        return None
    return value if isinstance(value, dict) else None


def requirements_digest(frameworks: Sequence[Framework] = (Framework.TENSORFLOW,)) -> str:
    """Digest of the requirement files of ``frameworks`` (in :class:`Framework` order, their bytes
    concatenated: TensorFlow's alone gives the digest of ``requirements-workload.txt``, what records
    made before frameworks hold). The node image's marker carries it for all three."""
    digest = hashlib.sha256()
    for framework in Framework:
        if framework in frameworks:
            digest.update(REQUIREMENTS[framework].read_bytes())
    return digest.hexdigest()[:16]


# -- the controller's wheelhouse ------------------------------------------------------------------

_WHEEL_LOCK = threading.Lock()


def platform_tags(machine: str, glibc: str) -> list[str]:
    """Every manylinux tag a node with ``glibc`` (e.g. "2.36") on ``machine`` accepts: pip's
    ``--platform`` matches tags exactly, so the older ones must be listed too."""
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine)
    if not glibc:
        raise ExecutionError(f"the node's C library is not glibc: no manylinux wheels for it ({machine})")
    major, minor = (int(x) for x in glibc.split(".")[:2])
    if major != 2:
        raise ExecutionError(f"unexpected glibc version {glibc}")
    tags = [f"manylinux_2_{m}_{arch}" for m in range(minor, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    return tags + [f"{name}_{arch}" for floor, name in legacy.items() if minor >= floor]


def _resolution(frameworks: Sequence[Framework]) -> list[str]:
    """pip's resolution arguments for one install of ``frameworks`` (:func:`pip_resolution`): a set
    pinned whole (``--no-deps``) is installed alone, never beside a resolved one."""
    flags = {a for f in frameworks for a in pip_resolution(f)}
    if flags and len(frameworks) > 1:
        raise ExecutionError(f"{', '.join(f.value for f in frameworks)}: a set pinned whole installs alone")
    return sorted(flags)


def resolve_wheels(python_version: str, machine: str, glibc: str,
                   frameworks: Sequence[Framework] = (Framework.TENSORFLOW,)) -> list[Path]:
    """The wheel files that install the requirements of ``frameworks`` on such a node (cached).

    ``build/wheelhouse`` (made by ``make wheelhouse`` for the image) is used as is when pip can
    resolve the requirements from it for that Python and platform; otherwise the wheels are
    downloaded once into ``DLBENCH_HOME/wheelhouse/cp<XY>-<platform>-<requirements>``.
    """
    tags = platform_tags(machine, glibc)
    target = ["--only-binary=:all:", "--python-version", python_version, *(a for t in tags for a in ("--platform", t)),
              *_resolution(frameworks)]
    requirements = [a for f in Framework if f in frameworks for a in ("-r", str(REQUIREMENTS[f]))]
    key = f"cp{python_version.replace('.', '')}-{tags[0]}-{requirements_digest(frameworks)}"
    with _WHEEL_LOCK:
        if WHEELHOUSE.is_dir():
            found = _resolve_from(WHEELHOUSE, target, requirements)
            if found is not None:
                return found
        cache = paths.home() / "wheelhouse" / key
        if not (cache / ".complete").exists():
            cache.mkdir(parents=True, exist_ok=True)
            log.info("downloading the workload wheels for %s into %s", key, cache)
            _pip(["download", "-q", *target, "-d", str(cache), *requirements], 3600)
            (cache / ".complete").write_text(key + "\n")
        found = _resolve_from(cache, target, requirements)
        if found is None:
            raise ExecutionError(f"the wheels in {cache} do not satisfy {' '.join(requirements[1::2])} for {key}")
        return found


def _resolve_from(directory: Path, target: list[str], requirements: list[str]) -> list[Path] | None:
    """The wheels pip would install from ``directory`` alone (a dry run with a report), or None."""
    with tempfile.TemporaryDirectory(prefix="dlbench-wheels-") as tmp:
        report = Path(tmp) / "report.json"
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed", "--no-index",
             "--find-links", str(directory), "--report", str(report), *target, *requirements],
            capture_output=True, text=True, timeout=600, check=False,
            # ``directory`` alone: not a find-links of the environment's (PIP_FIND_LINKS, e.g. a
            # local torch wheel), whose files would fail the check below and force a download.
            env={**{k: v for k, v in _pip_env().items() if k != "PIP_FIND_LINKS"}, "PIP_CONFIG_FILE": os.devnull})
        if proc.returncode != 0 or not report.exists():
            return None
        urls = [item["download_info"]["url"] for item in json.loads(report.read_text())["install"]]
    files = [Path(unquote(urlparse(url).path)) for url in urls]
    return files if all(f.is_file() and f.parent == directory for f in files) else None


def pip_wheel_path() -> Path:
    """A pip wheel to run on the node (``python pip.whl/pip install``): a node needs no pip of
    its own. The controller's pip version, downloaded once into ``DLBENCH_HOME/wheelhouse/tools``."""
    import pip  # optional: an environment may have no pip (uv); only its version is read, to prepare a node

    tools = paths.home() / "wheelhouse" / "tools"
    name = f"pip-{pip.__version__}-py3-none-any.whl"
    with _WHEEL_LOCK:
        for candidate in (WHEELHOUSE / name, tools / name):
            if candidate.is_file():
                return candidate
        tools.mkdir(parents=True, exist_ok=True)
        _pip(["download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(tools), f"pip=={pip.__version__}"], 600)
        if not (tools / name).is_file():
            raise ExecutionError(f"pip download did not produce {name} in {tools}")
        return tools / name


def _pip_env() -> dict[str, str]:
    return {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def _pip(args: list[str], timeout: float) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout,
                          env=_pip_env(), check=False)
    if proc.returncode != 0:
        raise ExecutionError(f"pip {' '.join(args[:2])} failed: {(proc.stdout + proc.stderr)[-1500:]}")


# -- docker runtime ------------------------------------------------------------------------------


def _prepare_engine(host: RemoteHost, prep: Preparation, clock: _Clock, image: str, engine: str,
                    frameworks: Sequence[Framework] = (Framework.TENSORFLOW,)) -> None:
    """An engine on the node, and each of ``frameworks``' images current in it (only those:
    moving an image costs about a minute per 2 GB)."""
    prep.image = image
    with clock("engine"):
        status, out = host.run([engine, "info", "--format", "{{.ServerVersion}}|{{.ID}}"], 60)
    last = out.strip().splitlines()[-1] if out.strip() else ""
    if status != 0 or "|" not in last:
        why = "no docker CLI" if status == 127 else (out.strip()[-300:] or f"status {status}")
        prep.engine, prep.engine_reason = False, f"no {engine} engine answers on {host.address}: {why}"
        prep.image_loaded, prep.image_reason = False, prep.engine_reason
        return
    prep.engine = True
    prep.engine_version, prep.engine_id = last.split("|", 1)
    for framework in frameworks:
        try:
            reference = workload_image(image, framework)
        except ValueError as exc:
            prep.framework_skips[framework.value] = f"container platform skipped for {framework.value}: {exc}"
            continue
        why = _load_image(host, prep, clock, reference, engine)
        if why:
            prep.framework_skips[framework.value] = (f"container platform skipped for {framework.value}: {why} "
                                                     "(build it on the controller with `make image`)")
        else:
            prep.images[framework.value] = reference
    prep.image_loaded = not prep.framework_skips
    prep.image_reason = "; ".join(prep.framework_skips.values())


def _load_image(host: RemoteHost, prep: Preparation, clock: _Clock, image: str, engine: str) -> str:
    """``image`` current in the node's engine, loaded from the controller's copy when missing or
    stale. Returns why it cannot be ('' when it is there); a load that fails raises."""
    wanted = local_image_context(image)
    with clock("image_check"):
        present = remote_image_context(host, image, engine)
    if present is not None and (wanted is None or present == wanted):
        return ""  # the node's copy is current (or the controller has none to compare)
    if wanted is None:
        return (f"image {image} is {'stale' if present is not None else 'missing'} on "
                f"{host.address} and the controller has no copy to load")
    with clock("image_load"):
        if _STREAMING:
            status, out = _stream_image(host, image, engine)
        else:
            archive = saved_image(image, wanted)
            with open(archive, "rb") as tar:
                status, out = host.run([engine, "load"], 3600, stdin=tar)
        if status != 0:
            raise ExecutionError(f"{engine} load of {image} on {host.address} failed: {out.strip()[-800:]}")
        loaded = remote_image_context(host, image, engine)
    if loaded != wanted:
        raise ExecutionError(f"after loading, {image} on {host.address} has {CONTEXT_LABEL}={loaded!r}, "
                             f"the controller's has {wanted!r}")
    prep.actions.append(f"loaded image {image} into the node's {engine} ({local_image_size(image) / 2**20:.0f} MiB)")
    return ""


_SAVE_LOCK = threading.Lock()
_SAVED: dict[tuple[str, str], Path] = {}
_SCOPES = 0
_STREAMING = False
"""The open stage prepares one machine: its images are streamed (``docker save | load``), no archive."""


def _stream_image(host: RemoteHost, image: str, engine: str) -> tuple[int | None, str]:
    """``docker save IMAGE | <engine> load`` on ``host``, without an archive on this disk: for a
    stage of one machine (the archive exists for several machines' parallel loads, :func:`saved_image`).
    Disk: the archive of the vLLM image (3.8 GB) beside its copy on the node was run OO's lowest
    point (3,658 s in: 33 GiB used); streamed, only the node's copy is written."""
    save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert save.stdout is not None and save.stderr is not None
    try:
        status, out = host.run([engine, "load"], 3600, stdin=save.stdout)
    finally:
        save.stdout.close()
        try:
            save.wait(timeout=120)
        except subprocess.TimeoutExpired:
            save.kill()
            save.wait()
    if save.returncode != 0 and status == 0:
        status, out = save.returncode, f"docker save {image} failed: {save.stderr.read().decode(errors='replace')}"
    save.stderr.close()
    return status, out


def saved_image(image: str, context: str) -> Path:
    """The controller's image as one ``docker save`` archive, made once per image version and
    streamed to every machine from the file. Parallel ``docker save | ssh docker load`` pipelines
    (one per machine) made a node's load end with "unexpected EOF" at the moment another node's
    load finished (seen in CI and on the devcloud, 3 nodes); one save also spares the engine N
    exports of the same 2 GB. The file lives in the system temp dir until the last
    :func:`image_archives` scope around it ends (else until the process exits)."""
    with _SAVE_LOCK:
        path = _SAVED.get((image, context))
        if path is not None and path.exists():
            return path
        fd, name = tempfile.mkstemp(prefix="dlbench-image-", suffix=".tar")
        os.close(fd)
        proc = subprocess.run(["docker", "save", "-o", name, image], capture_output=True, text=True, timeout=1800,
                              check=False)
        if proc.returncode != 0:
            Path(name).unlink(missing_ok=True)
            raise ExecutionError(f"docker save {image} failed: {proc.stderr.strip()[-500:]}")
        atexit.register(lambda: Path(name).unlink(missing_ok=True))
        _SAVED[(image, context)] = Path(name)
        return Path(name)


@contextmanager
def image_archives(machines: int = 2) -> Iterator[None]:
    """Scope of one prepare stage (all its ``machines``): the image archives :func:`saved_image`
    made inside it are deleted when the last open scope ends. Without it a long-lived process
    (a test session, a worker preparing one run after another) kept every image it ever sent,
    2 GB for TensorFlow's, 1.4 GB for PyTorch's, in its temp dir. A load still reading an
    archive when it goes keeps its open file (an unlinked file stays readable).

    A stage of one machine, alone in the process, streams its images instead (no archive at all:
    :func:`_stream_image`); the archive is for several machines, whose parallel streams failed."""
    global _SCOPES, _STREAMING
    with _SAVE_LOCK:
        _SCOPES += 1
        _STREAMING = _SCOPES == 1 and machines == 1
    try:
        yield
    finally:
        with _SAVE_LOCK:
            _SCOPES -= 1
            _STREAMING = False
            if _SCOPES == 0:
                for path in _SAVED.values():
                    path.unlink(missing_ok=True)
                _SAVED.clear()


_LABEL_FORMAT = f'{{{{index .Config.Labels "{CONTEXT_LABEL}"}}}}'


def local_image_context(image: str) -> str | None:
    """The controller's image's ``dlbench.context`` label ('' when unlabelled), None when absent."""
    proc = subprocess.run(["docker", "image", "inspect", "--format", _LABEL_FORMAT, image], capture_output=True,
                          text=True, timeout=60, check=False)
    return proc.stdout.strip().replace("<no value>", "") if proc.returncode == 0 else None


def local_image_size(image: str) -> int:
    proc = subprocess.run(["docker", "image", "inspect", "--format", "{{.Size}}", image], capture_output=True,
                          text=True, timeout=60, check=False)
    return int(proc.stdout.strip() or 0) if proc.returncode == 0 else 0


def remote_image_context(host: RemoteHost, image: str, engine: str = "docker") -> str | None:
    status, out = host.run([engine, "image", "inspect", "--format", _LABEL_FORMAT, image], 60)
    return out.strip().replace("<no value>", "") if status == 0 else None
