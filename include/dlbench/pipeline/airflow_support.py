"""The little that needs Airflow at run time: the warehouse URL (logged), failure bookkeeping.

Imported only inside tasks, never by the workloads or at DAG parse time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dlbench.hooks import warehouse as warehouse_hook
from dlbench.warehouse.db import describe_url


def warehouse_url() -> str | None:
    """The warehouse URL by :func:`dlbench.hooks.warehouse.warehouse_location`'s precedence, logged with
    its source (password hidden) so nobody wonders which warehouse a load wrote to."""
    url, source = warehouse_hook.warehouse_location()
    logging.getLogger(__name__).info("warehouse: %s (from %s)", describe_url(url), source)
    return url


def is_scheduled(dag_run: Any) -> bool:
    """Whether the scheduler created this DAG run (run_type ``scheduled``; a str enum or its repr)."""
    return str(getattr(dag_run, "run_type", "")).lower().endswith("scheduled")


# --- failures that name their cause ------------------------------------------------------------

FAILURE_KEY = "dlbench_failure"
"""XCom key under which a failing step records what went wrong, for the tasks after it."""
STEP_ORDER = ("validate_request", "plan", "run_tags", "provision", "release", "load", "report", "regressions",
              "gates")
"""Steps in the order they run: the first recorded failure is the cause the run reports. Every step
that asks for the failures before it (``first_failure(ti, upto=<step>)``) is in it: a refused
request made the gates task crash on ``tuple.index`` beside the real cause (issue 38)."""


def record_failure(ti: Any, exc: BaseException) -> None:
    """Push ``{"task", "error"}`` before the task fails, so later tasks can say why they did not
    run and the final task repeats the first failure (not a later symptom)."""
    message = str(exc).strip() or type(exc).__name__
    try:
        ti.xcom_push(key=FAILURE_KEY, value={"task": ti.task_id, "error": f"{type(exc).__name__}: {message}"[:4000]})
    except Exception:  # noqa: BLE001 - never hide the original failure behind a bookkeeping error
        pass


@contextmanager
def failures_recorded(ti: Any) -> Iterator[None]:
    """Record any failure of the block (skips are not failures) and re-raise it."""
    try:
        yield
    except BaseException as exc:
        if type(exc).__name__ not in ("AirflowSkipException", "TaskDeferred"):
            record_failure(ti, exc)
        raise


def first_failure(ti: Any, upto: str | None = None) -> dict[str, str] | None:
    """The first recorded failure among the steps before ``upto`` (all steps when None)."""
    steps = STEP_ORDER if upto is None else STEP_ORDER[:STEP_ORDER.index(upto)]
    for task_id in steps:
        try:
            found = ti.xcom_pull(task_ids=task_id, key=FAILURE_KEY)
        except Exception:  # noqa: BLE001 - a task that never ran has nothing to say
            found = None
        if isinstance(found, list):
            found = next((f for f in found if f), None)
        if found:
            return dict(found)
    return None


def not_run_because(failure: dict[str, str] | None, what: str) -> str:
    if failure:
        return f"{what} not run because {failure['task']} failed: {failure['error']}"
    return f"{what} not run because an earlier task failed (see the run's failed tasks)"
