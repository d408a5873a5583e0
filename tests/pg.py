"""A real PostgreSQL server for the test session: initdb + pg_ctl in a temp dir, loopback only.

PostgreSQL refuses to run as root, so as root the cluster belongs to the ``postgres`` system user
(Debian's package creates it) and commands run through ``runuser``.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
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
    """Yield a SQLAlchemy URL of a fresh database on a private server; stop and delete it after."""
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
    run = lambda *cmd: subprocess.run([*prefix, *cmd], check=True, capture_output=True, text=True)  # noqa: E731
    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "dlbench", "--auth=trust", "-E", "UTF8")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60", "-o",
            f"-p {port} -k {sockdir} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "dlbench", "warehouse")
        yield f"postgresql+psycopg2://dlbench@127.0.0.1:{port}/warehouse"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                           capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)
