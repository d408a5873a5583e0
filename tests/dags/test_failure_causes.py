"""Failures name their cause (dag.test()): when a step fails, the tasks after it are skipped
saying which task failed and why, and the final task repeats the FIRST failure, not a symptom."""

from __future__ import annotations

import pytest

from tests.support.dagruns import recorded_failures, task_states
from tests.support.prereqs import ROOT


@pytest.fixture
def dag(airflow_db):
    """A fresh DAG object per test: dag.test() in one process keeps a run's conf in the DAG's params."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py")).dags["dlbench_benchmark"]


def run(dag, conf: dict) -> tuple[object, dict[str, str], dict[str, object]]:
    result = dag.test(run_conf=conf)
    states = {task: state for (task, index), state in task_states(result).items() if index < 0}
    return result, states, recorded_failures(result)


def test_validation_failure_is_the_cause_every_later_task_names(dag, capfd):
    """A refused request (issue 38, item 3): every task after it handles that outcome. Those that
    need its output never start (upstream failed); those that run whatever happened before them
    skip saying the validation failed and why, and the final task fails repeating it."""
    result, states, failures = run(dag, {"provider": "ironic", "ironic": {"cloud": "no-such-cloud"},
                                         "platforms": ["bare_metal"], "suites": ["cpu"]})
    out = capfd.readouterr()
    log = out.out + out.err
    assert not str(result.state).endswith("success")
    for task in ("plan", "run_tags", "provision", "release"):
        assert states[task].endswith(("upstream_failed", "skipped")), (task, states)
    for task in ("load", "report", "regressions", "gates"):
        assert states[task].endswith("skipped"), (task, states)
        said = f"{task} not run because validate_request failed:"
        message = next((line for line in log.splitlines() if said in line), None)
        assert message is not None and "unknown cloud 'no-such-cloud'" in message, (task, log[-3000:])
    assert "tuple.index" not in log  # no crash beside the cause (the gates task's, before issue 38)
    assert states["validate_request"].endswith("failed"), states
    assert states["load"].endswith("skipped") and states["report"].endswith("skipped"), states
    assert states["gates"].endswith("skipped"), states  # not a crash beside the cause (issue 38)
    assert states["check"].endswith("failed"), states
    assert "unknown cloud 'no-such-cloud'" in failures["validate_request"]["error"]
    # The final task repeats the first failure, naming the task (not "the load or the report failed").
    assert failures["check"]["error"].startswith("RuntimeError: validate_request failed:"), failures["check"]
    assert "unknown cloud 'no-such-cloud'" in failures["check"]["error"]


def test_every_job_failing_is_reported_with_the_first_failure(dag):
    result, states, failures = run(dag, {"platforms": ["bare_metal"], "suites": ["tf_cnn"], "models": ["alexnet"],
                                         "data": ["real"], "repetitions": 2, "data_dir": "/nonexistent/imagenet"})
    assert not str(result.state).endswith("success")
    assert states["load"].endswith("success") and states["report"].endswith("success"), states
    error = failures["check"]["error"]
    assert "2 of 2 jobs failed" in error and "no TFRecord files" in error, error


def test_load_failure_is_named_by_the_report_and_the_final_task(dag, monkeypatch):
    # The warehouse connection points at a port where nothing listens (loopback only).
    monkeypatch.setenv("AIRFLOW_CONN_DLBENCH_WAREHOUSE", "postgres://dlbench:x@127.0.0.1:1/dlbench")
    result, states, failures = run(dag, {"platforms": ["bare_metal"], "suites": ["cpu"], "repetitions": 1})
    assert states["load"].endswith("failed") and states["report"].endswith("skipped"), states
    assert failures["check"]["error"].startswith("RuntimeError: load failed:"), failures["check"]
    assert "127.0.0.1" in failures["check"]["error"] or "connect" in failures["check"]["error"].lower()


def test_provisioning_failure_is_named_by_the_report_not_a_missing_run(dag, monkeypatch, tmp_path, capfd):
    """A real provisioning failure: the demo data set cannot be made on this worker (its directory
    is a file), so the setup task fails before any job runs. Nothing reaches the warehouse; the
    report task is skipped naming the provisioning error (as after a failed validation or load),
    never failing with the symptom ``run_id ... is not in the warehouse``."""
    from dlbench import paths

    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path))
    paths.datasets_dir().write_text("not a directory: the data set cannot be generated here\n")
    result, states, failures = run(dag, {"platforms": ["bare_metal"], "suites": ["tf_cnn"], "models": ["alexnet"],
                                         "data": ["real"], "repetitions": 1})
    out = capfd.readouterr()
    assert not str(result.state).endswith("success")
    assert states["provision"].endswith("failed"), states
    assert states["load"].endswith("success") and states["report"].endswith("skipped"), states
    cause = failures["provision"]["error"]
    assert "datasets" in cause, cause
    assert "report" not in failures, failures  # skipped, not failed: nothing recorded as a failure
    # The task's own words (Airflow logs an AirflowSkipException's message as the skip reason).
    said = [line for line in (out.out + out.err).splitlines() if "Skipping task" in line and "report not run" in line]
    assert said, (out.out + out.err)[-4000:]
    assert "report not run because provision failed: " in said[-1], said
    assert cause.split(":")[0] in said[-1] and "not in the warehouse" not in said[-1], said
    assert failures["check"]["error"].startswith("RuntimeError: provision failed:"), failures["check"]
