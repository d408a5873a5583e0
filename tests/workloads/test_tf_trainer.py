"""The real TensorFlow runner: every model trains a few steps on tiny shapes, synthetic and real data.

One process per run, as in production, so the CLI, the harness and the document are all real.
"""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

from dlbench.workloads.result import ResultDocument, Status, json_schema
from tests.support.cli import run_cli

MODELS = ["inception3", "resnet50", "alexnet"]



@pytest.fixture(scope="session")
def tfrecords(tmp_path_factory):
    out = tmp_path_factory.mktemp("tfrecords")
    proc = run_cli("make-tfrecords", "--out", str(out), "--images", "24", "--shards", "2", "--image-size", "80")
    assert proc.returncode == 0, proc.stderr
    assert len(list(out.glob("train-*"))) == 2
    return out


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("data", ["synthetic", "real"])
def test_model_trains_and_writes_a_valid_document(model, data, tfrecords, tmp_path):
    out = tmp_path / "result.json"
    args = ["tf-cnn", "--model", model, "--data", data, "--profile", "smoke", "--out", str(out),
            "--warmup-steps", "1", "--measured-steps", "2", "--platform", "bare_metal", "--run-id", "t"]
    if data == "real":
        args += ["--data-dir", str(tfrecords)]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    jsonschema.validate(json.loads(out.read_text()), json_schema())
    doc = ResultDocument.read(out)
    assert doc.status is Status.OK
    assert doc.benchmark.suite == "tf_cnn" and doc.benchmark.name == model
    assert doc.benchmark.parameters["data"] == data
    assert doc.environment.platform.value == "bare_metal"
    assert doc.environment.versions["tensorflow"].startswith("2.")
    assert doc.sample("throughput").value > 0
    steps = [s for s in doc.samples if s.metric == "step_time"]
    assert [s.labels["warmup"] for s in steps] == [True, False, False]
    measured = sum(s.value for s in steps if not s.labels["warmup"])
    batch = doc.sample("throughput").labels["batch_size"]
    assert doc.sample("throughput").value == pytest.approx(2 * batch / measured)
    assert doc.sample("elapsed_time").value > doc.sample("measured_time").value
    assert doc.sample("peak_memory", scope="process").value > 0
    assert doc.sample("minor_page_faults", scope="process").value > 0


def test_real_data_without_directory_fails_with_a_document(tmp_path):
    out = tmp_path / "result.json"
    proc = run_cli("tf-cnn", "--model", "alexnet", "--data", "real", "--data-dir", str(tmp_path / "none"),
                   "--out", str(out))
    assert proc.returncode == 1
    assert "no TFRecord files" in proc.stderr
    doc = ResultDocument.read(out)
    assert doc.status is Status.FAILED and "no TFRecord files" in doc.error


def test_bad_arguments_exit_2_naming_the_choices(tmp_path):
    proc = run_cli("tf-cnn", "--model", "vgg16", "--out", str(tmp_path / "x.json"))
    assert proc.returncode == 2
    assert "inception3" in proc.stderr and "alexnet" in proc.stderr


def test_workloads_never_import_airflow():
    code = ("import sys, dlbench.workloads.cli as c, dlbench.workloads.cnn.tf_trainer; c.load_commands(); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('airflow', 'pandas', 'openstack', 'sqlalchemy')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
