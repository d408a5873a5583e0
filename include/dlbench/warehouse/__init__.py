"""Warehouse: SQLAlchemy 2 schema, Alembic migrations, idempotent loads."""
