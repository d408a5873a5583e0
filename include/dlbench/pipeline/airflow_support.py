"""The little that needs Airflow at run time: the warehouse connection, failure bookkeeping.

Imported only inside tasks, never by the workloads or at DAG parse time.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dlbench import paths

WAREHOUSE_CONN_ID = "dlbench_warehouse"


def url_from_connection(conn_type: str, host: str | None, login: str | None, password: str | None,
                        port: int | None, schema: str | None, extra: dict | None) -> str:
    """SQLAlchemy URL for an Airflow connection (postgres or sqlite; ``extra.url`` wins)."""
    from sqlalchemy.engine import URL

    if extra and extra.get("url"):
        return str(extra["url"])
    if conn_type == "sqlite":
        path = Path(host or "warehouse.db")
        if not path.is_absolute():
            path = paths.home() / path
        return f"sqlite:///{path}"
    if conn_type in ("postgres", "postgresql"):
        return URL.create("postgresql+psycopg2", username=login or None, password=password or None,
                          host=host or None, port=port or None, database=schema or None).render_as_string(
                              hide_password=False)
    raise ValueError(f"connection {WAREHOUSE_CONN_ID}: conn_type {conn_type!r} unsupported; allowed: postgres, sqlite")


def warehouse_location() -> tuple[str | None, str]:
    """(URL or None for the embedded default, where it came from). The one documented precedence:

    1. ``DLBENCH_WAREHOUSE_URL`` (environment): an explicit override for this process/worker;
    2. the Airflow connection ``dlbench_warehouse``;
    3. the embedded SQLite file ``$DLBENCH_HOME/warehouse.db``.
    """
    import os

    from dlbench.warehouse.db import URL_ENV

    if os.environ.get(URL_ENV):
        return os.environ[URL_ENV], f"environment variable {URL_ENV}"
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(WAREHOUSE_CONN_ID)
    except Exception:  # noqa: BLE001 - not defined: the embedded default applies
        return None, "embedded default (no DLBENCH_WAREHOUSE_URL, no dlbench_warehouse connection)"
    return (url_from_connection(conn.conn_type, conn.host, conn.login, conn.password, conn.port, conn.schema,
                                conn.extra_dejson), f"Airflow connection {WAREHOUSE_CONN_ID}")


def warehouse_url() -> str | None:
    """The warehouse URL by :func:`warehouse_location`'s precedence, logged with its source
    (password hidden) so nobody wonders which warehouse a load wrote to."""
    import logging

    from dlbench.warehouse.db import describe_url

    url, source = warehouse_location()
    logging.getLogger(__name__).info("warehouse: %s (from %s)", describe_url(url), source)
    return url


def is_scheduled(dag_run: Any) -> bool:
    """Whether the scheduler created this DAG run (run_type ``scheduled``; a str enum or its repr)."""
    return str(getattr(dag_run, "run_type", "")).lower().endswith("scheduled")


# --- failures that name their cause ------------------------------------------------------------

FAILURE_KEY = "dlbench_failure"
"""XCom key under which a failing step records what went wrong, for the tasks after it."""
STEP_ORDER = ("validate_request", "plan", "run_tags", "provision", "release", "load", "report")
"""Steps in the order they run: the first recorded failure is the cause the run reports."""


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
