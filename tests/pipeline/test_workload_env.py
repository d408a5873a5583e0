"""The host's workload environment (issue 39, item 8): this host's bare-metal jobs run in
``build/workload-env`` (every framework's requirement files, offline from the wheelhouse, as the
images and the node image install them), not in the controller's virtualenv, and each job's
document says which environment it ran in."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from dlbench.execution import workload_env
from dlbench.execution.local import LocalProcessExecutor
from dlbench.execution.targets import LocalProcess, Target
from dlbench.jobs import Job
from dlbench.workloads.result import Status
from tests.support.prereqs import require


def _built() -> None:
    require(workload_env.local().label == workload_env.WORKLOAD_ENV,
            f"no current {workload_env.ENV_DIR} (make workload-env)")


def test_a_local_bare_metal_job_runs_in_the_workload_environment_and_says_so(tmp_path):
    _built()
    job = Job(job_id="w" * 24, run_id="envtest", platform="bare_metal", suite="cpu", command="cpu", profile="smoke")
    doc = LocalProcessExecutor().execute(job, Target(name="h", platform="bare_metal", access=LocalProcess()),
                                         tmp_path / "doc.json", 600)
    assert doc.status is Status.OK, doc.error
    assert doc.labels[workload_env.LABEL] == workload_env.WORKLOAD_ENV
    given = LocalProcessExecutor(python=str(workload_env.ENV_DIR / "bin" / "python"))
    # a target's own interpreter is named as given
    assert given.given is not None and given.given.label.startswith("given ")


def test_the_workload_environment_is_lean_and_has_every_framework():
    """What made the controller's environment unlike the container's: Airflow (and its import
    cost) beside TensorFlow. The workload environment has the frameworks and not Airflow."""
    _built()
    python = str(workload_env.ENV_DIR / "bin" / "python")
    probe = ("import importlib.util, json; print(json.dumps({m: importlib.util.find_spec(m) is not None "
             "for m in ('tensorflow', 'torch', 'jax', 'airflow', 'dlbench.workloads')}))")
    found = json.loads(subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True,
                                      timeout=120).stdout)
    assert found == {"tensorflow": True, "torch": True, "jax": True, "airflow": False, "dlbench.workloads": True}


def test_a_stale_or_missing_environment_falls_back_to_the_controller_labelled(tmp_path, monkeypatch):
    """Built from other requirement files (its marker's digest differs) or not built: the jobs run
    in the controller's interpreter, and their documents say ``controller``, never silently."""
    env = tmp_path / "workload-env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(Path(workload_env.sys.executable))
    monkeypatch.setattr(workload_env, "TRAINING", workload_env.Venv(env, workload_env.TRAINING_FRAMEWORKS,
                                                                    workload_env.WORKLOAD_ENV))
    assert workload_env.local() == workload_env.Environment(workload_env.sys.executable, workload_env.CONTROLLER)
    (env / "dlbench-env.json").write_text(json.dumps({"requirements": "0" * 16}))
    assert workload_env.local().label == workload_env.CONTROLLER
    current = workload_env.requirements_digest(list(workload_env.TRAINING_FRAMEWORKS))
    (env / "dlbench-env.json").write_text(json.dumps({"requirements": current}))
    assert workload_env.local() == workload_env.Environment(str(env / "bin" / "python"), workload_env.WORKLOAD_ENV)
