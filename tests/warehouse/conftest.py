from __future__ import annotations

import pytest

from tests.conftest import require
from tests.pg import pg_bin, postgres_server


@pytest.fixture(scope="session")
def postgres_url():
    require(pg_bin() is not None, "PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def warehouse_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'warehouse.db'}"
    return request.getfixturevalue("postgres_url")
