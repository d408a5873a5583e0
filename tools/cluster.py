"""A real multi-worker Airflow deployment on this host: ``make airflow-cluster`` (docs/airflow-cluster.md).

What it starts, each process in its own process group, all bound to 127.0.0.1:

* PostgreSQL (a private ``initdb`` under the cluster directory, or ``--database`` an existing
  server): database ``airflow`` (metadata) and ``warehouse`` (dlbench's warehouse, handed to every
  process as ``DLBENCH_WAREHOUSE_URL``);
* Redis, the Celery broker (Debian's ``redis-server``, its own port, no persistence);
* ``airflow api-server`` (simple auth manager, user ``admin`` with a generated password), the
  scheduler and the dag-processor;
* N ``airflow celery worker`` processes (default 2), each with its own ``AIRFLOW_HOME``,
  ``DLBENCH_HOME`` and working directory: nothing local is shared between workers. What tasks
  hand to each other goes through the shared store ``DLBENCH_STORAGE_URL`` (here one common
  ``file://`` directory that stands for the bucket; in production ``s3://...``), run secrets
  and the warehouse.

Each worker reports its own host name (``[core] hostname_callable`` = :func:`hostname`), so the
task instances show which worker ran them although all workers share this host.

:class:`Cluster` is a context manager (the ``tests/cluster`` tier uses it); ``python -m
tools.cluster`` runs one in the foreground until Ctrl-C. Everything started is stopped on exit,
whatever happened (process groups: TERM, then KILL).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from dlbench import paths

HOSTNAME_ENV = "DLBENCH_CLUSTER_HOSTNAME"
REPO = Path(__file__).resolve().parents[1]


def hostname() -> str:
    """``[core] hostname_callable`` of the cluster's processes: the worker's own name (several
    workers on one host must be told apart), else this host's FQDN."""
    return os.environ.get(HOSTNAME_ENV) or socket.getfqdn()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if not initdb:
        raise RuntimeError("PostgreSQL server binaries not found (Debian: apt-get install postgresql), "
                           "or pass --database an existing server's URL")
    return Path(initdb).parent


class Cluster:
    """Start with ``with Cluster(base) as cluster:``; ``cluster.api_url``, ``cluster.password``,
    ``cluster.workers`` (name -> directory), ``cluster.procs`` (name -> Popen)."""

    def __init__(self, base: Path | None = None, workers: int = 2, concurrency: int = 2,
                 database: str | None = None, api_port: int | None = None,
                 extra_env: dict[str, str] | None = None, settings: Path = REPO / "airflow_settings.yaml",
                 queues: list[str] | None = None) -> None:
        self.base = Path(base or tempfile.mkdtemp(prefix="dlbench-cluster-")).resolve()
        self.n_workers = workers
        self.concurrency = concurrency
        self.external_db = database
        self.api_port = api_port or free_port()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        self.extra_env = dict(extra_env or {})
        self.queues = list(queues or [])
        """Celery queues per worker (``"default,near"``; missing or empty: Airflow's default queue):
        a worker next to a cloud serves that cloud's route (``[dlbench] routing``, docs/scaling.md)."""
        self.settings = settings
        self.password = secrets.token_urlsafe(12)
        self.user = "admin"
        self.procs: dict[str, subprocess.Popen] = {}
        self.workers: dict[str, Path] = {}
        self.store = self.base / "shared-store"
        self._pg_data: Path | None = None
        self._pg_root: Path | None = None
        self._pg_prefix: list[str] = []
        self.db_url = ""
        self.warehouse_url = ""
        self.env: dict[str, str] = {}

    # --- infrastructure ---------------------------------------------------------------------

    def _start_postgres(self) -> str:
        bindir = _pg_bin()
        # Its own temporary directory: as root the postgres user must reach it (pytest's and the
        # user's directories may be private).
        root = self._pg_root = Path(tempfile.mkdtemp(prefix="dlbench-cluster-pg-"))
        data, sockdir = root / "data", root / "run"
        sockdir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:  # PostgreSQL refuses root: the Debian package's postgres user runs it
            self._pg_prefix = ["runuser", "-u", "postgres", "--"]
            os.chmod(root, 0o755)
            for path in (root, sockdir):
                shutil.chown(path, "postgres")
        port = free_port()
        self._run([*self._pg_prefix, str(bindir / "initdb"), "-D", str(data), "-U", "dlbench", "--auth=trust",
                   "-E", "UTF8"], "initdb")
        self._pg_data = data
        self._pg_ctl = bindir / "pg_ctl"
        self._run([*self._pg_prefix, str(self._pg_ctl), "-D", str(data), "-l", str(root / "log"), "-w", "-t", "60",
                   "-o", f"-p {port} -k {sockdir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300",
                   "start"], "pg_ctl start")
        return f"postgresql+psycopg2://dlbench@127.0.0.1:{port}/postgres"

    def _create_databases(self, admin_url: str) -> None:
        from sqlalchemy import create_engine, text

        engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        base = admin_url.rsplit("/", 1)[0]
        with engine.connect() as conn:
            for name in ("airflow", "warehouse"):
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
        self.db_url, self.warehouse_url = f"{base}/airflow", f"{base}/warehouse"

    def _start_redis(self) -> str:
        server = shutil.which("redis-server")
        if not server:
            raise RuntimeError("redis-server not found (Debian: apt-get install redis-server)")
        port = free_port()
        (self.base / "redis").mkdir(exist_ok=True)
        self._spawn("redis", [server, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                              "--appendonly", "no", "--dir", str(self.base / "redis")], os.environ.copy(), self.base)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return f"redis://127.0.0.1:{port}/0"
            except OSError:
                pass
            self.check_alive()
            time.sleep(0.2)
        raise RuntimeError("redis-server did not answer within 30 s")

    # --- processes --------------------------------------------------------------------------

    def _run(self, argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{what} failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-3000:]}")

    def _spawn(self, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
        log = open(self.base / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        try:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    cwd=cwd, start_new_session=True)
        finally:
            log.close()
        self.procs[name] = proc
        return proc

    def check_alive(self) -> None:
        """Raise when a process other than a worker exited (workers may be killed on purpose)."""
        for name, proc in self.procs.items():
            if proc.poll() is not None and not name.startswith("worker-"):
                tail = (self.base / "logs" / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with status {proc.returncode}:\n{tail}")

    def common_env(self, broker: str) -> dict[str, str]:
        airflow_bin = str(Path(sys.executable).parent)
        passwords = self.base / "passwords.json"
        passwords.write_text(json.dumps({self.user: self.password}))
        passwords.chmod(0o600)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "DLBENCH_"))},
            "PATH": f"{airflow_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO / "include"), str(REPO), os.environ.get("PYTHONPATH")) if p),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "tools.cluster.hostname",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api_url}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{self.user}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.db_url,
            "AIRFLOW__CELERY__BROKER_URL": broker,
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self.db_url,
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
            "AIRFLOW__API__BASE_URL": self.api_url,
            "DLBENCH_WAREHOUSE_URL": self.warehouse_url,
            "DLBENCH_STORAGE_URL": self.store.as_uri(),
            # The janitor marks a released run's DAG run failed through this deployment's REST API
            # (dlbench.hooks.airflow_api): the same user as the UI, never printed.
            "AIRFLOW_CONN_DLBENCH_AIRFLOW_API": json.dumps({"conn_type": "http", "host": self.api_url,
                                                            "login": self.user, "password": self.password}),
        }
        env.update(self.extra_env)
        return env

    def start(self) -> Cluster:
        (self.base / "logs").mkdir(parents=True, exist_ok=True)
        self.store.mkdir(exist_ok=True)
        try:
            admin = self.external_db or self._start_postgres()
            self._create_databases(admin)
            broker = self._start_redis()
            self.env = self.common_env(broker)
            control = self.base / "control"
            control_env = {**self.env, "AIRFLOW_HOME": str(control / "airflow"),
                           "DLBENCH_HOME": str(control / "dlbench")}
            (control / "airflow").mkdir(parents=True, exist_ok=True)
            airflow = shutil.which("airflow", path=control_env["PATH"]) or "airflow"
            self._run([airflow, "db", "migrate"], "airflow db migrate", control_env)
            self._run([sys.executable, "-m", "dlbench.airflow_settings", str(self.settings), "--overwrite"],
                      "dlbench.airflow_settings", control_env)
            self._spawn("api-server", [airflow, "api-server", "--host", "127.0.0.1", "--port", str(self.api_port)],
                        control_env, control)
            self._spawn("scheduler", [airflow, "scheduler"], control_env, control)
            self._spawn("dag-processor", [airflow, "dag-processor"], control_env, control)
            for i in range(self.n_workers):
                name = f"worker-{chr(ord('a') + i)}"
                home = self.base / name
                (home / "airflow").mkdir(parents=True, exist_ok=True)
                wenv = {**self.env, "AIRFLOW_HOME": str(home / "airflow"), "DLBENCH_HOME": str(home / "dlbench"),
                        HOSTNAME_ENV: name, "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port())}
                queues = self.queues[i] if i < len(self.queues) and self.queues[i] else None
                self._spawn(name, [airflow, "celery", "worker", "--celery-hostname", f"{name}@%h",
                                   "--concurrency", str(self.concurrency),
                                   *(["--queues", queues] if queues else [])], wenv, home)
                self.workers[name] = home
            self._wait_api()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_api(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                with urllib.request.urlopen(f"{self.api_url}/api/v2/monitor/health", timeout=5) as resp:
                    health = json.load(resp)
                if health.get("scheduler", {}).get("status") == "healthy":
                    return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(1)
        raise RuntimeError(f"the api-server or the scheduler was not healthy within {timeout:.0f} s "
                           f"(logs: {self.base / 'logs'})")

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> None:
        """``sig`` to a process's whole group (a worker and the task processes it forked)."""
        proc = self.procs[name]
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        if sig == signal.SIGKILL:
            proc.wait()

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + 20
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs.values():  # the group too: children that outlived their leader
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if proc.poll() is None:
                proc.wait()
        if self._pg_data is not None and (self._pg_data / "postmaster.pid").exists():
            subprocess.run([*self._pg_prefix, str(self._pg_ctl), "-D", str(self._pg_data), "-m", "fast", "stop"],
                           capture_output=True, check=False)
        if self._pg_root is not None:
            shutil.rmtree(self._pg_root, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=paths.home() / "cluster",
                        help="where the cluster keeps everything (default: $DLBENCH_HOME/cluster; emptied first)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2, help="task slots per worker")
    parser.add_argument("--queues", action="append", default=[], metavar="Q1,Q2",
                        help="Celery queues of the next worker (repeat per worker; e.g. --queues default,dc-east "
                             "--queues default); workers without one serve the default queue")
    parser.add_argument("--port", type=int, default=8080, help="api-server port on 127.0.0.1")
    parser.add_argument("--database", default=None,
                        help="SQLAlchemy URL of an existing PostgreSQL server's maintenance database (databases "
                             "airflow and warehouse are created on it); default: a private server under --dir")
    args = parser.parse_args(argv)
    if args.dir.exists():
        shutil.rmtree(args.dir)
    args.dir.mkdir(parents=True)
    cluster = Cluster(args.dir, workers=args.workers, concurrency=args.concurrency, database=args.database,
                      api_port=args.port, queues=args.queues)
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with cluster:
        print(f"Airflow cluster up: {cluster.api_url}  user {cluster.user}  password {cluster.password}")
        served = [*cluster.queues, *[""] * len(cluster.workers)]
        listed = ", ".join(f"{w} (queues {q or 'default'})" for w, q in zip(cluster.workers, served, strict=False))
        print(f"  workers: {listed}; shared store {cluster.store.as_uri()}; "
              f"logs {cluster.base / 'logs'}; Ctrl-C stops everything", flush=True)
        while not stopping:
            for name, proc in cluster.procs.items():
                if proc.poll() is not None:
                    print(f"{name} exited ({proc.returncode}): stopping the cluster", file=sys.stderr)
                    stopping = True
            time.sleep(1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
