"""The host's own workload environment: what bare-metal jobs on this host run in.

Why (issue 39, item 8): the embedded ``make run`` compares this host's bare metal with containers
on it. Run from the controller's virtualenv (Airflow, PyTorch and JAX beside TensorFlow), a job
imported TensorFlow in 4.8-5.1 s against 2.9-3.3 s in the workload image, and the report called
containers 25 % faster in elapsed time: it measured the environments, not the platforms. On a
cloud node both runtimes already share the node image's ``/opt/dlbench/venv``. Here the same is
built for the host: ``build/workload-env``, a virtualenv of every framework's requirement files
(:data:`dlbench.execution.image.REQUIREMENTS`, what the images and the node image install),
offline from the wheelhouse the images are built from, with a marker carrying the requirements'
digest (:func:`dlbench.execution.prepare.requirements_digest`), as the node image's does.

A local bare-metal job runs in it when it is built and current; otherwise in the controller's
interpreter, and the job says so: every local job's document carries the label
:data:`LABEL` (``workload-env`` or ``controller``), and the container's the image it ran
(``image <ref>``), so the environment is a recorded fact of each measurement.

``python -m dlbench.execution.workload_env`` builds it (``make workload-env``; ``make run``
builds it first).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dlbench.execution.image import REQUIREMENTS, ROOT, WHEELHOUSE, build_wheelhouse, pip_resolution
from dlbench.execution.prepare import requirements_digest
from dlbench.workloads.profiles import TRAINING_FRAMEWORKS, Framework

ENV_DIR = ROOT / "build" / "workload-env"
LABEL = "workload_env"
"""The document label naming the environment a job ran in."""
WORKLOAD_ENV = "workload-env"
CONTROLLER = "controller"
SYSTEM_PYTHON = "/usr/bin/python3"
"""The distribution's interpreter: the images and the node image build their venvs from it."""


@dataclass(frozen=True)
class Environment:
    python: str
    """The interpreter a local job runs."""
    label: str
    """:data:`WORKLOAD_ENV` or :data:`CONTROLLER`: the value of the job's :data:`LABEL`."""


@dataclass(frozen=True)
class Venv:
    """One workload virtualenv of this host and the frameworks it carries."""

    directory: Path
    frameworks: tuple[Framework, ...]
    label: str

    @property
    def marker(self) -> Path:
        return self.directory / "dlbench-env.json"

    @property
    def lock(self) -> Path:
        """Held while the venv builds (:func:`build`)."""
        return self.directory.with_name(self.directory.name + ".lock")


TRAINING = Venv(ENV_DIR, TRAINING_FRAMEWORKS, WORKLOAD_ENV)
"""Every training framework in one venv, as the node and VM images have them."""
SERVING = Venv(ROOT / "build" / "workload-env-vllm", (Framework.VLLM,), "workload-env-vllm")
"""vLLM in its own (its pinned set shares no versions with the training frameworks': another
Transformers, NumPy and protobuf), as its image has it alone."""


def venv_for(framework: Framework) -> Venv:
    return SERVING if framework is Framework.VLLM else TRAINING


def current(venv: Venv) -> bool:
    """``venv`` is built, from the requirement files as they are now (its marker's digest)."""
    try:
        marker = json.loads(venv.marker.read_text())
    except (OSError, ValueError):
        return False
    return (venv.directory / "bin" / "python").exists() and marker.get("requirements") == requirements_digest(
        list(venv.frameworks))


def local(framework: Framework = Framework.TENSORFLOW) -> Environment:
    """The host's workload environment of ``framework`` when it is current, else the controller's
    own interpreter (labelled so)."""
    venv = venv_for(framework)
    if current(venv):
        return Environment(str(venv.directory / "bin" / "python"), venv.label)
    return Environment(sys.executable, CONTROLLER)


def build(venv: Venv = TRAINING) -> Path:
    """Build (or rebuild, when the requirement files changed) ``venv`` offline from the wheelhouse;
    a no-op when it is current. Returns its directory.

    One build at a time, under a lock beside the venv: a second caller (two runs started together,
    or a test while CI builds the environment beside the tests) waits for the build and finds it
    current, instead of removing a venv another process is installing into."""
    if current(venv):
        return venv.directory
    venv.directory.parent.mkdir(parents=True, exist_ok=True)
    with venv.lock.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not current(venv):
            _build(venv)
    return venv.directory


def _build(venv: Venv) -> None:
    digest = requirements_digest(list(venv.frameworks))
    build_wheelhouse()
    shutil.rmtree(venv.directory, ignore_errors=True)
    # From the distribution's interpreter, as the images' and the node image's venvs are made
    # (their base is Debian's python3): not the first python3 on PATH, which here was a pyenv build
    # (3.11.7) importing TensorFlow 0.3 s slower than Debian's 3.11.2 with the same packages; and
    # nothing of the controller's virtualenv (Airflow and its dependencies) is on the workload's path.
    base = SYSTEM_PYTHON if Path(SYSTEM_PYTHON).exists() else (shutil.which("python3") or sys.executable)
    subprocess.run([base, "-m", "venv", str(venv.directory)], check=True, timeout=600)
    pip = str(venv.directory / "bin" / "pip")
    requirements = [arg for framework in venv.frameworks for arg in ("-r", str(REQUIREMENTS[framework]))]
    resolution = [arg for framework in venv.frameworks for arg in pip_resolution(framework)]
    subprocess.run([pip, "install", "-q", "--no-index", "--find-links", str(WHEELHOUSE), *resolution,
                    *requirements], check=True, timeout=3600)
    if not resolution:  # a set pinned whole lacks, by design, what it leaves out (image.PINNED_WHOLE)
        subprocess.run([pip, "check"], check=True, timeout=600)
    # The workload package from this checkout, as the controller's own interpreter finds it (the
    # images copy the same files): a job runs the code of the run that started it.
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = subprocess.run([str(venv.directory / "bin" / "python"), "-c", where], check=True,
                             capture_output=True, text=True, timeout=60).stdout.strip()
    (Path(purelib) / "dlbench-workloads.pth").write_text(f"{ROOT / 'include'}\n")
    venv.marker.write_text(json.dumps({"requirements": digest, "frameworks": [f.value for f in venv.frameworks],
                                       "base": base, "built_at": datetime.now(UTC).isoformat(timespec="seconds")}))


if __name__ == "__main__":
    # `python -m dlbench.execution.workload_env [vllm]`: the training frameworks' (make workload-env),
    # or the serving suite's (make workload-env-vllm).
    chosen = SERVING if sys.argv[1:] == [Framework.VLLM.value] else TRAINING
    print(f"workload environment: {build(chosen)} ({local(chosen.frameworks[0]).label})")
