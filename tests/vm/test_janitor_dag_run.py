"""A SIGKILLed run, end to end on this host: what the janitor says about its lease, and its DAG run.

The real benchmark DAG (``make run``'s child: ``dag.test()``) provisions a local QEMU guest and
is SIGKILLed while it does (the guest outlives it: QEMU is daemonized). Airflow's metadata keeps
the DAG run ``running``; nothing else will end it. While the lease is unexpired the janitor keeps
the guest and says only what it knows (unexpired, until when, which run); once it lapsed, the
janitor DAG (``dag.test()``) releases the guest and marks the DAG run failed through a real
``airflow api-server`` (the REST API v2, a user of the simple auth manager who may edit DAG runs,
given as the connection ``dlbench_airflow_api``); asked again, it leaves the finished run as it is.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dlbench.providers.qemu import LocalVMSettings, QemuDriver, sweep_local_vms, vms_dir
from tests.support.airflow_api_server import api_server as running_api_server
from tests.support.prereqs import ROOT

LEASE_S = 30
USER = "janitor"


@dataclass
class ApiServer:
    url: str
    password: str
    log: Path


@pytest.fixture(scope="module")
def api_server(airflow_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """``airflow api-server`` on the session's metadata DB, simple auth manager, one user with the
    ``user`` role (may edit DAG runs, nothing more)."""
    with running_api_server(tmp_path_factory.mktemp("api"), airflow_db, {USER: "user"}) as running:
        yield ApiServer(url=running.url, password=running.passwords[USER], log=running.log)


def _guest_of_a_dag_run() -> dict | None:
    """The tags of a guest made by a DAG run of dlbench_benchmark with a lease, if there is one yet."""
    for state in vms_dir().glob("*/state.json") if vms_dir().is_dir() else []:
        try:
            tags = json.loads(state.read_text()).get("tags") or {}
        except (OSError, ValueError):
            continue
        if tags.get("dlbench_dag_id") == "dlbench_benchmark" and tags.get("dlbench_lease_until"):
            return tags
    return None


def _dag_run(dag_run_id: str) -> tuple[str, str | None]:
    """(state, note) of the benchmark's DAG run in Airflow's metadata."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        run = session.query(DagRun).filter(DagRun.dag_id == "dlbench_benchmark", DagRun.run_id == dag_run_id).one()
        return str(run.state), run.note


def _task_states(dag_run_id: str) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        return {ti.task_id: str(ti.state).rsplit(".", 1)[-1].lower() for ti in session.query(TaskInstance).filter(
            TaskInstance.dag_id == "dlbench_benchmark", TaskInstance.run_id == dag_run_id, TaskInstance.map_index < 0)}


def _sweep_result(result) -> dict:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.query(XComModel).filter(XComModel.dag_id == "dlbench_janitor", XComModel.run_id == result.run_id,
                                              XComModel.task_id == "sweep", XComModel.key == "return_value").one()
    return row.value if isinstance(row.value, dict) else json.loads(row.value)


def test_a_killed_runs_lease_is_reported_truthfully_then_its_dag_run_is_marked_failed(
        vm_image, airflow_db, api_server, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    from dlbench.hooks.airflow_api import AirflowApi, ApiConnection
    from dlbench.providers import janitor

    conf = {"platforms": ["virtual_machine"], "suites": ["cpu"], "data": ["synthetic"], "repetitions": 1,
            "profile": "smoke", "local": {"vm": {"lease_minutes": LEASE_S / 60}}}
    proc = subprocess.Popen([sys.executable, "-m", "dlbench.pipeline.embedded", "--child", "--conf", json.dumps(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "include")})
    driver = QemuDriver(LocalVMSettings())
    try:
        deadline = time.monotonic() + 300
        while (tags := _guest_of_a_dag_run()) is None:
            assert time.monotonic() < deadline and proc.poll() is None, "the run never made its guest"
            time.sleep(0.3)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the run's process and its task: no except, no finally, no teardown
        proc.wait()
    run_id, dag_run_id = tags["dlbench_run_id"], tags["dlbench_dag_run_id"]
    try:
        assert _dag_run(dag_run_id)[0].endswith("running")
        # 1. The lease is unexpired: kept, and the janitor says only what it knows.
        _, kept = sweep_local_vms(lambda _tags: True, dry_run=True)
        reason = {k["run_id"]: k["reason"] for k in kept}[run_id]
        lease = max(datetime.fromisoformat(json.loads(p.read_text())["tags"]["dlbench_lease_until"])
                    for p in vms_dir().glob("*/state.json") if run_id in p.read_text())
        assert reason.startswith(f"lease of run {run_id} unexpired until {lease.isoformat()}"), reason
        assert "live task of the run" not in reason and "held" not in reason, reason

        # 2. Lapsed: the janitor DAG releases the guest and marks the DAG run failed through the REST API.
        time.sleep(max(0.0, (lease - datetime.now(UTC)).total_seconds()) + 1)
        monkeypatch.setenv("AIRFLOW_CONN_DLBENCH_AIRFLOW_API", json.dumps(
            {"conn_type": "http", "host": api_server.url, "login": USER, "password": api_server.password}))
        dag = DagBag(dag_folder=str(ROOT / "dags" / "dlbench_janitor.py")).dags["dlbench_janitor"]
        result = dag.test(run_conf={"clouds": [], "docker": False})
        assert str(result.state).endswith("success"), api_server.log.read_text()[-3000:]
        assert run_id not in driver.find()
        state, note = _dag_run(dag_run_id)
        assert state.endswith("failed"), (state, api_server.log.read_text()[-3000:])
        assert note and run_id in note and "lease lapsed" in note, note
        tasks = _task_states(dag_run_id)
        assert tasks["provision"] == "failed", tasks  # killed while it ran
        assert tasks["release"] == "skipped", tasks  # the teardown's work was the janitor's
        assert all(s in ("success", "failed", "skipped", "upstream_failed") for s in tasks.values()), tasks
        (closed,) = [d for d in _sweep_result(result)["dag_runs"] if d["dag_run_id"] == dag_run_id]
        assert closed["outcome"] == "marked failed" and closed["detail"].startswith("was running, now failed"), closed

        # 3. Already finished: a no-op, with its reason.
        api = AirflowApi(ApiConnection(url=api_server.url, login=USER, password=api_server.password))
        again = janitor.close_run("dlbench_benchmark", dag_run_id, run_id, "test", api.dag_run_state, api)
        assert again["outcome"] == janitor.DagRunOutcome.FINISHED and again["detail"].startswith("already failed")
        assert _dag_run(dag_run_id) == (state, note)
    finally:
        left = driver.find().get(run_id, [])
        if left:
            from dlbench.polling import Deadline

            driver.delete(left, Deadline(60, "cleanup"))
