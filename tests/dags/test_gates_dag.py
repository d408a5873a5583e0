"""Pass/fail gates in the real DAG (dag.test()): this host as bare metal and a real Docker
container, the smallest comparison that has intervals (the CPU suite, smoke sizes, 3 repetitions
per platform). A failing gate fails the ``gates`` task naming it, after the report was written;
passing gates, here from the Airflow Variable ``dlbench_gates``, leave the run green."""

from __future__ import annotations

import json

import pytest

from dlbench import storage
from dlbench.pipeline.steps import safe_run_id
from tests.support.prereqs import ROOT

CONF = {"profile": "smoke", "platforms": ["bare_metal", "container_on_bare_metal"], "suites": ["cpu"],
        "repetitions": 3}
PASSING = {"name": "containers keep up", "platform": "container_on_bare_metal", "metric": "hpl", "op": ">=",
           "ratio": 0.01}
"""HPL in a container at 1 % of bare metal or better: holds on any machine, however loaded."""
FAILING = {"name": "containers 100x faster", "platform": "container_on_bare_metal", "metric": "hpl", "ratio": 100}
"""No container runs HPL at 100x bare metal: shown, and failed."""


@pytest.fixture
def dag(airflow_db):
    """A fresh DAG object per test: dag.test() in one process keeps a run's conf in the DAG's params."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py")).dags["dlbench_benchmark"]


def run(dag, conf: dict) -> tuple[object, dict[str, str], dict]:
    """(DAG run, task states, gates.json of the run)."""
    result = dag.test(run_conf=conf)
    states = {ti.task_id: str(ti.state) for ti in result.get_task_instances() if ti.map_index < 0}
    gates_json = json.loads(storage.store().read_text(f"reports/{safe_run_id(result.run_id)}/gates.json"))
    return result, states, gates_json


def test_a_failing_gate_fails_the_last_task_naming_it_and_the_report_is_there(dag, workload_image, capfd):
    result, states, written = run(dag, {**CONF, "gates": [PASSING, FAILING]})
    out = capfd.readouterr().out
    assert not str(result.state).endswith("success"), states
    assert states["gates"].endswith("failed"), states
    assert states["report"].endswith("success") and states["check"].endswith("success"), states
    report = storage.store().local_path(f"reports/{safe_run_id(result.run_id)}/report.html")
    assert report is not None and report.exists()
    assert [(g["label"], g["state"]) for g in written["gates"]] == [("containers keep up", "passed"),
                                                                   ("containers 100x faster", "failed")]
    [row] = written["gates"][1]["rows"]
    assert row["n"] == row["baseline_n"] == 3 and row["ci_high"] < 100
    assert row["reason"].startswith("whole interval below 100 (upper end ")  # shown beyond it, not inconclusive
    # The task's failure names the gate, its measured x BM and interval, and why.
    assert "1 of 2 gate(s) did not pass:\ngate 'containers 100x faster' FAILED (at 95 %)" in out, out[-3000:]
    assert f"x BM [{row['ci_low']:.3g}, {row['ci_high']:.3g}] at 95 %, n=3/3: whole interval below 100" in out


def test_passing_gates_from_the_variable_leave_the_run_green(dag, workload_image, monkeypatch):
    # The request declares no gates: the deployment's standing ones apply (Airflow's env form of the Variable).
    monkeypatch.setenv("AIRFLOW_VAR_DLBENCH_GATES", json.dumps([PASSING]))
    result, states, written = run(dag, CONF)
    assert str(result.state).endswith("success"), states
    assert states["gates"].endswith("success") and states["report"].endswith("success"), states
    assert written["passed"] is True and [g["state"] for g in written["gates"]] == ["passed"]
    assert written["gates"][0]["rows"][0]["ci_low"] >= 0.01
