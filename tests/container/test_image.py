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


def test_the_wheelhouse_downloads_once_per_set_of_requirement_files(monkeypatch, tmp_path):
    """The stamp of a complete download: the next call for the same files downloads nothing (a
    fresh CI calls it from several targets); another requirement file downloads again."""
    from dlbench.execution import image
    from dlbench.workloads.profiles import Framework

    wheelhouse, requirements = tmp_path / "wheelhouse", tmp_path / "requirements.txt"
    requirements.write_text("six==1.17.0\n")
    monkeypatch.setattr(image, "WHEELHOUSE", wheelhouse)
    monkeypatch.setattr(image, "REQUIREMENTS", {Framework.TENSORFLOW: requirements})
    image.build_wheelhouse()
    (wheel,) = wheelhouse.glob("six-*.whl")
    assert len(list(wheelhouse.glob(".complete-*"))) == 1
    wheel.unlink()
    image.build_wheelhouse()  # the same files: trusted, nothing downloaded
    assert not list(wheelhouse.glob("six-*.whl"))
    requirements.write_text("six==1.16.0\n")
    image.build_wheelhouse()
    assert [w.name for w in wheelhouse.glob("six-*.whl")] == ["six-1.16.0-py2.py3-none-any.whl"]
    assert len(list(wheelhouse.glob(".complete-*"))) == 1  # the old stamp went
