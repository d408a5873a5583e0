"""The little that needs Airflow at run time: resolving the warehouse connection.

Imported only inside tasks, never by the workloads or at DAG parse time.
"""

from __future__ import annotations

from pathlib import Path

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


def warehouse_url() -> str | None:
    """The URL of the ``dlbench_warehouse`` connection, or None for the embedded SQLite default."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(WAREHOUSE_CONN_ID)
    except Exception:  # noqa: BLE001 - not defined: the embedded default applies
        return None
    return url_from_connection(conn.conn_type, conn.host, conn.login, conn.password, conn.port, conn.schema,
                               conn.extra_dejson)
