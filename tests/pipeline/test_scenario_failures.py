"""A distributed job whose worker dies: the whole job ends, the cell names the role, nothing is left
running (real processes on this host, real containers on the local Docker engine)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from dlbench.jobs import Job, job_id_for
from dlbench.pipeline import steps
from dlbench.workloads.profiles import Scenario
from dlbench.workloads.result import Platform, ResultDocument, Status


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and "dlbench.workloads" in cmdline:
            found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _containers_with(run_id: str) -> list[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=dlbench.run_id={run_id}"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def _long_cell(run_id: str, platform: Platform) -> Job:
    args = {"model": "alexnet", "data": "synthetic", "mode": "distributed_replicated", "measured_steps": 100000}
    return Job(job_id=job_id_for(run_id, platform.value, "tf_cnn", args, 0, Scenario.DISTRIBUTED), run_id=run_id,
               platform=platform, suite="tf_cnn", command="tf-cnn", args=args, profile="smoke",
               scenario=Scenario.DISTRIBUTED)


@pytest.mark.parametrize("platform", [Platform.BARE_METAL, Platform.CONTAINER_ON_BARE_METAL])
def test_a_killed_worker_ends_the_whole_job(platform, request):
    if platform is Platform.CONTAINER_ON_BARE_METAL:
        request.getfixturevalue("workload_image")
    run = f"killed-worker-{platform.value}-{uuid.uuid4().hex[:8]}"  # its own processes only, among other streams
    req = steps.validate({"platforms": [platform.value], "suites": ["tf_cnn"], "models": ["alexnet"],
                          "data": ["synthetic"], "scenarios": ["distributed"], "repetitions": 1})
    tags = steps.tags_for(run)
    targets = steps.provision(req, tags)
    cell = _long_cell(steps.safe_run_id(run), platform)
    outcome: dict = {}

    def runner() -> None:
        try:
            outcome["summary"] = steps.run_job(cell.model_dump(mode="json"), targets, timeout=600)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome["error"] = exc

    thread = threading.Thread(target=runner)
    thread.start()
    try:
        victim = None
        deadline = time.monotonic() + 180
        while victim is None and time.monotonic() < deadline and thread.is_alive():
            # worker 1 is up and training once its document's window would start: wait for its process
            pids = [p for p in _processes_with(cell.run_id) if "--role worker" in (cmd := _cmdline(p))
                    and "--task-index 1" in cmd]
            if pids:
                time.sleep(20)  # into training (TF import, graph, barrier)
                victim = pids[0]
            else:
                time.sleep(0.5)
        assert victim is not None, f"worker 1 never started: {outcome}"
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        thread.join(timeout=120)
        assert not thread.is_alive(), "the job did not end after a worker died"
        ended_in = time.monotonic() - killed_at
    finally:
        steps.release(req, tags, targets)
    error = outcome.get("error")
    assert isinstance(error, steps.JobFailed), outcome
    assert "role worker 1" in str(error)
    assert ended_in < 60, f"the other roles took {ended_in:.0f} s to stop"
    cell_doc = ResultDocument.read(steps.archive_path(cell.run_id, cell.job_id))
    assert cell_doc.status is Status.FAILED and cell_doc.error.startswith("role worker 1")
    assert _processes_with(cell.run_id) == [], "a role is still running on this host"
    if platform is Platform.CONTAINER_ON_BARE_METAL:
        assert _containers_with(cell.run_id) == [], "a role's container is left"
