"""dlbench_benchmark end to end (dag.test()) with bare metal from Ironic and containers on a
Kubernetes cluster from the devcloud's real Magnum, whose node is an Ironic machine too: one run,
smoke TensorFlow + the CPU suite, the report compares container-on-Kubernetes with bare metal,
the cluster's provisioning timings are archived, and nothing is left on either cloud."""

from __future__ import annotations

import csv

from dlbench import paths
from dlbench.pipeline.steps import safe_run_id
from tests.ironic.test_benchmark_dag import rows_by_platform
from tests.nova.test_benchmark_dag import dag  # noqa: F401 - the DAG fixture
from tests.support.dagruns import assert_succeeded
from tests.support.ironic import assert_no_leaks, clean_cloud, cloud_conn, node_image  # noqa: F401
from tests.support.ironic import settings as ironic_settings
from tests.support.magnum import settings, wait_clean

PLATFORMS = ["bare_metal", "container_on_bare_metal"]


def test_bare_metal_vs_container_on_a_magnum_cluster(dag, clean_cloud, clean_magnum, workload_image):  # noqa: F811
    magnum = settings(nodes={"container_on_bare_metal": 1}, docker_image=workload_image,
                      labels={"devcloud_preload_images": workload_image}, ready_timeout=900)
    conf = {"providers": ["ironic", "magnum"], "platforms": PLATFORMS, "suites": ["tf_cnn", "cpu"],
            "models": ["alexnet"], "data": ["synthetic"], "profile": "smoke", "repetitions": 1,
            "ironic": ironic_settings(image_source=node_image(), nodes={"bare_metal": 1}, docker_image=workload_image,
                                      prepare_timeout=900).model_dump(exclude={"name"}, mode="json"),
            "magnum": magnum.model_dump(exclude={"name"}, mode="json")}
    run = dag.test(run_conf=conf)
    assert_succeeded(run)
    found = rows_by_platform(run.run_id)
    for platform in PLATFORMS:
        assert found.get((platform, "tf_cnn"), 0) > 0 and found.get((platform, "cpu"), 0) > 0, (platform, found)
    assert found.get(("container_on_bare_metal", "provisioning"), 0) == 4, found  # the cluster's four phases
    report = paths.reports_dir() / safe_run_id(run.run_id)
    with (report / "comparison.csv").open() as handle:
        rows = [r for r in csv.DictReader(handle) if r["metric"] == "throughput" and r["normalized"]]
    assert {r["platform"] for r in rows} == set(PLATFORMS), rows
    page = (report / "report.html").read_text()
    assert all(platform in page for platform in PLATFORMS)
    from dlbench.warehouse import archive
    from dlbench.workloads.result import ResultDocument

    docs = [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(safe_run_id(run.run_id)))]
    k8s = [d for d in docs if d.labels.get("provider") == "magnum" and d.benchmark.suite == "cpu"]
    # the job ran as a pod on the cluster's node, which is an Ironic machine of the devcloud
    assert k8s and all(d.labels.get("target", "").startswith("devcloud-node-") for d in k8s), [d.labels for d in k8s]
    assert_no_leaks(clean_cloud)
    assert wait_clean(clean_magnum, 60) == []
