"""Each micro suite end to end through the real CLI on the smoke profile (host), and in the image."""

from __future__ import annotations

import subprocess
import sys

import jsonschema
import pytest

from dlbench.workloads.result import ResultDocument, Status, json_schema

EXPECTED = {
    "cpu": {"hpl", "dgemm", "stream_triad", "hpcg"},
    "disk": {"dd_write_bandwidth", "ioping_latency", "fio_bandwidth", "fio_iops", "fio_latency"},
    "network": {"tcp_throughput", "tcp_latency"},
    "deepbench": {"deepbench_time", "deepbench_tflops", "deepbench_allreduce_busbw"},
}


def run_suite(suite: str, out, *extra: str) -> ResultDocument:
    proc = subprocess.run([sys.executable, "-m", "dlbench.workloads", suite, "--profile", "smoke", "--out", str(out),
                           "--platform", "bare_metal", *extra], capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return ResultDocument.read(out)


@pytest.mark.parametrize("suite", sorted(EXPECTED))
def test_suite_on_the_host(suite, tmp_path):
    doc = run_suite(suite, tmp_path / "r.json", *(["--data-dir", str(tmp_path)] if suite == "disk" else []))
    assert doc.status is Status.OK, doc.error
    jsonschema.validate(doc.model_dump(mode="json"), json_schema())
    assert EXPECTED[suite] <= {s.metric for s in doc.samples}
    assert all(s.value >= 0 for s in doc.samples)
    assert doc.benchmark.suite == suite and doc.benchmark.parameters["profile"] == "smoke"
    assert {"cgroup_cpu_time", "cgroup_page_faults"} <= {s.metric for s in doc.samples}  # container-effect counters
    if suite == "disk":
        assert len([s for s in doc.samples if s.metric == "dd_write_bandwidth"]) == 2  # one per dd size
        assert list(tmp_path.glob("dlbench-disk-*")) == []  # scratch files removed


def test_gpu_suite_without_a_gpu_says_not_available(tmp_path, monkeypatch):
    import shutil

    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has an NVIDIA driver: the no-GPU path is exercised on machines without one")
    doc = run_suite("gpu", tmp_path / "r.json")
    assert doc.status is Status.SKIPPED and "not available" in doc.error
    assert doc.sample("gpu_devices").value == 0


def test_cuda_programs_compile_with_nvcc(tmp_path):
    from dlbench.workloads.gpu import runner
    from tests.support.prereqs import require

    require(runner.find_nvcc() is not None, "nvcc (CUDA toolkit) is not installed")
    binary, implementation = runner.build(cache=tmp_path)
    assert binary.exists() and implementation in ("cublas", "tiled")
    proc = subprocess.run([str(binary), "devices"], capture_output=True, text=True, check=False)
    assert proc.returncode in (0, runner.NO_GPU_EXIT)
    if proc.returncode == runner.NO_GPU_EXIT:
        assert runner.parse_lines(proc.stdout) == [("devices", 0.0, "count", {})]


def test_gpu_sizes_scale_to_device_memory():
    from dlbench.workloads.gpu.runner import fit
    from dlbench.workloads.profiles import get_profile

    spec = get_profile("paper").micro.gpu
    big = fit(spec, 80 * 2**30)
    assert big["conv"] == 18432 and big["gemm"] == (23040, 17280, 11520) and big["histogram"] == 67108864
    small = fit(spec, 1 * 2**30)
    assert 2 * 4 * small["conv"] ** 2 <= 0.7 * 2**30
    m, n, k = small["gemm"]
    assert 4 * (m * k + k * n + m * n) <= 0.7 * 2**30


def test_a_tool_failure_fails_the_document_with_the_tool_named(tmp_path):
    """Real iperf3 against a port nobody serves: exit 1, the document says failed and why."""
    import socket

    with socket.socket() as probe:  # a free port, closed again: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "dlbench.workloads", "network", "--profile", "smoke", "--out",
                           str(out), "--server", "127.0.0.1", "--port", str(port)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 1
    assert "iperf3" in proc.stderr
    doc = ResultDocument.read(out)
    assert doc.status is Status.FAILED and "iperf3" in doc.error and doc.labels["network_peer"] == "127.0.0.1"


CONTAINER_CHECKS = {
    "cpu": ("hpl", "hpcg"),
    "disk": ("dd_write_bandwidth", "fio_iops"),
    "network": ("tcp_throughput", "tcp_latency"),
}


@pytest.mark.parametrize("suite", sorted(CONTAINER_CHECKS))
def test_micro_suite_in_the_workload_image(suite, workload_image, tmp_path):
    import os

    os.chmod(tmp_path, 0o777)
    extra = ["--data-dir", "/results"] if suite == "disk" else []
    proc = subprocess.run(["docker", "run", "--rm", "-v", f"{tmp_path}:/results", workload_image, "python", "-m",
                           "dlbench.workloads", suite, "--profile", "smoke", "--out", "/results/r.json", "--platform",
                           "container_on_bare_metal", *extra], capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = ResultDocument.read(tmp_path / "r.json")
    assert doc.status is Status.OK and doc.environment.container.inside
    for metric in CONTAINER_CHECKS[suite]:
        assert doc.sample(metric).value > 0
    assert doc.sample("cgroup_cpu_time").value > 0  # the container's own cgroup


def test_gpu_suite_in_the_workload_image_without_a_gpu(workload_image, tmp_path):
    import os

    os.chmod(tmp_path, 0o777)
    proc = subprocess.run(["docker", "run", "--rm", "-v", f"{tmp_path}:/results", workload_image, "python", "-m",
                           "dlbench.workloads", "gpu", "--profile", "smoke", "--out", "/results/r.json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = ResultDocument.read(tmp_path / "r.json")
    assert doc.status is Status.SKIPPED and "not available" in doc.error
