"""dlbench_benchmark end to end with provider=ironic on the devcloud (dag.test()): two nodes that
share nothing with the controller (own root filesystem from the node image, own sshd, own Docker
engine) deployed, the demo data set staged to each, the smoke TF runner on synthetic and real data,
the CPU suite and the network suite between the two nodes over SSH, warehouse rows for the
platforms, and every node back to ``available`` with no allocation left."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from dlbench import paths
from dlbench.warehouse import db
from tests.support.dagruns import assert_succeeded, task_states
from tests.support.ironic import assert_no_leaks, node_image, settings
from tests.support.prereqs import ROOT


@pytest.fixture(scope="module")
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["dlbench_benchmark"]


def run_ironic(dag: Any, platforms: list[str], suites: tuple[str, ...] = ("tf_cnn", "cpu", "network"),
               data: tuple[str, ...] = ("synthetic", "real"), **ironic: Any) -> tuple[Any, dict]:
    conf = {"provider": "ironic", "platforms": platforms, "suites": list(suites), "models": ["alexnet"],
            "data": list(data), "profile": "smoke", "repetitions": 1,
            "ironic": settings(image_source=node_image(), **ironic).model_dump(exclude={"name"})}
    run = dag.test(run_conf=conf)
    return run, task_states(run)


def rows_by_platform(run_id: str) -> dict[tuple[str, str], int]:
    safe = run_id.replace(":", "-").replace("+", "-")
    with db.engine_for(None).connect() as conn:
        rows = conn.execute(text(
            "SELECT platform, suite, count(*) FROM sample_facts WHERE status = 'ok' AND run_id = :run "
            "GROUP BY platform, suite"), {"run": safe}).all()
    return {(r[0], r[1]): r[2] for r in rows}


def archived_labels(run_id: str, suite: str | None = None) -> list[dict]:
    """The labels of the run's archived result documents (of ``suite``'s only, when given)."""
    from dlbench.warehouse import archive
    from dlbench.workloads.result import ResultDocument

    docs = [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(
        run_id.replace(":", "-").replace("+", "-")))]
    return [d.labels for d in docs if suite is None or d.benchmark.suite == suite]


def network_labels(run_id: str) -> list[dict]:
    return archived_labels(run_id, "network")


def secret_findings(run_id: str, secret: str, captured: str) -> list[str]:
    """Where ``secret`` appears: the run's logs, XCom, rendered templates, the archive, the
    embedded run log, and everything the run printed."""
    import os
    from pathlib import Path

    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    found = []
    with create_session() as session:
        for row in session.query(XComModel).filter(XComModel.run_id == run_id).all():
            if secret in str(row.value):
                found.append(f"XCom {row.task_id}/{row.key}")
        for row in session.query(RenderedTaskInstanceFields).filter(RenderedTaskInstanceFields.run_id == run_id):
            if secret in str(row.rendered_fields):
                found.append(f"rendered fields of {row.task_id}")
    for root in (Path(os.environ["AIRFLOW_HOME"]) / "logs", paths.results_dir(), paths.home() / "last-run.log"):
        for path in ([root] if root.is_file() else root.rglob("*") if root.exists() else []):
            if path.is_file() and secret in path.read_text(errors="replace"):
                found.append(str(path))
    if secret in captured:
        found.append("the run's console output")
    return found


def test_bare_metal_on_two_ironic_nodes(dag, clean_cloud, monkeypatch, capfd):
    from dlbench.providers import machines

    keys: list[str] = []
    original = machines.generate_key

    def recording():  # noqa: ANN202 - records the run's private key to look for it later
        private, public = original()
        keys.append(private)
        return private, public

    monkeypatch.setattr(machines, "generate_key", recording)
    run, states = run_ironic(dag, ["bare_metal"], nodes={"bare_metal": 2})
    assert_succeeded(run)
    assert all(v.endswith("success") for k, v in states.items() if k[0] == "run_job"), states
    found = rows_by_platform(run.run_id)
    assert found.get(("bare_metal", "tf_cnn"), 0) > 0 and found.get(("bare_metal", "cpu"), 0) > 0, found
    assert found.get(("bare_metal", "network"), 0) > 0, found
    # allocate, deploy, SSH, prepare, data staging, undeploy: 6 phase timings per node
    assert found.get(("bare_metal", "provisioning"), 0) >= 2 * 6, found
    (labels,) = network_labels(run.run_id)
    assert "across machines" in labels["network_path"], labels  # peer = the other node, never itself
    # No secret anywhere after the run: the private key's body is in no log, XCom, rendered
    # template, archived document or console output.
    (private,) = keys
    body = private.splitlines()[4]  # an ed25519 OpenSSH key's 4th base64 line: private seed bytes
    assert len(body) > 40 and not secret_findings(run.run_id, body, "".join(capfd.readouterr()))
    from dlbench.pipeline.steps import safe_run_id

    assert not (paths.runs_dir() / safe_run_id(run.run_id)).exists()  # the run's key and workdir are gone
    assert_no_leaks(clean_cloud)


def test_container_on_bare_metal_over_ssh(dag, clean_cloud, workload_image):
    """The workload image on each node's OWN Docker engine, on the bare-metal nodes (share_nodes);
    the network suite runs container <-> container across the two nodes. The node image carries
    the workload image pre-loaded (docs/node-image.md), so the prepare stage finds it current by
    its workload context and moves nothing: the `prepared` label of every row says so. (The load
    over SSH when a node lacks it: tests/execution/test_ssh_executor.py.)"""
    run, states = run_ironic(dag, ["bare_metal", "container_on_bare_metal"], suites=("tf_cnn", "network"),
                             data=("synthetic",), nodes={"bare_metal": 2}, share_nodes=True,
                             docker_image=workload_image, prepare_timeout=900)
    assert_succeeded(run)
    found = rows_by_platform(run.run_id)
    for platform in ("bare_metal", "container_on_bare_metal"):
        assert found.get((platform, "tf_cnn"), 0) > 0, found
        assert found.get((platform, "network"), 0) > 0, found
    paths_seen = sorted(labels["network_path"] for labels in network_labels(run.run_id))
    assert len(paths_seen) == 2 and all("across machines" in p for p in paths_seen), paths_seen
    assert any(p.startswith("docker-to-docker") for p in paths_seen), paths_seen
    prepared = {labels["prepared"] for labels in archived_labels(run.run_id) if "prepared" in labels}
    assert prepared == {"none"}, prepared  # the node image carried everything, the workload image too
    assert_no_leaks(clean_cloud)


def test_provision_failure_is_the_cause_the_run_reports(dag, clean_cloud):
    """Nodes deploy but never answer SSH: the setup task rolls back, the jobs do not run, and the
    final task names provision and its error (not a later symptom such as an empty report)."""
    nodes = [n.name for n in clean_cloud.baremetal.nodes()]
    run, states = run_ironic(dag, ["bare_metal"], suites=("cpu",), data=("synthetic",), nodes={"bare_metal": 1},
                             ssh_timeout=3, address_source="inventory",
                             inventory={name: "198.18.255.254" for name in nodes})
    assert not str(run.state).endswith("success")
    assert states[("provision", -1)].endswith("failed") and states[("check", -1)].endswith("failed"), states
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.query(XComModel).filter(XComModel.run_id == run.run_id, XComModel.task_id == "check",
                                              XComModel.key == "dlbench_failure").one()
    error = (row.value if isinstance(row.value, dict) else __import__("json").loads(row.value))["error"]
    assert error.startswith("RuntimeError: provision failed:") and "not reachable over SSH" in error, error
    assert_no_leaks(clean_cloud)
