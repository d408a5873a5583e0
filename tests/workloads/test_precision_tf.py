"""Precision for TensorFlow (the profile's field, every framework): bf16 trains under Keras' mixed
policy and is part of the case, tf32 is refused without a GPU that has it, and the TF1 graph mode
refuses bf16 instead of training fp32 under a bf16 label."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.prereqs import ROOT


def _tf_cnn(tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "dlbench.workloads", "tf-cnn", "--model", "alexnet", "--profile",
                           "smoke", "--warmup-steps", "1", "--measured-steps", "2", "--out", str(out), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, json.loads(out.read_text())


def test_bf16_is_mixed_precision_and_part_of_the_case(tmp_path):
    code, doc = _tf_cnn(tmp_path, "--precision", "bf16")
    assert code == 0 and doc["status"] == "ok", doc.get("error")
    assert doc["benchmark"]["parameters"]["precision"] == "bf16" and doc["labels"]["precision"] == "bf16"
    assert doc["labels"]["framework"] == "tensorflow" and "framework" not in doc["benchmark"]["parameters"]
    assert doc["labels"]["compiler"] == "tf.function" and doc["labels"]["backend"] == "cpu"
    code, fp32 = _tf_cnn(tmp_path, "--precision", "fp32")
    assert code == 0 and "precision" not in fp32["benchmark"]["parameters"]  # the study's: as before
    assert fp32["labels"]["model_parameters"] == doc["labels"]["model_parameters"]


def test_tf32_without_an_ampere_gpu_is_refused_with_its_reason(tmp_path):
    code, doc = _tf_cnn(tmp_path, "--precision", "tf32")
    assert code != 0 and doc["status"] == "failed"
    assert "precision tf32 needs an NVIDIA GPU of compute capability 8.0 or newer" in doc["error"]


def test_the_graph_mode_refuses_bf16(tmp_path):
    cluster = json.dumps({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]})
    code, doc = _tf_cnn(tmp_path, "--precision", "bf16", "--scenario", "distributed", "--mode",
                        "distributed_replicated", "--role", "worker", "--task-index", "0", "--cluster", cluster)
    assert code != 0 and "bf16 is not available in distributed_replicated" in doc["error"]
