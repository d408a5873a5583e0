"""The warehouse fixtures three tiers share (warehouse, reports, ui): the same test on the embedded
SQLite and on a real PostgreSQL server, a migrated empty warehouse, a real run's documents."""

from __future__ import annotations

import pytest

from dlbench.warehouse import db
from tests.support.pg import postgres_url  # noqa: F401 - fixture
from tests.warehouse.realdocs import real_run_dir


@pytest.fixture(params=["sqlite", "postgresql"])
def warehouse_url(request, tmp_path):
    """The same test on the embedded default and on a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'warehouse.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def engine(warehouse_url):
    """A migrated, empty warehouse; dropped again after the test (the PostgreSQL database is shared)."""
    engine = db.upgrade(db.engine_for(warehouse_url))
    yield engine
    db.downgrade(engine, "base")
    engine.dispose()


@pytest.fixture(scope="session")
def real_documents():
    return real_run_dir()
