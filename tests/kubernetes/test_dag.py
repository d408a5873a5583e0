"""dlbench_benchmark end to end (dag.test()) with provider ``kubernetes`` on the stand-in: the run's
namespace is made and deleted by label, the job runs as a Kubernetes Job on the devcloud node, its
document (with the cluster's CNI and versions) is archived and loaded, and nothing of the run is
left on the cluster."""

from __future__ import annotations

import pytest
from kubernetes import client

from dlbench.pipeline.steps import safe_run_id
from tests.ironic.test_benchmark_dag import rows_by_platform
from tests.support.dagruns import assert_succeeded
from tests.support.prereqs import ROOT


@pytest.fixture(scope="module")
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["dlbench_benchmark"]


def test_benchmark_dag_on_an_existing_cluster(dag, cluster):
    conf = {"provider": "kubernetes", "platforms": ["container_on_bare_metal"], "suites": ["tf_cnn"],
            "models": ["alexnet"], "data": ["synthetic"], "profile": "smoke", "repetitions": 1,
            "kubernetes": {"kubeconfig": cluster.kubeconfig, "platform": "container_on_bare_metal",
                           "node_selector": {"dlbench.io/pool": "bench"}, "gpus": "none"}}
    run = dag.test(run_conf=conf)
    assert_succeeded(run)
    assert rows_by_platform(run.run_id).get(("container_on_bare_metal", "tf_cnn"), 0) > 0
    from dlbench.warehouse import archive
    from dlbench.workloads.result import ResultDocument

    docs = [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(safe_run_id(run.run_id)))]
    tf = [d for d in docs if d.benchmark.suite == "tf_cnn"]
    assert tf and all(d.environment.versions.get("k8s_cni") == "none" for d in tf), [d.labels for d in tf]
    core = client.CoreV1Api(cluster.api)
    assert [n.metadata.name for n in core.list_namespace(label_selector="dlbench=1").items
            if n.metadata.name.startswith("dlbench-")] == []
