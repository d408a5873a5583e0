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

from dlbench.provisioning.base import Tags
from tests.conftest import ROOT
from tests.ironic.conftest import CLOUD, CLOUDS_FILE, RESOURCE_CLASS, assert_no_leaks, settings
from tests.ironic.test_provisioner import Prov

KILLED_RUN = """
import json, sys
from dlbench.provisioning.registry import driver_for
from dlbench.provisioning.ironic import IronicSettings
from dlbench.provisioning.base import BootConfig, Demand, Tags
from dlbench.provisioning.polling import Deadline
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
