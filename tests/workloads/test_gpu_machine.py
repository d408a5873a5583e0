"""On a machine with an NVIDIA GPU: the environment names it (model, driver, PCI, NUMA) and the
GPU micro-suite runs through the workload CLI. Without a GPU these skip with the reason printed,
also under DLBENCH_REQUIRE_ALL: CI machines have no GPU and no prerequisite step can add one
(docs/gpus.md says where these were run and what they measured)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from dlbench.workloads.environment import collect
from dlbench.workloads.result import ResultDocument, Status
from tests.support.prereqs import ROOT

pytestmark = pytest.mark.skipif(shutil.which("nvidia-smi") is None,
                                reason="no NVIDIA GPU on this machine (nvidia-smi missing): GPU-only checks skipped")


def test_the_environment_names_every_gpu():
    env = collect()
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
    assert len(env.gpus) == len(re.findall(r"^GPU \d+:", listed, re.M)) > 0
    for gpu in env.gpus:
        assert gpu.name in listed and gpu.memory_bytes and gpu.memory_bytes > 2**30
        assert gpu.driver and re.fullmatch(r"[0-9.]+", gpu.driver)
        assert gpu.pci_bus_id and re.fullmatch(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", gpu.pci_bus_id)
    assert env.versions["nvidia_driver"] == env.gpus[0].driver


def test_the_gpu_suite_runs_on_the_gpu(tmp_path):
    out = tmp_path / "gpu.json"
    proc = subprocess.run([sys.executable, "-m", "dlbench.workloads", "gpu", "--profile", "smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "include"),
                                                                            os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = ResultDocument.read(out)
    assert doc.status is Status.OK, doc.error
    metrics = {s.metric for s in doc.samples}
    assert {"gpu_bandwidth", "gpu_convolution", "gpu_gemm", "gpu_histogram", "gpu_transpose"} <= metrics, metrics
    directions = {s.labels["direction"] for s in doc.samples if s.metric == "gpu_bandwidth"}
    assert directions == {"host_to_device", "device_to_host", "device_to_device"}, directions
    assert all(s.value > 0 for s in doc.samples if s.metric.startswith("gpu_")), doc.samples
    assert doc.environment.gpus
