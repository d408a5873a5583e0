"""dlbench_benchmark end to end with provider=ironic on the devcloud (dag.test()): two nodes
deployed, the smoke TF runner and a micro-benchmark run over SSH, warehouse rows for the
platforms, and every node back to ``available`` with no allocation left."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from dlbench import paths
from dlbench.warehouse import db
from tests.conftest import ROOT
from tests.ironic.conftest import assert_no_leaks, settings


@pytest.fixture(scope="module")
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["dlbench_benchmark"]


def run_ironic(dag: Any, platforms: list[str], **ironic: Any) -> tuple[Any, dict]:
    conf = {"provider": "ironic", "platforms": platforms, "suites": ["tf_cnn", "cpu"], "models": ["alexnet"],
            "data": ["synthetic"], "profile": "smoke", "repetitions": 2,
            "ironic": settings(**ironic).model_dump()}
    run = dag.test(run_conf=conf)
    states = {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}
    return run, states


def rows_by_platform(run_id: str) -> dict[tuple[str, str], int]:
    safe = run_id.replace(":", "-").replace("+", "-")
    with db.engine_for(None).connect() as conn:
        rows = conn.execute(text(
            "SELECT platform, suite, count(*) FROM sample_facts WHERE status = 'ok' AND run_id = :run "
            "GROUP BY platform, suite"), {"run": safe}).all()
    return {(r[0], r[1]): r[2] for r in rows}


def test_bare_metal_on_two_ironic_nodes(dag, clean_cloud):
    run, states = run_ironic(dag, ["bare_metal"], nodes={"bare_metal": 2})
    assert str(run.state).endswith("success"), states
    assert all(v.endswith("success") for k, v in states.items() if k[0] == "run_job"), states
    found = rows_by_platform(run.run_id)
    assert found.get(("bare_metal", "tf_cnn"), 0) > 0 and found.get(("bare_metal", "cpu"), 0) > 0, found
    assert found.get(("bare_metal", "provisioning"), 0) >= 2 * 4  # 4 phase timings per node
    from dlbench.pipeline.steps import safe_run_id

    assert not (paths.runs_dir() / safe_run_id(run.run_id)).exists()  # the run's key and workdir are gone
    assert_no_leaks(clean_cloud)


def test_container_on_bare_metal_over_ssh(dag, clean_cloud, workload_image):
    """The workload image through the node's Docker engine, on the bare-metal nodes (share_nodes)."""
    run, states = run_ironic(dag, ["bare_metal", "container_on_bare_metal"], nodes={"bare_metal": 2},
                             share_nodes=True, docker_image=workload_image)
    assert str(run.state).endswith("success"), states
    found = rows_by_platform(run.run_id)
    for platform in ("bare_metal", "container_on_bare_metal"):
        assert found.get((platform, "tf_cnn"), 0) > 0, found
    assert_no_leaks(clean_cloud)
