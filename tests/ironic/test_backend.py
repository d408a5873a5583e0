"""The ``ironic`` provider backend on the devcloud: nodes deployed, reached over SSH with the
run's own key, workloads run there, everything released; faults leave nothing behind."""

from __future__ import annotations

import os
import signal
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dlbench import paths
from dlbench.config import Job, parse_request, plan_jobs
from dlbench.execution.base import ExecutionError, Target
from dlbench.pipeline.ironic_backend import IronicBackend, generate_keypair
from dlbench.provisioning.base import Tags
from dlbench.workloads.result import ResultDocument, Status
from tests.ironic.conftest import RESOURCE_CLASS, SSH_KEY, assert_no_leaks, settings


def request(nodes: int = 2, **ironic: Any) -> Any:
    return parse_request({
        "provider": "ironic", "platforms": ["bare_metal"], "suites": ["tf_cnn"], "models": ["alexnet"],
        "data": ["synthetic"], "profile": "smoke", "repetitions": 1,
        "ironic": settings(nodes={"bare_metal": nodes}, **ironic).model_dump(),
    })


def tags_for(run_id: str) -> Tags:
    return Tags(run_id=run_id, dag_id="dlbench_test", dag_run_id=f"manual__{run_id}",
                expires_at=datetime.now(UTC) + timedelta(hours=1))


def test_two_nodes_run_workloads_over_ssh_with_the_run_key(clean_cloud, run_id, tmp_path):
    from dlbench.execution.ssh import wait_reachable

    backend, tags = IronicBackend(), tags_for(run_id)
    workdir = paths.runs_dir() / run_id
    req = request()
    targets = backend.acquire(req, tags, workdir)
    try:
        assert len(targets) == 2 and len({t.extra["node_id"] for t in targets}) == 2
        key = Path(targets[0].extra["key_path"])
        if not SSH_KEY:
            assert key.parent.parent == workdir and stat.S_IMODE(key.stat().st_mode) == 0o600
            # The node accepts the run's key only: another key is refused.
            other, _ = generate_keypair(tmp_path / "other")
            with pytest.raises(ExecutionError, match="not reachable over SSH"):
                wait_reachable(str(targets[0].address), "root", str(other), timeout=3, interval=0.5)
        assert "BEGIN" not in repr(targets)  # the private key never travels in targets (XCom)
        job = plan_jobs(req, run_id)[0]
        for index, target in enumerate(targets):
            assert float(target.extra["timing_reachable_over_ssh"]) >= 0
            the_job = job.model_copy(update={"job_id": f"{job.job_id[:20]}n{index}"})
            archive = paths.results_dir() / run_id / f"{the_job.job_id}.json"
            doc = backend.executor_for(target).execute(the_job, target, archive, timeout=300)
            assert doc.status is Status.OK, doc.error
            assert doc.sample("throughput").value > 0
            assert ResultDocument.read(archive).job_id == the_job.job_id
    finally:
        backend.release(targets, tags, workdir)
    assert_no_leaks(clean_cloud)
    timing_docs = [ResultDocument.read(p) for p in (paths.results_dir() / run_id).glob("*.json")
                   if ResultDocument.read(p).benchmark.suite == "provisioning"]
    assert len(timing_docs) == 2
    for doc in timing_docs:
        assert {s.metric for s in doc.samples} == {"allocate_time", "deploy_to_active_time",
                                                   "reachable_over_ssh_time", "undeploy_time"}


def test_ssh_unreachable_releases_everything(clean_cloud, run_id):
    nodes = [n.name for n in clean_cloud.baremetal.nodes()]
    # Every node "lives" at an address in the benchmarking range where nothing listens.
    req = request(nodes=1, ssh_timeout=3, address_source="inventory",
                  inventory={name: "198.18.255.254" for name in nodes})
    with pytest.raises(ExecutionError, match="not reachable over SSH within 3 s"):
        IronicBackend().acquire(req, tags_for(run_id), paths.runs_dir() / run_id)
    assert_no_leaks(clean_cloud)


def test_sshd_down_on_the_nodes_releases_everything(clean_cloud, run_id):
    """The real test hosts refuse SSH (knob ssh-down on every node): deployed, never reachable."""
    from tests.ironic.conftest import fault, node_index

    for node in clean_cloud.baremetal.nodes(resource_class=RESOURCE_CLASS):
        fault("ssh-down", node_index(node))
    try:
        with pytest.raises(ExecutionError, match="not reachable over SSH within 3 s"):
            IronicBackend().acquire(request(nodes=1, ssh_timeout=3), tags_for(run_id), paths.runs_dir() / run_id)
    finally:
        fault("reset")
    assert_no_leaks(clean_cloud)


def test_workload_crash_is_a_failed_document_and_release_still_cleans(clean_cloud, run_id):
    backend, tags, workdir = IronicBackend(), tags_for(run_id), paths.runs_dir() / run_id
    req = request(nodes=1)
    targets = backend.acquire(req, tags, workdir)
    try:
        job = plan_jobs(req, run_id)[0]
        crashing = Job.model_validate({**job.model_dump(), "args": {**job.args, "model": "no-such-model"}})
        archive = paths.results_dir() / run_id / f"{crashing.job_id}.json"
        doc = backend.executor_for(targets[0]).execute(crashing, targets[0], archive, timeout=120)
        assert doc.status is Status.FAILED and "exited with status" in (doc.error or "")
        assert ResultDocument.read(archive).status is Status.FAILED
    finally:
        backend.release(targets, tags, workdir)
    assert_no_leaks(clean_cloud)


class TaskTimeout(Exception):
    """Stands for Airflow's AirflowTaskTimeout, which execution_timeout raises from SIGALRM."""


def test_provisioning_task_timeout_midway_undoes_its_work(clean_cloud, run_id):
    """execution_timeout fires while nodes are deploying: acquire releases what it made before
    the exception leaves it (Airflow will not run the teardown of a failed setup)."""
    def alarm(signum: int, frame: Any) -> None:
        raise TaskTimeout(f"Timeout, PID: {os.getpid()}")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, 1.5)  # after allocation, during deploy
    try:
        with pytest.raises(TaskTimeout):
            IronicBackend().acquire(request(nodes=2), tags_for(run_id), paths.runs_dir() / run_id)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert_no_leaks(clean_cloud)


def test_target_is_json_safe_for_xcom(clean_cloud, run_id):
    """Targets go through XCom as plain dicts: strings only, no secrets."""
    import dataclasses
    import json

    backend, tags, workdir = IronicBackend(), tags_for(run_id), paths.runs_dir() / run_id
    targets = backend.acquire(request(nodes=1), tags, workdir)
    try:
        payload = json.dumps([dataclasses.asdict(t) for t in targets])
        assert Target(**json.loads(payload)[0]) == targets[0]
        assert "PRIVATE KEY" not in payload
    finally:
        backend.release(targets, tags, workdir)
    assert_no_leaks(clean_cloud)
