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

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dlbench.execution.image import REQUIREMENTS, ROOT, WHEELHOUSE, build_wheelhouse
from dlbench.execution.prepare import requirements_digest
from dlbench.workloads.profiles import Framework

ENV_DIR = ROOT / "build" / "workload-env"
MARKER = ENV_DIR / "dlbench-env.json"
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


def local() -> Environment:
    """The host's workload environment when it is built from the current requirement files, else
    the controller's own interpreter (labelled so)."""
    python = ENV_DIR / "bin" / "python"
    try:
        marker = json.loads(MARKER.read_text())
    except (OSError, ValueError):
        marker = {}
    if python.exists() and marker.get("requirements") == requirements_digest(list(Framework)):
        return Environment(str(python), WORKLOAD_ENV)
    return Environment(sys.executable, CONTROLLER)


def build() -> Path:
    """Build (or rebuild, when the requirement files changed) ``build/workload-env`` offline from
    the wheelhouse; a no-op when it is current. Returns its directory."""
    digest = requirements_digest(list(Framework))
    if local().label == WORKLOAD_ENV:
        return ENV_DIR
    build_wheelhouse()
    shutil.rmtree(ENV_DIR, ignore_errors=True)
    # From the distribution's interpreter, as the images' and the node image's venvs are made
    # (their base is Debian's python3): not the first python3 on PATH, which here was a pyenv build
    # (3.11.7) importing TensorFlow 0.3 s slower than Debian's 3.11.2 with the same packages; and
    # nothing of the controller's virtualenv (Airflow and its dependencies) is on the workload's path.
    base = SYSTEM_PYTHON if Path(SYSTEM_PYTHON).exists() else (shutil.which("python3") or sys.executable)
    subprocess.run([base, "-m", "venv", str(ENV_DIR)], check=True, timeout=600)
    requirements = [arg for framework in Framework for arg in ("-r", str(REQUIREMENTS[framework]))]
    subprocess.run([str(ENV_DIR / "bin" / "pip"), "install", "-q", "--no-index", "--find-links", str(WHEELHOUSE),
                    *requirements], check=True, timeout=3600)
    subprocess.run([str(ENV_DIR / "bin" / "pip"), "check"], check=True, timeout=600)
    # The workload package from this checkout, as the controller's own interpreter finds it (the
    # images copy the same files): a job runs the code of the run that started it.
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = subprocess.run([str(ENV_DIR / "bin" / "python"), "-c", where], check=True, capture_output=True,
                             text=True, timeout=60).stdout.strip()
    (Path(purelib) / "dlbench-workloads.pth").write_text(f"{ROOT / 'include'}\n")
    MARKER.write_text(json.dumps({"requirements": digest, "frameworks": [f.value for f in Framework], "base": base,
                                  "built_at": datetime.now(UTC).isoformat(timespec="seconds")}))
    return ENV_DIR


if __name__ == "__main__":
    print(f"workload environment: {build()} ({local().label})")
