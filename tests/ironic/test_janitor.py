"""The janitor DAG (dag.test(), real Airflow metadata) against the devcloud: a provisioning
process killed with SIGKILL mid-deploy leaves tagged nodes that the janitor releases; live runs
and untagged resources are never touched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dlbench.providers.base import Tags
from tests.ironic.test_provisioner import Prov
from tests.support.ironic import CLOUD, CLOUDS_FILE, RESOURCE_CLASS, assert_no_leaks, settings
from tests.support.prereqs import ROOT

KILLED_RUN = """
import json, sys
from dlbench.providers.registry import driver_for
from dlbench.providers.ironic import IronicSettings
from dlbench.providers.base import BootConfig, Demand, Tags
from dlbench.polling import Deadline
from datetime import datetime
s = IronicSettings.model_validate_json(sys.argv[1])
tags = Tags(run_id=sys.argv[2], dag_id="dlbench_benchmark", dag_run_id="manual__never-existed",
            expires_at=datetime.fromisoformat(sys.argv[3]))
driver_for(s).create(Demand("bm", "bare_metal", 2), tags, BootConfig(public_key=""), Deadline(120, "create"))
print("created", flush=True)
import time; time.sleep(600)
"""


def janitor_dag():
    from airflow.models.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "dlbench_janitor.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.get_dag("dlbench_janitor")


def test_janitor_releases_a_killed_runs_nodes_and_nothing_else(clean_cloud, run_id, airflow_db):
    conn = clean_cloud
    # 1. A provisioning process dies with SIGKILL mid-deploy (no except, no finally, no teardown).
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    proc = subprocess.Popen([sys.executable, "-c", KILLED_RUN, settings().model_dump_json(), run_id, future],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "include")})
    try:
        line = proc.stdout.readline()
        assert line.strip() == "created", line
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    prov = Prov(conn)
    assert len(prov.owned(run_id)[run_id]) == 2

    # 2. A live run without a DAG run (expiry only, not expired) and a foreign allocation.
    live = prov.create(1, Tags(run_id=f"{run_id}live", expires_at=datetime.now(UTC) + timedelta(hours=1)))
    foreign = conn.baremetal.create_allocation(name=f"foreign-{run_id}", resource_class=RESOURCE_CLASS,
                                               extra={"owner": "not-dlbench"})
    try:
        dag = janitor_dag()
        conf = {"clouds": [{"name": "ironic", "cloud": CLOUD, "clouds_file": CLOUDS_FILE, "poll_interval": 0.2}],
                "docker": False}
        dry = dag.test(run_conf={**conf, "dry_run": True})
        assert dry.state == "success"
        assert len(prov.owned(run_id)[run_id]) == 2  # dry run touched nothing

        result = dag.test(run_conf={**conf, "dry_run": False})
        assert result.state == "success"
        assert run_id not in prov.owned()                           # the killed run's nodes: released
        assert f"{run_id}live" in prov.owned()                      # the live run: untouched
        deadline = time.monotonic() + 30
        while conn.baremetal.get_allocation(foreign.id).state == "allocating" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert conn.baremetal.get_allocation(foreign.id).id == foreign.id  # foreign: untouched
    finally:
        conn.baremetal.delete_allocation(foreign.id, ignore_missing=True)
        prov.wait(live, timeout=120)
        prov.delete(live, timeout=120)
    assert_no_leaks(conn)


def test_janitor_dag_parses_without_openstacksdk():
    code = ("import sys, runpy; runpy.run_path(sys.argv[1]); "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('openstack', 'paramiko')))))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code, str(ROOT / "dags" / "dlbench_janitor.py")],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "include")})
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _embedded(conf: dict) -> subprocess.Popen:
    """A run driven as ``make run`` drives it (dag.test() in this process's image), output dropped."""
    return subprocess.Popen([sys.executable, "-m", "dlbench.pipeline.embedded", "--conf", json.dumps(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "include")})


def _signal_tree(proc: subprocess.Popen, sig: signal.Signals) -> None:
    """``sig`` to the run's process and to the process group of each child: ``make run``'s
    supervisor runs the DAG in a child of its own session (pipeline/embedded.py), so a signal to
    the supervisor alone reaches nothing of the run (the CI of stop 45 froze only the supervisor:
    every release it meant to catch went on to its end)."""
    for pid in [*_children(proc.pid), proc.pid]:
        try:
            os.killpg(pid, sig) if pid != proc.pid else os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the run's process and its children (no except, no finally, no teardown)."""
    _signal_tree(proc, signal.SIGKILL)
    proc.wait()


def _run_conf(lease_s: float, **more: object) -> dict:
    from tests.support.ironic import node_image

    ironic = settings(nodes={"bare_metal": 1}, image_source=node_image(), lease_minutes=lease_s / 60)
    return {"provider": "ironic", "platforms": ["bare_metal"], "suites": ["tf_cnn"], "data": ["synthetic"],
            "profile": "smoke", "ironic": ironic.model_dump(exclude={"name"}), **more}


def secret_variables(run_id: str) -> list[str]:
    """The run's secret Variables left in the Airflow metadata DB (the janitor DAG deletes a killed
    run's key: its task has the Airflow secrets backend)."""
    from airflow.models import Variable
    from airflow.utils.session import create_session

    from dlbench.providers.run_secrets import PREFIX

    prefix = f"{PREFIX}{run_id}__"
    with create_session() as session:
        return [k for (k,) in session.query(Variable.key).filter(Variable.key.like(f"{prefix}%")).all()]


def _sweep_report(dag, conf: dict) -> dict:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    result = dag.test(run_conf=conf)
    assert str(result.state).endswith("success")
    with create_session() as session:
        row = session.query(XComModel).filter(XComModel.dag_id == "dlbench_janitor", XComModel.run_id == result.run_id,
                                              XComModel.task_id == "sweep", XComModel.key == "return_value").one()
    return row.value if isinstance(row.value, dict) else json.loads(row.value)


def test_a_sigkilled_make_run_is_released_once_its_lease_lapses(clean_cloud, airflow_db):
    """The process driving a run (make run / dag.test()) is SIGKILLed mid-run: no scheduler will
    ever mark the DAG run failed, its nodes stay deployed with the run's key. The janitor keeps
    them while the lease is fresh (a live run past its expiry would look the same), then releases
    them within a lease period, whatever Airflow's metadata says, and removes the run's key."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    from dlbench import paths

    lease_s = 20
    proc = _embedded(_run_conf(lease_s, models=["inception3"], repetitions=5))
    conn = clean_cloud
    try:
        deadline = time.monotonic() + 300
        while not any(n.provision_state == "active" and (n.extra or {}).get("dlbench_lease_until")
                      for n in conn.baremetal.nodes(details=True)):
            assert time.monotonic() < deadline and proc.poll() is None, "the run never deployed a node"
            time.sleep(0.5)
        time.sleep(8)  # into the jobs: the setup task is over, a job task holds the lease
    finally:
        _kill_tree(proc)
    killed = [n for n in conn.baremetal.nodes(details=True) if (n.extra or {}).get("dlbench_run_id")]
    assert len(killed) == 1 and killed[0].provision_state == "active"
    run_id = killed[0].extra["dlbench_run_id"]
    assert (paths.runs_dir() / run_id).exists()  # the killed process could not remove its key

    dag = janitor_dag()
    clouds = {"clouds": [{"name": "ironic", "cloud": CLOUD, "clouds_file": CLOUDS_FILE, "poll_interval": 0.2}],
              "docker": False}
    first = _sweep_report(dag, clouds)
    # What is known: the lease is unexpired (a killed run's looks the same as a live one's until it lapses).
    assert {k["run_id"]: k["reason"] for k in first["kept"]}.get(run_id, "").startswith(
        f"lease of run {run_id} unexpired until"), first
    assert conn.baremetal.get_node(killed[0].id).provision_state == "active"
    time.sleep(lease_s + 2)
    dag = janitor_dag()
    second = _sweep_report(dag, clouds)
    released = [r for r in second["released"] if r["run_id"] == run_id]
    assert released and all(r["released"] and "lease lapsed" in r["reason"] for r in released), second
    assert run_id in {k["run_id"] for k in second["keys"]} and not (paths.runs_dir() / run_id).exists()
    assert secret_variables(run_id) == []  # the killed run's key (a Variable) is deleted too
    with create_session() as session:  # Airflow still believes the run is running: the lease decided
        states = {str(r.state) for r in session.query(DagRun).filter(DagRun.dag_id == "dlbench_benchmark").all()
                  if r.run_id.replace(":", "-").replace("+", "-") == run_id}
    assert states and all(s.endswith("running") for s in states), states
    # ... and the janitor says so: without the connection dlbench_airflow_api it cannot mark it failed
    # (tests/vm/test_janitor_dag_run.py marks one through a real API server).
    (dag_run,) = [d for d in second["dag_runs"] if d["run_id"] == run_id]
    assert dag_run["outcome"] == "not marked" and "no Airflow connection dlbench_airflow_api" in dag_run["detail"], \
        dag_run
    # The next make run ends it in Airflow before its own (issue 38, item 4): no live make run drives it.
    from dlbench.pipeline.embedded import close_orphaned_runs

    marked = close_orphaned_runs("dlbench_benchmark")
    with create_session() as session:
        runs = [r for r in session.query(DagRun).filter(DagRun.dag_id == "dlbench_benchmark").all()
                if r.run_id.replace(":", "-").replace("+", "-") == run_id]
        assert runs and {r.run_id for r in runs} <= set(marked), marked
        assert all(str(r.state).endswith("failed") for r in runs), marked
        assert all("Marked failed by make run" in (r.note or "") for r in runs)
    assert close_orphaned_runs("dlbench_benchmark") == []  # once
    assert_no_leaks(conn)


def _node_of_run(conn, proc: subprocess.Popen, seen: dict[str, str], until, what: str, exclude: str = "") -> str:
    """Poll the nodes (every 0.3 s, at most 10 minutes) until ``until(node, seen)`` holds for one;
    ``seen`` collects node id -> run id of every tagged node of a run other than ``exclude``."""
    deadline = time.monotonic() + 600
    while True:
        assert proc.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"the run never reached {what}"
        for node in conn.baremetal.nodes(details=True):
            run = (node.extra or {}).get("dlbench_run_id")
            if run and run != exclude:
                seen[node.id] = run
            if until(node, seen):
                return node.id
        time.sleep(0.3)


RELEASE_TRIES = 3
"""Runs started to catch one inside its release (see the test below)."""


def test_runs_killed_while_provisioning_and_while_releasing_leave_nothing_past_one_lease(clean_cloud, airflow_db):
    """Issue 38, item 2: a run SIGKILLed while its node deploys, another while it releases (its node
    already untagged: nothing of it left for the janitor to find in the cloud). Both leave their
    key (an Airflow Variable) and their run directory; after one lease the janitor removes both
    from the runs' records alone, says what became of their DAG runs, and nothing is left in the
    cloud. (A run killed in its jobs: test_a_sigkilled_make_run_is_released_once_its_lease_lapses.)"""
    from dlbench import paths
    from dlbench.providers import run_secrets

    lease_s = 20
    conn = clean_cloud
    seen: dict[str, str] = {}
    provisioning = _embedded(_run_conf(lease_s, models=["alexnet"], repetitions=1))
    try:
        _node_of_run(conn, provisioning, seen, lambda n, _: bool((n.extra or {}).get("dlbench_run_id")) and
                     n.provision_state in ("deploying", "wait call-back"), "a deploying node")
    finally:
        _kill_tree(provisioning)
    (first,) = set(seen.values())

    missed = []
    for _ in range(RELEASE_TRIES):
        releasing = _embedded(_run_conf(lease_s, models=["alexnet"], repetitions=1))
        later: dict[str, str] = {}
        try:  # the release untags a node first: a node of the run seen tagged, now without its tags
            node_id = _node_of_run(conn, releasing, later, lambda n, s: n.id in s, "its node", exclude=first)
            # Then only that node, closely: the untag-to-record-removal window is about a second on
            # a quiet devcloud, shorter than one listing of every node (the CI of stop 45 missed it).
            deadline = time.monotonic() + 600
            while (conn.baremetal.get_node(node_id).extra or {}).get("dlbench_run_id"):
                assert releasing.poll() is None, "the run ended before its release was seen"
                assert time.monotonic() < deadline, "the run never reached its release"
                time.sleep(0.05)
            # Frozen there (SIGSTOP: no step of the release goes on), then killed once Ironic's
            # tear-down took the node (its allocation with it): then nothing of the run is left in
            # the cloud. Had the release not asked for the undeploy yet, its allocation (tagged) is left.
            _signal_tree(releasing, signal.SIGSTOP)  # the DAG's process, not only its supervisor
            deadline = time.monotonic() + 60
            while conn.baremetal.get_node(node_id).provision_state in ("active", "deleting") and \
                    time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            _kill_tree(releasing)
        (second,) = set(later.values())
        if (paths.runs_dir() / second).exists():
            break
        # The whole release ran between two polls (the untagged-but-releasing window is a few
        # seconds; the CI of stop 45 missed it once): it removed its key and record itself, so
        # nothing of it is left (asserted), but this is not the case under test: again.
        assert secret_variables(second) == [], second
        missed.append(second)
    else:
        pytest.fail(f"every release ({', '.join(missed)}) ended before it could be frozen")
    print("releases that ended before the freeze:", missed)

    # Neither process could remove its state. The second's key (an Airflow Variable) is there; the
    # first's may not be: killed inside its setup task before dag.test() committed the Variable's
    # write (seen in CI of stop 44 under load), which leaves nothing to leak.
    assert all((paths.runs_dir() / run).exists() for run in (first, second)), (first, second)
    assert secret_variables(second), second
    assert not any((n.extra or {}).get("dlbench_run_id") == second for n in conn.baremetal.nodes(details=True))
    leases = [run_secrets.run_record(run).lease_until for run in (first, second)]
    assert all(leases), leases
    wait = (max(leases) - datetime.now(UTC)).total_seconds() + 1
    assert wait <= lease_s + 1, leases
    time.sleep(max(0.0, wait))  # not a poll: the leases lapse at a known moment

    report = _sweep_report(janitor_dag(), {"clouds": [{"name": "ironic", "cloud": CLOUD, "clouds_file": CLOUDS_FILE,
                                                       "poll_interval": 0.2}], "docker": False})
    keys = {k["run_id"]: k["reason"] for k in report["keys"]}
    assert "released in this sweep" in keys.get(first, ""), report  # its deploying node: tagged, released
    if any(r["run_id"] == second for r in report["released"]):  # killed before its undeploy was asked for
        assert "released in this sweep" in keys.get(second, ""), report
    else:  # nothing of it in the cloud: found from its record alone (before issue 38: kept until expiry)
        assert keys.get(second, "").startswith("lease lapsed"), report
    print("killed in release:", keys.get(second))
    for run in (first, second):
        assert secret_variables(run) == [] and not (paths.runs_dir() / run).exists(), run
    dag_runs = {d["run_id"]: d for d in report["dag_runs"]}
    assert {first, second} <= set(dag_runs), report["dag_runs"]  # each killed run's DAG run is named
    # The second make run ended the first's DAG run before its own (no live make run drove it):
    # the janitor finds it failed already; the second's is still running, with no API to mark it.
    assert dag_runs[first]["outcome"] == "already finished", dag_runs
    assert dag_runs[second]["outcome"] == "not marked", dag_runs
    from dlbench.pipeline.embedded import close_orphaned_runs  # what the next make run does first

    marked = {m.replace(":", "-").replace("+", "-") for m in close_orphaned_runs("dlbench_benchmark")}
    assert second in marked and first not in marked, marked
    assert_no_leaks(conn)
