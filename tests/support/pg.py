"""A real PostgreSQL server for the test session: initdb + pg_ctl in a temp dir, loopback only.

PostgreSQL refuses to run as root, so as root the cluster belongs to the ``postgres`` system user
(Debian's package creates it) and commands run through ``runuser``. No ``psql`` is needed:
databases are created through SQLAlchemy.

Any test area can use it::

    from tests.support.pg import postgres_url  # noqa: F401  (in your conftest.py)

    def test_something(postgres_url): ...   # a fresh, empty database on the shared server

One server per pytest process (started on first use, stopped at exit); one database per
fixture instance, so areas do not see each other's tables.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.prereqs import require

PG_BIN_GLOB = "/usr/lib/postgresql/*/bin/initdb"


def pg_bin() -> Path | None:
    """The directory of the newest installed server binaries (Debian layout first, then PATH)."""
    found = sorted(glob.glob(PG_BIN_GLOB), key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield the SQLAlchemy URL of database ``postgres`` on a private server; stop and delete it after."""
    bindir = pg_bin()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries not found (Debian: apt-get install postgresql)")
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    base = Path(tempfile.mkdtemp(prefix="dlbench-pg-"))
    data, sockdir = base / "data", base / "run"
    sockdir.mkdir()
    if as_root:
        shutil.chown(base, "postgres")
        shutil.chown(sockdir, "postgres")
        os.chmod(base, 0o755)
    port = _free_port()

    def run(*cmd: str) -> None:
        proc = subprocess.run([*prefix, *cmd], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            log = (base / "log").read_text()[-2000:] if (base / "log").exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}\n{log}")

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "dlbench", "--auth=trust", "-E", "UTF8")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60", "-o",
            f"-p {port} -k {sockdir} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        yield f"postgresql+psycopg2://dlbench@127.0.0.1:{port}/postgres"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                           capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


_server: dict[str, object] = {}
_names = itertools.count()


def shared_server() -> str:
    """The maintenance-database URL of this process's server, started on first call."""
    if "url" not in _server:
        manager = postgres_server()
        _server["url"] = manager.__enter__()
        atexit.register(manager.__exit__, None, None, None)
    return str(_server["url"])


def create_database(prefix: str = "t") -> str:
    """A new empty database on the shared server; returns its SQLAlchemy URL."""
    from sqlalchemy import create_engine, text

    admin_url = shared_server()
    name = f"{prefix}_{os.getpid()}_{next(_names)}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A fresh database on a real PostgreSQL server private to this test session."""
    require(pg_bin() is not None, "PostgreSQL server binaries (initdb, pg_ctl) are not installed "
                                  "(Debian: apt-get install postgresql)")
    return create_database()
