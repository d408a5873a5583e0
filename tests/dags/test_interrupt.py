"""`make run` interrupted (Ctrl-C): the run stops, everything it holds is released, exit 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.prereqs import ROOT


def start_embedded(conf: dict) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "include")}
    return subprocess.Popen([sys.executable, "-m", "dlbench.pipeline.embedded", "--conf", json.dumps(conf)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def wait_for(check, timeout: float, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _our_run_ids() -> dict[str, object]:
    """This test session's benchmark runs (its own Airflow DB), by the run id as labels carry it:
    other pytest streams run containers of their own runs on the same engine."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        return {r.run_id.replace(":", "-").replace("+", "-"): r.state
                for r in session.query(DagRun).filter(DagRun.dag_id == "dlbench_benchmark").all()}


def test_ctrl_c_during_a_container_job_releases_and_exits_130(airflow_db, docker_client, workload_image):
    conf = {"profile": "smoke", "platforms": ["container_on_bare_metal"], "suites": ["tf_cnn"],
            "models": ["inception3"], "data": ["synthetic"], "repetitions": 3}
    before = set(_our_run_ids())
    proc = start_embedded(conf)
    ours = {"label": ["dlbench=1"]}

    def our_containers() -> list:
        runs = set(_our_run_ids()) - before
        return [c for c in docker_client.containers.list(filters=ours)
                if Path(c.labels.get("dlbench.run_id", "")).name in runs]

    try:
        wait_for(our_containers, 300, "a workload container of this test's run")
        run_ids = {c.labels["dlbench.run_id"] for c in our_containers()}
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out[-3000:]
    assert time.monotonic() - started < 60
    assert "released everything tagged with it" in out, out[-3000:]
    for run_id in run_ids:  # the interrupted run's containers are gone
        assert not docker_client.containers.list(all=True, filters={"label": [f"dlbench.run_id={run_id}"]})
    assert len(run_ids) == 1
    state = _our_run_ids()[Path(next(iter(run_ids))).name]
    assert str(state).endswith("failed")
