"""dlbench_benchmark end to end on the devcloud's real Nova (dag.test()): the four hosting
options of the core study in ONE run, bare metal and containers on bare metal from Ironic, VMs
and containers on VMs from Nova (each VM a machine with its own root filesystem, sshd and Docker
engine, reached over SSH with the run's key); smoke TensorFlow + the CPU suite; the report shows
all four normalized to bare metal; nothing is left on either cloud. And a SIGKILLed run's VMs,
keypair, security group and server groups are swept by the janitor once its lease lapses."""

from __future__ import annotations

import csv
import time
from typing import Any

import pytest

from dlbench import paths
from dlbench.pipeline.steps import safe_run_id
from tests.ironic.test_benchmark_dag import rows_by_platform
from tests.support.dagruns import assert_succeeded
from tests.support.ironic import assert_no_leaks, node_image
from tests.support.ironic import settings as ironic_settings
from tests.support.nova import settings, wait_clean
from tests.support.prereqs import ROOT

FOUR = ["bare_metal", "container_on_bare_metal", "virtual_machine", "container_on_vm"]


@pytest.fixture(scope="module")
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["dlbench_benchmark"]


def four_platform_conf(workload_image: str, **nova: Any) -> dict[str, Any]:
    common = dict(share_nodes=True, docker_image=workload_image, prepare_timeout=900)
    return {"providers": ["ironic", "nova"], "platforms": FOUR, "suites": ["tf_cnn", "cpu"], "models": ["alexnet"],
            "data": ["synthetic"], "profile": "smoke", "repetitions": 1,
            "ironic": ironic_settings(image_source=node_image(), nodes={"bare_metal": 1}, **common).model_dump(
                exclude={"name"}, mode="json"),
            "nova": settings(image="dlbench-node", nodes={"virtual_machine": 1}, **common, **nova).model_dump(
                exclude={"name"}, mode="json")}


def test_four_hosting_options_in_one_run(dag, clean_cloud, clean_nova, workload_image):
    run = dag.test(run_conf=four_platform_conf(workload_image))
    assert_succeeded(run)
    found = rows_by_platform(run.run_id)
    for platform in FOUR:
        assert found.get((platform, "tf_cnn"), 0) > 0 and found.get((platform, "cpu"), 0) > 0, (platform, found)
    # both providers' machines timed: Ironic's allocate, deploy, SSH, prepare, undeploy; Nova's
    # create -> ACTIVE, SSH, prepare, delete (no data staging: synthetic data only)
    assert found.get(("bare_metal", "provisioning"), 0) == 5 and found.get(("virtual_machine", "provisioning"), 0) == 4
    # the report normalizes all four to bare metal
    report = paths.reports_dir() / safe_run_id(run.run_id)
    with (report / "comparison.csv").open() as handle:
        rows = [r for r in csv.DictReader(handle) if r["metric"] == "throughput" and r["normalized"]]
    assert {r["platform"] for r in rows} == set(FOUR), rows
    assert all(float(r["normalized"]) > 0 for r in rows)
    assert [r for r in rows if r["platform"] == "bare_metal"][0]["normalized"] in ("1.0", "1")
    # the VM documents say which flavor, image, placement and (hashed) host they ran on
    from dlbench.warehouse import archive
    from dlbench.workloads.result import ResultDocument

    docs = [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(safe_run_id(run.run_id)))]
    vm_docs = [d for d in docs if d.benchmark.suite == "cpu" and d.labels.get("job_label", "").startswith(
        "container_on_vm/")]
    assert vm_docs and all(d.labels.get("flavor") == "dlbench.small" and d.labels.get("host_id")
                           and d.labels.get("placement") == "none" for d in vm_docs), [d.labels for d in vm_docs]
    page = (report / "report.html").read_text()
    assert all(platform in page for platform in FOUR)
    assert_no_leaks(clean_cloud)
    assert wait_clean(clean_nova, 60) == []


def test_a_killed_runs_vms_are_swept_by_the_janitor(clean_nova, airflow_db):
    """The process driving a run (make run) SIGKILLed once its VMs exist: nothing releases them,
    the janitor keeps them while the lease is fresh, then deletes servers, server group, keypair
    and security group once it lapsed."""
    from dlbench.providers.base import LEASE_KEY
    from dlbench.providers.nova import NovaDriver, support_name
    from tests.ironic.test_janitor import _embedded, _kill_tree, _sweep_report, janitor_dag, secret_variables

    lease_s = 15
    nova = settings(image="dlbench-node", lease_minutes=lease_s / 60, nodes={"virtual_machine": 3})
    conf = {"provider": "nova", "platforms": ["virtual_machine"], "suites": ["tf_cnn"], "models": ["inception3"],
            "data": ["synthetic"], "scenarios": ["single", "distributed"], "profile": "smoke", "repetitions": 5,
            "nova": nova.model_dump(exclude={"name"}, mode="json")}
    proc = _embedded(conf)
    driver = NovaDriver(settings())
    try:
        deadline = time.monotonic() + 300
        while len([s for s in driver._servers(None) if s.status == "ACTIVE" and LEASE_KEY in s.metadata]) < 3:
            assert time.monotonic() < deadline and proc.poll() is None, "the run never made its VMs"
            time.sleep(0.5)
        time.sleep(8)
    finally:
        _kill_tree(proc)
    (run_id,) = driver.find()
    groups = [g.name for g in clean_nova.compute.server_groups() if (g.name or "").startswith(support_name(run_id))]
    assert groups, "the distributed scenario's server group"
    # The janitor DAG, as a deployment runs it (its task deletes the run's key Variable too).
    clouds = {"clouds": [settings().model_dump(mode="json")], "docker": False}
    first = _sweep_report(janitor_dag(), clouds)
    assert [k["run_id"] for k in first["kept"]] == [run_id] and not first["released"], first
    time.sleep(lease_s + 2)
    second = _sweep_report(janitor_dag(), clouds)
    assert {r["run_id"] for r in second["released"]} == {run_id} and not second["errors"], second
    assert all("lease lapsed" in r["reason"] for r in second["released"]), second
    assert wait_clean(clean_nova, 120) == []
    assert secret_variables(run_id) == []
