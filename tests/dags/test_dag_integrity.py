"""Every DAG file imports cleanly into a real DagBag, is tagged, retries deliberately, parses light."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from dlbench import settings
from tests.support.prereqs import ROOT

HEAVY = ("tensorflow", "pandas", "openstack", "docker", "matplotlib", "paramiko")


@pytest.fixture(scope="module")
def dagbag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    start = time.perf_counter()
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    print(f"\nDagBag parse of {len(bag.dags)} DAGs: {time.perf_counter() - start:.2f} s")
    return bag


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert "dlbench_benchmark" in dagbag.dags


def test_dags_are_tagged_and_retries_are_deliberate(dagbag):
    for dag_id, dag in dagbag.dags.items():
        assert "dlbench" in dag.tags, dag_id
        for task in dag.tasks:
            assert task.execution_timeout is not None, f"{dag_id}.{task.task_id} has no execution_timeout"
            assert task.retries is not None, f"{dag_id}.{task.task_id}"


def test_main_dag_shape(dagbag):
    dag = dagbag.dags["dlbench_benchmark"]
    tasks = {t.task_id: t for t in dag.tasks}
    assert tasks["provision"].is_setup and tasks["release"].is_teardown
    assert tasks["run_job"].pool == "dlbench_benchmark"
    assert tasks["run_job"].retries == 1
    # the retry delay is the setting's (the suite's 1 s: tests/conftest.py)
    assert tasks["run_job"].retry_delay == tasks["load"].retry_delay == settings.retry_delay()
    assert tasks["validate_request"].retries == 0
    assert {"platforms", "models", "data", "profile", "repetitions", "provider"} <= set(dag.params.keys())
    assert dag.params.get_param("models").schema["items"]["enum"] == ["inception3", "resnet50", "alexnet"]


@pytest.mark.parametrize("dag_file", sorted(p.name for p in (ROOT / "dags").glob("*.py")))
def test_dag_file_imports_nothing_heavy(dag_file):
    """Parse time is dominated by imports: a DAG file must not pull TensorFlow, pandas, openstacksdk..."""
    code = (
        "import sys, time; sys.path.insert(0, 'dags'); t = time.perf_counter(); "
        f"import {dag_file[:-3]}; dt = time.perf_counter() - t; "
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}); "
        "print(f'{dt:.2f}s', heavy); sys.exit(1 if heavy else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    print(dag_file, proc.stdout.strip())
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
