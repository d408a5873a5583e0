from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.fixture(scope="session")
def tfrecords_dir(tmp_path_factory):
    """A tiny real-data set made the way users make one: the workload CLI's make-tfrecords."""
    out = tmp_path_factory.mktemp("ct-tfrecords")
    subprocess.run([sys.executable, "-m", "dlbench.workloads", "make-tfrecords", "--out", str(out),
                    "--images", "24", "--shards", "2", "--image-size", "80"],
                   check=True, capture_output=True, text=True, timeout=300)
    assert sorted(p.name for p in out.glob("train-*")), "make-tfrecords wrote no shards"
    return out
