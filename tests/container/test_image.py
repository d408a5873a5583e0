"""The workload image build and the 'no engine' path that turns container rows into visible skips."""

from __future__ import annotations

import subprocess

from dlbench.execution.image import DEFAULT_TAG, docker_available


def test_no_engine_gives_a_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    ok, reason = docker_available(timeout=2)
    assert not ok and "no Docker engine reachable" in reason


def test_local_provider_reports_container_platform_as_skipped_without_engine(monkeypatch, tmp_path):
    from dlbench.pipeline import steps

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    request = steps.validate({"platforms": ["container_on_bare_metal"], "models": ["alexnet"],
                              "data": ["synthetic"], "repetitions": 1})
    tags = steps.tags_for("noengine")
    targets = steps.provision(request, tags)
    assert "no Docker engine reachable" in targets[0]["skip_reason"]
    steps.release(request, tags, targets)  # no engine: nothing to remove, and it must not fail


def test_image_has_the_runner_and_the_tools(workload_image):
    proc = subprocess.run(
        ["docker", "run", "--rm", workload_image, "sh", "-c",
         "python -m dlbench.workloads --help && command -v fio ioping iperf3 hpcc && python -c 'import tensorflow'"],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert "tf-cnn" in proc.stdout and "/fio" in proc.stdout
    assert workload_image == DEFAULT_TAG
