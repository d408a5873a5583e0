"""A run generates the demo data set only when one of its jobs reads it (each suite says so of its
cells): a request of micro-benchmarks or synthetic cells needs none, so a controller without
TensorFlow (the Airflow image's Celery worker running the local provider, tests/cluster's compose
stack) runs it without importing TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dlbench.request import BenchmarkRequest


@pytest.mark.parametrize(("conf", "reads"), [
    ({"suites": ["cpu"]}, False),
    ({"suites": ["cpu", "network"]}, False),
    ({"suites": ["tf_cnn"], "data": ["synthetic"]}, False),
    ({"suites": ["serving"]}, False),
    ({"suites": ["tf_cnn"]}, True),  # real and synthetic by default
    ({"suites": ["disk"]}, True),  # the disk suite reads the data set whatever the cells' data
    ({"suites": ["fathom"]}, True),  # auto: its data set when the directory holds it
])
def test_a_request_reads_the_data_set_only_through_its_jobs(conf, reads):
    assert BenchmarkRequest(**conf).needs_data_set is reads


def test_no_data_set_and_no_tensorflow_for_a_request_that_reads_none(tmp_path):
    """In a fresh process (TensorFlow not loaded yet): the local provider's data set for a cpu-only
    request is None, nothing is written under DLBENCH_HOME and TensorFlow is never imported."""
    code = ("import sys; from dlbench.request import BenchmarkRequest; "
            "from dlbench.providers.datasets import ensure_dataset; "
            "print(ensure_dataset(BenchmarkRequest(suites=['cpu'])), 'tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env={"DLBENCH_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["None", "False"], out
    assert not list(tmp_path.rglob("*.tfrecord*")), sorted(tmp_path.rglob("*"))
