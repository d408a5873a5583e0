"""The warehouse's location: the Airflow connection ``dlbench_warehouse`` (Airflow's provider
convention: a connection is read by a hook), under the one documented precedence
(:func:`warehouse_location`). ``dlbench.settings`` declares the setting and reads the environment
override; Airflow is imported only when the connection is consulted (the CLI runs without it)."""

from __future__ import annotations

from pathlib import Path

from dlbench import settings


def url_from_connection(conn_type: str | None, host: str | None, login: str | None, password: str | None,
                        port: int | None, schema: str | None, extra: dict | None) -> str:
    """SQLAlchemy URL for the warehouse's Airflow connection (postgres or sqlite; ``extra.url`` wins)."""
    from sqlalchemy.engine import URL  # why: only this conversion needs SQLAlchemy

    if extra and extra.get("url"):
        return str(extra["url"])
    if conn_type == "sqlite":
        path = Path(host or "warehouse.db")
        if not path.is_absolute():
            path = settings.home() / path
        return f"sqlite:///{path}"
    if conn_type in ("postgres", "postgresql"):
        return URL.create("postgresql+psycopg2", username=login or None, password=password or None,
                          host=host or None, port=port or None, database=schema or None).render_as_string(
                              hide_password=False)
    raise ValueError(f"connection {settings.WAREHOUSE_CONNECTION}: conn_type {conn_type!r} unsupported; "
                     "allowed: postgres, sqlite")


def warehouse_location() -> tuple[str | None, str]:
    """(URL or None for the embedded default, where it came from). The one documented precedence:

    1. ``DLBENCH_WAREHOUSE_URL`` (environment): an explicit override for this process/worker;
    2. the Airflow connection ``dlbench_warehouse``;
    3. the embedded SQLite file ``$DLBENCH_HOME/warehouse.db``.

    Raises ImportError where Airflow is not installed and the environment variable is unset.
    """
    url = settings.warehouse_url_override()
    if url:
        return url, f"environment variable {settings.WAREHOUSE_URL.env}"
    from airflow.sdk import BaseHook  # why: tasks and the UI plugin only; the CLI runs without Airflow

    try:
        conn = BaseHook.get_connection(settings.WAREHOUSE_CONNECTION)
    except Exception:  # noqa: BLE001 - not defined: the embedded default applies
        return None, (f"embedded default (no {settings.WAREHOUSE_URL.env}, "
                      f"no {settings.WAREHOUSE_CONNECTION} connection)")
    return (url_from_connection(conn.conn_type, conn.host, conn.login, conn.password, conn.port, conn.schema,
                                conn.extra_dejson), f"Airflow connection {settings.WAREHOUSE_CONNECTION}")
