"""PyTorch and JAX through the main DAG (dag.test()) on this host: bare metal as processes, a
container per framework image on the local Docker engine, synthetic and real data; the report
compares the platforms within each framework and the frameworks on each platform."""

from __future__ import annotations

import pytest

from dlbench import paths
from dlbench.pipeline.steps import safe_run_id
from dlbench.reports import text_table
from dlbench.warehouse import archive, db
from dlbench.workloads.result import ResultDocument, Status
from tests.support.dagruns import assert_succeeded
from tests.support.prereqs import ROOT


@pytest.fixture(scope="module")
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py")).dags["dlbench_benchmark"]


def test_pytorch_and_jax_on_both_embedded_platforms(dag, framework_images):
    run = dag.test(run_conf={"profile": "smoke", "repetitions": 1, "suites": ["tf_cnn"], "models": ["alexnet"],
                             "frameworks": ["pytorch", "jax"], "data": ["synthetic", "real"]})
    assert_succeeded(run)
    docs = [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(safe_run_id(run.run_id)))]
    cells = {(d.environment.platform.value, d.benchmark.parameters.get("framework"), d.benchmark.parameters["data"]):
             d for d in docs}
    assert set(cells) == {(p, f, d) for p in ("bare_metal", "container_on_bare_metal") for f in ("pytorch", "jax")
                          for d in ("synthetic", "real")}
    assert all(d.status is Status.OK for d in cells.values()), {k: d.error for k, d in cells.items()}
    for (platform, framework, data), doc in cells.items():
        assert doc.sample("throughput").labels["data"] == data
        package = "torch" if framework == "pytorch" else "jax"
        assert doc.labels["framework"] == framework and doc.labels["precision"] == "fp32"
        assert doc.environment.versions[package] and doc.sample("throughput").value > 0
        # the container ran its framework's image, which carries no other framework; this host has all
        expected = framework if platform == "container_on_bare_metal" else "tensorflow,pytorch,jax"
        assert doc.labels["frameworks_installed"] == expected
    # one network: the same trainable parameters in both frameworks (alexnet at the smoke size)
    assert len({d.labels["model_parameters"] for d in cells.values()}) == 1

    engine = db.engine_for(None)
    table = text_table(engine, safe_run_id(run.run_id), paths.reports_dir() / "frameworks-e2e")
    assert "single · synthetic data · PyTorch" in table and "single · real data · JAX" in table
    assert "FRAMEWORKS: each against PyTorch on the same platform and machine (× PyTorch)" in table
