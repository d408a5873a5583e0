"""What the two Fathom test files check alike (tests/workloads/test_fathom.py: the five image and
reinforcement workloads and the command; tests/workloads/test_fathom_sequence.py: the three
sequence workloads): the layer arithmetic, a run through the CLI, the document every job writes."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlbench.workloads import cli
from dlbench.workloads.fathom.workload import workload
from dlbench.workloads.profiles import FathomModel, get_profile
from dlbench.workloads.result import ResultDocument, Status

UNITS = {"alexnet": "images/s", "vgg": "images/s", "residual": "images/s", "autoenc": "images/s",
         "deepq": "frames/s", "seq2seq": "sentences/s", "memnet": "questions/s", "speech": "utterances/s"}
DATASETS = {"alexnet": "imagenet", "vgg": "imagenet", "residual": "imagenet", "autoenc": "mnist", "deepq": "atari",
            "seq2seq": "wmt15", "memnet": "babi", "speech": "timit"}
REPO = Path(__file__).resolve().parents[2]


def dense(n_in: int, n_out: int, bias: bool = True) -> int:
    return n_in * n_out + (n_out if bias else 0)


def assert_parameter_count(model: str, expected: int, literal: int) -> None:
    """The workload's arithmetic and its Keras network both give the count written out by hand
    (``expected``), which is Fathom's published-size ``literal``."""
    work = workload(model)
    spec = get_profile("paper").fathom.model(model)
    assert work.model is FathomModel(model) and work.unit == UNITS[model] and work.dataset == DATASETS[model]
    assert expected == literal
    assert work.expected_parameters(spec) == expected
    assert work.build(spec).count_params() == expected


def run_fathom(tmp_path: Path, model: str, task: str, *extra: str) -> ResultDocument:
    out = tmp_path / f"{model}-{task}.json"
    code = cli.main(["fathom", "--model", model, "--task", task, "--out", str(out), "--profile", "smoke",
                     "--run-id", "t", *extra])
    doc = ResultDocument.read(out)
    assert code == 0, doc.error
    return doc


def assert_contract(doc: ResultDocument, model: str, task: str, data: str = "synthetic") -> None:
    """The document every Fathom job writes (docs/fathom.md, "What a document holds"); ``data``:
    what was used (``synthetic``: generated under ``--data auto``)."""
    smoke = get_profile("smoke").fathom
    spec = smoke.model(model)
    assert doc.status is Status.OK and doc.benchmark.suite == "fathom" and doc.benchmark.name == model
    params = doc.benchmark.parameters
    assert params["task"] == task and params["batch_size"] == spec.batch_size
    assert params["dataset"] == DATASETS[model] and params["profile"] == "smoke"
    throughput = doc.sample("throughput")
    assert throughput.unit == UNITS[model] and throughput.value > 0
    steps = [s for s in doc.samples if s.metric == "step_time"]
    assert [s.labels["step"] for s in steps] == list(range(smoke.measured_steps))
    mean = doc.sample("step_time_mean").value
    assert mean == pytest.approx(sum(s.value for s in steps) / len(steps))
    assert throughput.value == pytest.approx(spec.batch_size / mean)
    for metric in ("step_time_std", "step_time_p95", "measured_time", "setup_time", "data_load_time"):
        assert doc.sample(metric).unit == "s" and doc.sample(metric).value >= 0
    start, end = doc.sample("measured_window_start").value, doc.sample("measured_window_end").value
    assert 0 < end - start < 600 and doc.sample("measured_window_start").labels["clock"] == "CLOCK_REALTIME"
    assert doc.labels["model_parameters"] == str(workload(model).expected_parameters(spec))
    assert doc.labels["task"] == task and doc.labels["device"] in ("cpu", "gpu")
    assert doc.labels["framework"] == "tensorflow" and doc.labels["framework_version"]
    assert doc.labels["data"] == data and doc.labels["profile"] == "smoke"
    if data == "synthetic":
        assert params["data"] == "auto" and doc.labels["data_source"].startswith("generated")
    losses = [s.value for s in doc.samples if s.metric == "loss"]
    if task == "train":
        assert losses and all(math.isfinite(v) for v in losses) and doc.labels["diverged"] == "false"
    else:
        assert not losses


def run_module(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m dlbench.workloads fathom ARGV`` in a process of its own (as a job runs it)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "include"), "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-m", "dlbench.workloads", "fathom", *argv], env=env, capture_output=True,
                          text=True, timeout=300)
