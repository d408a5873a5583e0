"""Fathom and the transformer through the main DAG (dag.test()) on this host: bare metal as
processes, containers on the local Docker engine (Fathom in the TensorFlow image, the transformer
in PyTorch's). One run carries both suites (each suite's dag.test: one DAG start-up instead of two):
Fathom's workloads in both tasks; the transformer's training and generation alone, its training
data-parallel across two workers (DDP over Gloo) and beside a looped generation job."""

from __future__ import annotations

import json

import pytest

from dlbench import paths
from dlbench.pipeline.steps import safe_run_id
from dlbench.reports import text_table
from dlbench.warehouse import archive, db
from dlbench.workloads.result import ResultDocument, Status
from tests.support.dagruns import assert_succeeded
from tests.support.prereqs import ROOT

PLATFORMS = ("bare_metal", "container_on_bare_metal")
FATHOM = ("alexnet", "memnet")
"""Two of the eight (one convolutional, one recurrent memory network): every workload runs through the
workload CLI in tests/workloads; this test is about the suite's path through the DAG."""
PROFILE = {"suites-e2e": {"extends": "smoke", "fathom": {"models": list(FATHOM)}}}


@pytest.fixture(scope="module")
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py")).dags["dlbench_benchmark"]


def test_fathom_and_transformer_on_both_embedded_platforms(dag, framework_images, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_DLBENCH_PROFILES", json.dumps(PROFILE))
    run = dag.test(run_conf={"profile": "suites-e2e", "repetitions": 1, "suites": ["fathom", "transformer"],
                             "data": ["synthetic"], "scenarios": ["single", "distributed", "shared"]})
    assert_succeeded(run)
    docs = [ResultDocument.read(p) for p in archive.archive_files(archive.archive_dir(safe_run_id(run.run_id)))]
    cells = [d for d in docs if d.labels.get("role") in (None, "aggregate")]
    assert all(d.status is Status.OK for d in cells), {d.job_id: d.error for d in cells if d.status is not Status.OK}

    fathom = {(d.environment.platform.value, d.benchmark.name, d.benchmark.parameters["task"]): d
              for d in cells if d.benchmark.suite == "fathom"}
    assert set(fathom) == {(p, m, t) for p in PLATFORMS for m in FATHOM for t in ("train", "infer")}
    for (platform, model, task), doc in fathom.items():
        unit = {"alexnet": "images/s", "memnet": "questions/s"}[model]
        assert doc.sample("throughput").unit == unit and doc.sample("throughput").value > 0
        assert doc.labels["framework"] == "tensorflow" and int(doc.labels["model_parameters"]) > 0
        assert any(s.metric == "loss" for s in doc.samples) == (task == "train")
        expected = "tensorflow" if platform == "container_on_bare_metal" else "tensorflow,pytorch,jax"
        assert doc.labels.get("frameworks_installed", expected) == expected
    # one network per workload: the same parameters on both platforms
    for model in FATHOM:
        assert len({d.labels["model_parameters"] for (_, m, _), d in fathom.items() if m == model}) == 1

    gpt = [d for d in cells if d.benchmark.suite == "transformer"]
    single = {(d.environment.platform.value, d.benchmark.parameters["task"]): d
              for d in gpt if d.benchmark.parameters.get("scenario", "single") == "single"}
    assert set(single) == {(p, t) for p in PLATFORMS for t in ("train", "generate")}
    for (platform, task), doc in single.items():
        assert doc.labels["framework"] == "pytorch" and doc.sample("throughput").unit == "tokens/s"
        if task == "train":
            assert 0 < doc.sample("mfu").value < 1 and doc.sample("peak_gemm").labels["source"]
        else:
            assert doc.sample("time_to_first_token").value > 0 and doc.sample("inter_token_latency").value > 0
        if platform == "container_on_bare_metal":  # PyTorch's image: no other framework in it
            assert doc.labels["frameworks_installed"] == "pytorch"

    for platform in PLATFORMS:
        dist = next(d for d in gpt if d.environment.platform.value == platform
                    and d.benchmark.parameters.get("scenario") == "distributed")
        workers = [d for d in docs if d.labels.get("cell_job_id") == dist.job_id and d.labels.get("role") == "worker"]
        assert len(workers) == 2 and all(w.status is Status.OK for w in workers)
        assert dist.sample("throughput").unit == "tokens/s"
        assert dist.sample("throughput").value == pytest.approx(sum(w.sample("throughput").value for w in workers))
        shared = next(d for d in gpt if d.environment.platform.value == platform
                      and d.benchmark.parameters.get("scenario") == "shared")
        background = next(d for d in docs if d.labels.get("cell_job_id") == shared.job_id
                          and d.labels.get("role") == "background")
        assert background.benchmark.parameters["task"] == "generate" and background.labels["ended_by"] == "sigterm"
        assert shared.sample("background_throughput").unit == "tokens/s"
        assert shared.sample("throughput_alone").unit == "tokens/s"
        assert any(s.metric == "degradation_throughput" for s in shared.samples)

    table = text_table(db.engine_for(None), safe_run_id(run.run_id), paths.reports_dir() / "workload-suites-e2e")
    for name in ("alexnet train", "memnet infer", "gpt train", "gpt generate"):
        assert name in table, table
    assert "container_on_bare_metal" in table
