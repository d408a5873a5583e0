"""Engines and migrations: SQLite by default, any SQLAlchemy URL (PostgreSQL) in production."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url

from dlbench import settings

MIGRATIONS = Path(__file__).with_name("migrations")
URL_ENV = settings.WAREHOUSE_URL.env


def default_url() -> str:
    """$DLBENCH_WAREHOUSE_URL, else the embedded SQLite file (:func:`dlbench.settings.warehouse_url`)."""
    return settings.warehouse_url()


def describe_url(url: str | None) -> str:
    """The URL with its password hidden (what logs and messages may show)."""
    return make_url(url or default_url()).render_as_string(hide_password=True)


def engine_for(url: str | None = None) -> Engine:
    """An engine for ``url`` (default: $DLBENCH_WAREHOUSE_URL, else the embedded SQLite file)."""
    url = url or default_url()
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, future=True, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:  # a DB-API connection: untyped
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")  # cascades as on PostgreSQL
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()
            # pysqlite's own transaction handling ignores SAVEPOINTs (a released savepoint would
            # commit half a batch): let SQLAlchemy emit BEGIN itself, as its docs recommend.
            dbapi_conn.isolation_level = None

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN")
    return engine


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine | str | None = None, revision: str = "head") -> Engine:
    """Migrate the warehouse to ``revision`` (idempotent; safe before every load)."""
    engine = engine if isinstance(engine, Engine) else engine_for(engine)
    command.upgrade(alembic_config(engine), revision)
    return engine


def downgrade(engine: Engine, revision: str = "base") -> None:
    command.downgrade(alembic_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    """The newest migration shipped with this build."""
    head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
    assert head is not None, "no migrations shipped"
    return head
