"""Fleet survey on the devcloud (dag.test()): ``every_machine`` with 3 Ironic nodes runs the smoke
CPU suite once on each node, each document labelled with its machine index and naming a different
node, the warehouse keeps the three executions apart by that label, and every node is released."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text

from dlbench.warehouse import db
from tests.support.dagruns import assert_succeeded
from tests.support.ironic import assert_no_leaks, node_image, settings
from tests.support.prereqs import ROOT

NODES = 3


@pytest.fixture(scope="module")
def dag(airflow_db: Any) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["dlbench_benchmark"]


def test_every_node_runs_the_job(dag: Any, clean_cloud: Any) -> None:
    from dlbench.pipeline.steps import safe_run_id
    from dlbench.warehouse import archive
    from dlbench.workloads.result import ResultDocument

    conf = {"provider": "ironic", "platforms": ["bare_metal"], "suites": ["cpu"], "data": ["synthetic"],
            "profile": "smoke", "repetitions": 1, "every_machine": True,
            "ironic": settings(image_source=node_image(), nodes={"bare_metal": NODES}).model_dump(exclude={"name"})}
    run = dag.test(run_conf=conf)
    states = assert_succeeded(run)
    jobs = [k for k in states if k[0] == "run_job"]
    assert len(jobs) == NODES and all(states[k].endswith("success") for k in jobs), states

    safe = safe_run_id(run.run_id)
    docs = [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(safe))]
    cpu = [d for d in docs if d.benchmark.suite == "cpu"]
    assert sorted(d.labels["machine"] for d in cpu) == ["0", "1", "2"], [d.labels for d in cpu]
    assert len({d.labels["target"] for d in cpu}) == NODES  # three different nodes ran it
    assert len({d.environment.hostname for d in cpu}) == NODES  # each machine is its own host
    assert {d.labels["job_label"] for d in cpu} == {f"bare_metal/cpu/m{i}/r0" for i in range(NODES)}

    with db.engine_for(None).connect() as conn:
        rows = conn.execute(text(
            "SELECT e.labels FROM executions e JOIN runs r ON r.id = e.run_pk JOIN benchmarks b "
            "ON b.id = e.benchmark_id WHERE r.run_id = :run AND b.suite = 'cpu' AND e.status = 'ok'"),
            {"run": safe}).scalars().all()
    labels = [row if isinstance(row, dict) else json.loads(row) for row in rows]
    assert sorted(lab["machine"] for lab in labels) == ["0", "1", "2"]
    assert_no_leaks(clean_cloud)
