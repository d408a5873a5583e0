"""Issue 42: dlbench on a production-shaped Airflow stack, as an operator runs it. The compose file
(deploy/compose) starts, from the dlbench Airflow image (the root Dockerfile), the api-server,
scheduler, dag-processor, triggerer and two Celery workers, with PostgreSQL, Redis and the shared
store (a volume); docker-compose 1.29 (Debian 12's package) drives it. The test logs in through
Airflow's auth manager, checks that the image's Airflow lists dlbench's plugin and both DAGs (the
wheel pip-installed into the image's clean virtualenv), triggers ``dlbench_benchmark`` through the
REST API with a small local request, waits for it, reads the report through the explorer's
authenticated route, checks that the workers shared nothing but the store, and takes the stack
down, leaving no container or volume."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.cluster import DAG_ID, Api
from tests.support.prereqs import ROOT, require, wait_for_build
from tools.cluster import free_port
from tools.stack_env import write_env

COMPOSE_FILE = ROOT / "deploy" / "compose" / "docker-compose.yaml"
IMAGES = ("dlbench-airflow:latest", "dlbench-stack-services:latest")
AIRFLOW_SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer", "worker-1", "worker-2")
WORKERS = ("worker-1", "worker-2")
STORE = "/opt/dlbench/store"
CONF = {"provider": "local", "platforms": ["bare_metal"], "suites": ["cpu"], "profile": "smoke", "repetitions": 1}


class Stack:
    """One compose project: its own name, env file (fresh secrets) and port."""

    def __init__(self, workdir: Path) -> None:
        self.project = f"dlbenchtest{int(time.time()) % 100000}"
        self.port = free_port()
        self.env_file = workdir / ".env"
        self.env = write_env(self.env_file, self.port)
        self.url = f"http://127.0.0.1:{self.port}"

    def compose(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        cmd = ["docker-compose", "-p", self.project, "-f", str(COMPOSE_FILE), "--env-file", str(self.env_file), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        return done

    def exec(self, service: str, command: str) -> str:
        return self.compose("exec", "-T", service, "bash", "-c", command).stdout

    def airflow_json(self, service: str, command: str) -> list:
        """An ``airflow ... -o json`` listing: the JSON from its first line that opens one (Airflow's
        CLI may print warnings on stdout before it, graphviz's for ``dags list``)."""
        lines = self.exec(service, f"airflow {command} -o json 2>/dev/null").splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("["))
        return json.loads("\n".join(lines[start:]))

    def container(self, service: str) -> dict:
        cid = self.compose("ps", "-q", service).stdout.strip()
        return json.loads(subprocess.run(["docker", "inspect", cid], capture_output=True, text=True,
                                         check=True).stdout)[0]

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "30", check=False).stdout[-6000:]

    def login(self, timeout: float = 300) -> Api:
        deadline = time.monotonic() + timeout
        while True:
            try:
                return Api(self.url, self.env["DLBENCH_ADMIN_USER"], self.env["DLBENCH_ADMIN_PASSWORD"])
            except httpx.HTTPError as exc:
                if time.monotonic() > deadline:
                    raise AssertionError(f"no login at {self.url} in {timeout:.0f} s ({exc}):\n{self.logs()}") from exc
                time.sleep(2)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    require(subprocess.run(["which", "docker-compose"], capture_output=True).returncode == 0,
            "docker-compose (Debian: apt-get install docker-compose)")
    wait_for_build(ROOT / "build" / "stack-images.lock", "the compose stack's images")
    for image in IMAGES:
        require(subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0,
                f"the image {image} (make stack-images)")
    s = Stack(tmp_path_factory.mktemp("stack"))
    started = time.monotonic()
    try:
        s.compose("up", "-d")
        s.started_s = time.monotonic() - started  # type: ignore[attr-defined]
        yield s
    finally:
        s.compose("down", "-v", "--remove-orphans", check=False)
    label = f"label=com.docker.compose.project={s.project}"
    kinds = (["container", "ls", "-q", "-a"], ["volume", "ls", "-q"])
    left = [subprocess.run(["docker", *kind, "--filter", label], capture_output=True, text=True,
                           check=True).stdout.split() for kind in kinds]
    assert left == [[], []], f"the stack left containers and volumes behind: {left}"


def test_benchmark_on_the_compose_stack(stack):
    started = time.monotonic()
    api = stack.login()
    login_s = time.monotonic() - started
    # Airflow's auth manager refuses a wrong password and an anonymous call to the explorer.
    assert httpx.post(f"{stack.url}/auth/token", json={"username": "admin", "password": "wrong"},
                      timeout=30).status_code == 401
    assert httpx.get(f"{stack.url}/dlbench/api/options", timeout=30).status_code in (401, 403)

    # The image's Airflow: dlbench's plugin through its entry point, both DAGs from the DAG folder
    # `dlbench dags install` wrote, no example DAG.
    plugins = stack.airflow_json("api-server", "plugins")
    assert [p["name"] for p in plugins if p["name"] == "dlbench_reports"], plugins
    api.wait_dag(timeout=300)
    dags = {d["dag_id"] for d in api.get("/api/v2/dags", limit=100)["dags"]}
    assert dags == {DAG_ID, "dlbench_janitor"}, dags
    listed = stack.airflow_json("api-server", "dags list")
    assert {d["dag_id"] for d in listed} == dags, listed
    # airflow-init's `dlbench airflow-settings` made the pools and Variables of airflow_settings.yaml
    pools = {p["name"] for p in api.get("/api/v2/pools")["pools"]}
    assert {"dlbench_benchmark", "dlbench_provision"} <= pools, pools

    run_id = api.trigger(CONF)
    state = api.wait_run(run_id, timeout=420)
    tis = api.task_instances(run_id)
    assert state == "success", ([(t["task_id"], t["map_index"], t["state"], t["hostname"]) for t in tis],
                                stack.logs())
    hosts = {t["hostname"] for t in tis if t["hostname"]}
    assert hosts <= set(WORKERS), hosts

    # The report through the explorer's authenticated route: written by a worker into the store,
    # served by the api-server from it.
    key = re.sub(r"[^A-Za-z0-9._-]", "-", run_id)
    report = api.client.get(f"/dlbench/runs/{key}/report.html")
    assert report.status_code == 200 and "cpu" in report.text, (report.status_code, report.text[:500])
    options = api.get("/dlbench/api/options")
    assert key in {r["run_id"] for r in options["runs"]}, options["runs"]

    # Nothing shared but the store: each worker and the api-server mount one volume, the same one,
    # and nothing of the host; the workers' own disks keep no file of the run (staged copies of its
    # documents and report are dropped once in the store).
    mounts = {}
    for service in ("api-server", *WORKERS):
        found = stack.container(service)["Mounts"]
        assert [(m["Type"], m["Destination"]) for m in found] == [("volume", STORE)], (service, found)
        mounts[service] = found[0]["Name"]
    assert len(set(mounts.values())) == 1, mounts
    for worker in WORKERS:
        local = stack.exec(worker, f"find / -xdev -path {STORE} -prune -o -type f -path '*{key}*' -print 2>/dev/null "
                                   "|| true")  # (an emptied staging directory may stay)
        assert not local.strip(), (worker, local)
    documents = stack.exec("api-server", f"ls {STORE}/results/{key}").split()
    assert "run.info.json" in documents and len(documents) >= 2, documents
    print(f"compose stack: up in {stack.started_s:.0f} s, login {login_s:.0f} s later; run {run_id} "
          f"{time.monotonic() - started - login_s:.0f} s on {sorted(hosts)}")
