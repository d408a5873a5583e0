"""A real ``airflow api-server`` for tests that talk to Airflow's REST API or its auth manager.

One place for what both the explorer's access-control test and the janitor's DAG-run test need:
its own AIRFLOW_HOME on the session's migrated metadata DB (a fresh ``airflow db migrate`` would
add half a minute), the simple auth manager with the given users and generated passwords, a free
127.0.0.1 port, a wait for its health endpoint, and a process-group stop at the end.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.prereqs import ROOT
from tools.cluster import free_port

SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
START_TIMEOUT_S = 240


@dataclass
class RunningApiServer:
    url: str
    passwords: dict[str, str]
    """user -> generated password (the simple auth manager's passwords file)."""
    log: Path


@contextmanager
def api_server(base: Path, airflow_db: Path, users: dict[str, str], *, env: dict[str, str] | None = None,
               drop_env_prefixes: tuple[str, ...] = ("AIRFLOW__",)) -> Iterator[RunningApiServer]:
    """``airflow api-server`` (core apps, one worker) with ``users`` (user -> role) under ``base``;
    ``env`` adds to (or overrides) its environment; variables with ``drop_env_prefixes`` are not
    inherited from the test process."""
    passwords = {user: secrets.token_urlsafe(12) for user in users}
    (base / "passwords.json").write_text(json.dumps(passwords))
    (base / "airflow").mkdir()
    port = free_port()
    full_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(drop_env_prefixes)},
        "AIRFLOW_HOME": str(base / "airflow"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": os.environ.get(
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{airflow_db / 'airflow.db'}"),
        "AIRFLOW__CORE__FERNET_KEY": os.environ["AIRFLOW__CORE__FERNET_KEY"],
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{role}" for u, role in users.items()),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(base / "passwords.json"),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "include"), os.environ.get("PYTHONPATH")) if p),
        **(env or {}),
    }
    log = base / "api-server.log"
    with log.open("ab") as out:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("airflow")), "api-server", "--apps", "core",
                                 "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=full_env,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert proc.poll() is None, f"airflow api-server exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
            try:
                if httpx.get(f"{url}/api/v2/monitor/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, \
                f"airflow api-server not up within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        yield RunningApiServer(url=url, passwords=passwords, log=log)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
