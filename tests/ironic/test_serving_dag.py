"""The serving suite on devcloud Ironic nodes (provider=ironic, dag.test()): vLLM's server alone
on one node's bare metal (``serving-server``, a process over SSH), driven by vLLM's load generator
on the run's other node, as a tenant's requests reach a server across the cloud's network; the
document (the server machine's environment, the client named) and every request's record back,
archived and loaded; the server stopped before release.

The node image carries the training frameworks only (vLLM would add 3.4 GB to every node for a
suite few runs name): the prepare stage makes vLLM's venv of its own on the node when a run names
the serving suite (its pinned set pushed as wheels and installed offline, as a stock node gets the
training frameworks), and the job runs that venv's interpreter. Ironic's cleaning wipes the node
after release, so nothing of it outlives the run."""

from __future__ import annotations

import pytest

from dlbench.pipeline.steps import safe_run_id
from dlbench.warehouse import archive
from dlbench.workloads.profiles import PROFILES_FILE_ENV
from dlbench.workloads.result import ResultDocument, Status
from tests.ironic.test_benchmark_dag import dag  # noqa: F401 - the module's DAG fixture
from tests.support.dagruns import assert_succeeded
from tests.support.ironic import node_image, settings

PROFILE = """
serving-ironic:
  extends: smoke
  description: smoke's serving shape, one concurrency and two rates (a node shares the CI machine's two cores)
  serving: {concurrency: [2], rates: [4.0, 32.0], requests: 8, bisection_steps: 1}
"""


def test_serving_on_an_ironic_node(dag, clean_cloud, tmp_path, monkeypatch: pytest.MonkeyPatch):  # noqa: F811
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(PROFILE)
    monkeypatch.setenv(PROFILES_FILE_ENV, str(profiles))
    conf = {"provider": "ironic", "platforms": ["bare_metal"], "suites": ["serving"], "profile": "serving-ironic",
            "repetitions": 1, "scenarios": ["single"],
            "ironic": settings(image_source=node_image(), nodes={"bare_metal": 2}, prepare_timeout=900
                               ).model_dump(exclude={"name"})}
    run = dag.test(run_conf=conf)
    assert_succeeded(run)
    docs = [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(safe_run_id(run.run_id)))]
    (doc,) = [d for d in docs if d.benchmark.suite == "serving"]
    assert doc.status is Status.OK, doc.error
    assert doc.environment.platform.value == "bare_metal"
    assert doc.labels["framework"] == "vllm" and doc.sample("startup_time").value > 0
    assert doc.sample("capacity").unit == "requests/s"
    assert len([r for r in doc.requests if r.load == "concurrency"]) == 8
    # The node image had no vLLM: the prepare stage made its venv, and the job ran its interpreter.
    assert "venv-vllm" in doc.labels["prepared"], doc.labels
    # The server ran on the job's node, the load generator on the other one.
    server, client = doc.labels["target"], doc.labels["load_client"]
    assert client.endswith(f"-> server on {server}") and not client.startswith(server), doc.labels
    assert doc.labels["server"].startswith("given http://198.18.") and doc.labels["server"].endswith(":8100")
    # The document describes the server's machine (its environment, measured there), not the client's.
    assert doc.environment.hostname.startswith("devcloud-node-"), doc.environment
    assert doc.labels["load_client_host"].startswith("devcloud-node-")
    assert doc.environment.hostname != doc.labels["load_client_host"], doc.labels
    assert doc.sample("startup_time").value > 1
