"""The distributed and shared-resource scenarios on devcloud nodes (provider=ironic, dag.test()):
three nodes that share nothing with the controller, 1 parameter server + 2 workers one per node
over the nodes' 1 Gbit/s links (as processes and as containers on the nodes' own engines), the
shared scenario on one node, and every node back to ``available``."""

from __future__ import annotations

import json

import pytest

from dlbench.pipeline.steps import safe_run_id
from dlbench.warehouse import archive
from dlbench.workloads.profiles import PROFILES_FILE_ENV
from dlbench.workloads.result import ResultDocument, Status
from tests.ironic.test_benchmark_dag import dag  # noqa: F401 - the module's DAG fixture
from tests.support.dagruns import assert_succeeded
from tests.support.ironic import assert_no_leaks, node_image, settings

SMOKE_LEAD5 = """
smoke-lead5:
  extends: smoke
  description: smoke, the shared cells' background leading by 5 s
  scenarios:
    shared: {lead_seconds: 5}
"""
"""The test's own profile: smoke with the background 5 s ahead, not 12 (8 shared cells of 25-36 s,
12 s of each the lead; the coverage is the local scenarios test's assertion, at smoke's lead)."""


def test_distributed_and_shared_on_three_nodes(dag, clean_cloud, workload_image, tmp_path,  # noqa: F811
                                               monkeypatch: pytest.MonkeyPatch):
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(SMOKE_LEAD5)
    monkeypatch.setenv(PROFILES_FILE_ENV, str(profiles))
    conf = {"provider": "ironic", "platforms": ["bare_metal", "container_on_bare_metal"], "suites": ["tf_cnn"],
            "models": ["alexnet"], "data": ["synthetic"], "profile": "smoke-lead5", "repetitions": 1,
            "scenarios": ["distributed", "shared"],
            "ironic": settings(image_source=node_image(), nodes={"bare_metal": 3}, share_nodes=True,
                               docker_image=workload_image, prepare_timeout=900).model_dump(exclude={"name"})}
    run = dag.test(run_conf=conf)
    assert_succeeded(run)
    docs = [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(safe_run_id(run.run_id)))]
    cells = [d for d in docs if d.labels.get("role") == "aggregate"]
    assert len(cells) == 2 * 4 and all(d.status is Status.OK for d in cells), [(d.labels, d.error) for d in cells]
    for platform in ("bare_metal", "container_on_bare_metal"):
        (dist,) = [d for d in cells if d.environment.platform.value == platform
                   and d.benchmark.parameters["scenario"] == "distributed"]
        roles = [d for d in docs if d.labels.get("cell_job_id") == dist.job_id]
        cluster = json.loads(next(d for d in roles if d.labels["role"] == "worker").labels["cluster"])
        hosts = {a.rsplit(":", 1)[0] for group in cluster.values() for a in group}
        assert len(hosts) == 3 and all(h.startswith("198.18.") for h in hosts), cluster  # one role per node
        # each role really ran on its own node: three different machines (targets) and hostnames
        assert len({d.labels["target"] for d in roles if d.labels["role"] in ("ps", "worker")}) == 3
        assert len({d.environment.hostname for d in roles if d.labels["role"] in ("ps", "worker")}) == 3
        assert dist.labels["placement"] == "3 instances, one role each"
        gbits = dist.sample("network_tcp_throughput").value
        assert 0.3 < gbits < 1.2, f"the nodes' links are shaped to 1 Gbit/s, measured {gbits}"
        shared = [d for d in cells if d.environment.platform.value == platform
                  and d.benchmark.parameters["scenario"] == "shared"]
        assert len(shared) == 3
        for cell in shared:
            on = {d.labels["target"] for d in docs if d.labels.get("cell_job_id") == cell.job_id}
            assert len(on) == 1, f"a shared cell's roles must share one machine: {on}"
    assert_no_leaks(clean_cloud)
