"""The executors' clocks, checked with a controlled launcher (issue 11, item 3).

A fake workload runs in the real harness (so ``elapsed_time`` is the harness's own), sleeps a
known time, writes its document, then records the moment it exits on the machine's
CLOCK_MONOTONIC (shared by the host and its containers: Docker uses no time namespace) and
CLOCK_REALTIME, and exits at once. The executor's teardown is then delayed a known time. The
test takes its own readings around the launch (just before the process or container is
started) and checks, each within 50 ms:

* ``launch_to_end_time`` = launch to the workload's exit (the teardown no longer counted);
* ``teardown_time`` = the delay added after the exit (it is recorded, not lost);
* ``elapsed_time`` = the process's age at its end: bracketed by the readings around Popen (local
  process); for a container, its process's start as the host's /proc shows it (read while it
  runs) to its exit, on the boot-time clock.

Runs the working tree's ``dlbench.workloads`` in the container (bind-mounted over the image's
copy): the image is only the runtime here, so a stale image cannot hide a change.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dlbench.execution import docker as docker_executor
from dlbench.execution import local as local_executor
from dlbench.execution.container import Mount
from dlbench.execution.targets import LocalDocker, LocalProcess, Target
from dlbench.jobs import Job
from dlbench.workloads.result import Platform, Status

ROOT = Path(__file__).resolve().parents[2]
SLEEP_S = 1.0
TEARDOWN_S = 0.7
TOLERANCE_S = 0.05

FAKE_WORKLOAD = """\
import json, os, sys, time
from pathlib import Path
from dlbench.workloads import harness
from dlbench.workloads.result import Benchmark
out = sys.argv[sys.argv.index("--out") + 1]
with harness.workload(Benchmark(suite="fake", name="sleep"), out=out):
    time.sleep(float(os.environ["FAKE_SLEEP"]))
exit_at = {"monotonic": time.monotonic(), "realtime": time.time(), "boottime": time.clock_gettime(time.CLOCK_BOOTTIME)}
Path(os.environ["FAKE_PROBE"]).write_text(json.dumps(exit_at))
os._exit(0)
"""


def fake_job(run_id: str, platform: Platform) -> Job:
    return Job(job_id=f"{run_id}-clock", run_id=run_id, platform=platform, suite="tf_cnn", command="tf-cnn",
               args={"model": "alexnet", "data": "synthetic"}, profile="smoke")


@pytest.mark.quiet  # timing bound of the product: clocks within 50 ms of the truth
def test_local_process_launch_to_end_stops_at_the_exit(tmp_path, monkeypatch):
    script = tmp_path / "fake-python"
    script.write_text(f"#!{sys.executable}\n{FAKE_WORKLOAD}")
    script.chmod(0o755)
    probe = tmp_path / "exit.json"
    launch: dict[str, float] = {}
    real_popen, real_read = subprocess.Popen, local_executor.read_document

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
        launch["before"] = time.monotonic()
        proc = real_popen(*args, **kwargs)
        launch["after"] = time.monotonic()
        return proc

    def slow_read(path: Path) -> Any:  # the teardown, delayed a known time after the exit
        time.sleep(TEARDOWN_S)
        return real_read(path)

    monkeypatch.setattr(local_executor.subprocess, "Popen", popen)
    monkeypatch.setattr(local_executor, "read_document", slow_read)
    executor = local_executor.LocalProcessExecutor(
        python=str(script), env={"PYTHONPATH": str(ROOT / "include"), "FAKE_SLEEP": str(SLEEP_S),
                                 "FAKE_PROBE": str(probe)})
    target = Target(name="local", platform="bare_metal", access=LocalProcess())
    doc = executor.execute(fake_job("clk1", Platform.BARE_METAL), target, tmp_path / "r.json", timeout=120)
    assert doc.status is Status.OK, doc.error
    exit_at = json.loads(probe.read_text())["monotonic"]

    launch_to_end = doc.sample("launch_to_end_time").value
    assert launch_to_end == pytest.approx(exit_at - launch["before"], abs=TOLERANCE_S)
    assert doc.sample("teardown_time").value == pytest.approx(TEARDOWN_S, abs=TOLERANCE_S)
    elapsed = doc.sample("elapsed_time").value
    # The process started between the two readings around Popen; it ended at exit_at.
    assert exit_at - launch["after"] - TOLERANCE_S <= elapsed <= exit_at - launch["before"] + 0.011, (
        elapsed, exit_at - launch["after"], exit_at - launch["before"])
    assert elapsed >= SLEEP_S
    _report("local process", doc)


def _start_boottime(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")


class _TimedContainers:
    """``client.containers`` that notes the moment just before the container is started."""

    def __init__(self, containers: Any, launch: dict[str, float]) -> None:
        self._containers, self._launch = containers, launch

    def run(self, **kwargs: Any) -> Any:
        self._launch["before"] = time.monotonic()
        container = self._containers.run(**kwargs)
        # While it sleeps: the workload process's start as the host's kernel records it
        # (boot-time ticks). The container's first process is its ``timeout`` (the machine hold,
        # ContainerLaunch.holding); the workload is its child.
        container.reload()
        first = container.attrs["State"]["Pid"]
        self._launch["first_process_start_boottime"] = _start_boottime(first)
        deadline = time.monotonic() + 5
        while not (children := Path(f"/proc/{first}/task/{first}/children").read_text().split()):
            assert time.monotonic() < deadline, "the container's timeout never started the workload"
            time.sleep(0.005)
        self._launch["process_start_boottime"] = _start_boottime(int(children[0]))
        return container

    def __getattr__(self, name: str) -> Any:
        return getattr(self._containers, name)


class _TimedClient:
    def __init__(self, client: Any, launch: dict[str, float]) -> None:
        self._client = client
        self.containers = _TimedContainers(client.containers, launch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.quiet  # timing bound of the product: clocks within 50 ms of the truth
def test_docker_launch_to_end_stops_at_the_exit(docker_client, tmp_path, monkeypatch):
    from dlbench.execution.image import DEFAULT_TAG

    if not _image_present(docker_client, DEFAULT_TAG):
        pytest.skip(f"{DEFAULT_TAG} is not built (make image)")
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    probe_dir.chmod(0o777)
    launch: dict[str, float] = {}
    state: dict[str, Any] = {}
    real_launch, real_remove = docker_executor.workload_launch, docker_executor._remove_container

    def fake_launch(*args: Any, **kwargs: Any) -> Any:
        launch_ = real_launch(*args, **kwargs)
        env = {**launch_.env, "FAKE_SLEEP": str(SLEEP_S), "FAKE_PROBE": "/probe/exit.json"}
        mounts = (*launch_.mounts, Mount(str(probe_dir), "/probe"),
                  Mount(str(ROOT / "include" / "dlbench"), "/opt/dlbench/include/dlbench", read_only=True))
        command = ("python", "-c", FAKE_WORKLOAD, *launch_.command[3:])
        return dataclasses.replace(launch_, env=env, mounts=mounts, command=command)

    def slow_remove(client: Any, container: Any, *args: Any, **kwargs: Any) -> None:
        container.reload()
        state.update(container.attrs["State"])
        time.sleep(TEARDOWN_S)
        real_remove(client, container, *args, **kwargs)

    monkeypatch.setattr(docker_executor, "workload_launch", fake_launch)
    monkeypatch.setattr(docker_executor, "_remove_container", slow_remove)
    # No network: the job needs none (and the engine's default bridge need not exist).
    target = Target(name="local-docker", platform="container_on_bare_metal",
                    access=LocalDocker(image=DEFAULT_TAG, network="none"))
    executor = docker_executor.DockerExecutor(DEFAULT_TAG, client=_TimedClient(docker_client, launch))
    doc = executor.execute(fake_job("clk2", Platform.CONTAINER_ON_BARE_METAL), target, tmp_path / "r.json",
                           timeout=120)
    assert doc.status is Status.OK, doc.error
    exit_at = json.loads((probe_dir / "exit.json").read_text())

    launch_to_end = doc.sample("launch_to_end_time").value
    assert launch_to_end == pytest.approx(exit_at["monotonic"] - launch["before"], abs=TOLERANCE_S)
    assert doc.sample("teardown_time").value >= TEARDOWN_S
    # Teardown: the delay plus the container's logs and removal (small, but not nothing).
    assert doc.sample("teardown_time").value < TEARDOWN_S + 2.0
    elapsed = doc.sample("elapsed_time").value
    # The process's age at its exit, from the host's side: its start in the host's /proc (read
    # while it ran) to its exit, both on the boot-time clock (neither is namespaced).
    assert elapsed == pytest.approx(exit_at["boottime"] - launch["process_start_boottime"], abs=TOLERANCE_S)
    # The workload is forked by the container's first process once the engine started it: it is
    # younger than the container (not counting runc's create-to-start gap), no older than the launch.
    assert launch["process_start_boottime"] >= launch["first_process_start_boottime"]
    started = docker_executor._engine_time(state["StartedAt"])
    assert elapsed <= exit_at["realtime"] - started + TOLERANCE_S
    assert elapsed <= exit_at["monotonic"] - launch["before"]
    _report("docker", doc)


def _image_present(client: Any, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def _report(name: str, doc: Any) -> None:
    samples = {m: doc.sample(m).value for m in ("elapsed_time", "launch_to_end_time", "teardown_time")}
    print(f"{name}: " + ", ".join(f"{k}={v:.3f}" for k, v in samples.items())
          + f", before the fix (launch to archived)={samples['launch_to_end_time'] + samples['teardown_time']:.3f}",
          file=sys.stderr)


def test_wait_for_exit_returns_the_status_and_times_out_like_popen_wait():
    """The executor's wait: woken by the exit (pidfd), the status as ``Popen.wait`` gives it, the
    same ``TimeoutExpired`` when the process outlives the timeout, and a process that already
    exited is reaped at once."""
    from dlbench.execution.local import wait_for_exit

    done = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    assert wait_for_exit(done, 60) == 3 and done.returncode == 3
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            wait_for_exit(sleeper, 0.3)
        assert 0.29 <= time.monotonic() - start and sleeper.poll() is None
    finally:
        sleeper.kill()
    assert wait_for_exit(sleeper, None) == -9
    exited = subprocess.Popen(["true"])
    while not Path(f"/proc/{exited.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
        time.sleep(0.01)  # a zombie: exited, not reaped
    assert wait_for_exit(exited, 0) == 0
