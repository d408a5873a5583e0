"""Alembic environment: runs on the engine handed over by dlbench.warehouse.db (no alembic.ini)."""

from __future__ import annotations

from alembic import context

from dlbench.warehouse.models import Base

config = context.config
engine = config.attributes["engine"]

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite needs batch ALTERs
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
