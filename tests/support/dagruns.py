"""A DAG run's outcome as a test reads it: each task instance's state and the failures the run's
steps recorded (``airflow_support.failures_recorded``), so a failed run's assertion says why it
failed (the check task repeats the first failure; a failed job's document is named there) instead
of only which tasks failed."""

from __future__ import annotations

import json
from typing import Any


def task_states(run: Any) -> dict[tuple[str, int], str]:
    """(task id, map index) -> state, for every task instance of the run."""
    return {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}


def recorded_failures(run: Any) -> dict[str, Any]:
    """Task id -> the failure it recorded (a mapped task's: the list of its instances')."""
    # heavy: Airflow's ORM; these helpers run only in DAG tests
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from dlbench.pipeline.airflow_support import FAILURE_KEY

    with create_session() as session:
        rows = session.query(XComModel).filter(XComModel.dag_id == run.dag_id, XComModel.run_id == run.run_id,
                                               XComModel.key == FAILURE_KEY).all()
        return {row.task_id: row.value if isinstance(row.value, dict | list) else json.loads(row.value)
                for row in rows}


def assert_succeeded(run: Any) -> dict[tuple[str, int], str]:
    """The run's task states, once it is known to have succeeded; otherwise an AssertionError naming
    the tasks that did not succeed and what each recorded."""
    states = task_states(run)
    if not str(run.state).endswith("success"):
        unsuccessful = {k: v for k, v in states.items() if not v.endswith("success")}
        raise AssertionError(f"DAG run {run.run_id} ended {run.state}; tasks not successful: {unsuccessful}; "
                             f"failures recorded: {recorded_failures(run)}")
    return states
