"""The generic machine lifecycle with the Ironic driver on the devcloud: nodes deployed, reached
over SSH with the run's own key, prepared, workloads run there, everything released (also from
another worker that has none of the setup worker's files); faults leave nothing behind."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dlbench import paths
from dlbench.errors import ExecutionError
from dlbench.execution.executors import executor_for
from dlbench.execution.targets import Target
from dlbench.jobs import Job
from dlbench.providers import run_secrets
from dlbench.providers.base import Tags
from dlbench.providers.machines import generate_keypair, key_dir
from dlbench.providers.registry import backend_for
from dlbench.request import parse_request, plan_jobs
from dlbench.workloads.result import ResultDocument, Status
from tests.support.ironic import SSH_KEY, assert_no_leaks, node_image, settings
from tests.support.prereqs import ROOT


def request(nodes: int = 2, platforms: tuple[str, ...] = ("bare_metal",), data: str = "synthetic",
            **ironic: Any) -> Any:
    return parse_request({
        "provider": "ironic", "platforms": list(platforms), "suites": ["tf_cnn"], "models": ["alexnet"],
        "data": [data], "profile": "smoke", "repetitions": 1,
        "ironic": settings(nodes={"bare_metal": nodes}, **ironic).model_dump(exclude={"name"}),
    })


def tags_for(run_id: str) -> Tags:
    return Tags(run_id=run_id, dag_id="dlbench_test", dag_run_id=f"manual__{run_id}",
                expires_at=datetime.now(UTC) + timedelta(hours=1))


def run_smoke(req: Any, run_id: str, target: Target, suffix: str = "") -> ResultDocument:
    job = plan_jobs(req, run_id)[0]
    job = job.model_copy(update={"job_id": f"{job.job_id[:20]}{suffix}", "platform": target.platform})
    archive = paths.results_dir() / run_id / f"{job.job_id}.json"
    with run_secrets.materialized([target.to_xcom()]) as (local,):  # what run_job does: the key for this job only
        doc = executor_for(target).execute(job, Target.from_xcom(local), archive, timeout=300)
    assert ResultDocument.read(archive).job_id == job.job_id
    return doc


def test_two_nodes_from_the_node_image_run_workloads_with_the_run_key(clean_cloud, run_id, tmp_path):
    from dlbench.execution.transport import wait_reachable

    req = request(image_source=node_image())
    backend, tags = backend_for(req.provider), tags_for(run_id)
    targets = backend.acquire(req, tags)
    try:
        assert len(targets) == 2 and len({t.instance_id for t in targets}) == 2
        key = tmp_path / "unused"
        if not SSH_KEY:
            # The run's key is a run secret, named by reference; as a file only inside a job.
            assert targets[0].access.key_path == run_secrets.ref(run_id, run_secrets.SSH_KEY)
            assert not key_dir(run_id).exists()
            with run_secrets.secret_file(run_id, run_secrets.SSH_KEY) as key:
                assert stat.S_IMODE(key.stat().st_mode) == 0o600
            other, _ = generate_keypair(tmp_path / "other")  # the node accepts the run's key only
            with pytest.raises(ExecutionError, match="not reachable over SSH"):
                wait_reachable(str(targets[0].address), "root", str(other), timeout=3, interval=0.5)
        payload = json.dumps([t.to_xcom() for t in targets])
        assert "PRIVATE KEY" not in payload and [Target.from_xcom(t) for t in json.loads(payload)] == targets
        for index, target in enumerate(targets):
            # Detected, not configured: the node image needs no preparation; its own python runs the job.
            assert target.access.python == "/opt/dlbench/venv/bin/python", target.access
            assert target.labels["prepared"] == "none"
            doc = run_smoke(req, run_id, target, f"n{index}")
            assert doc.status is Status.OK, doc.error
            assert doc.sample("throughput").value > 0
            assert doc.environment.hostname == target.name  # ran on the node, not on the controller
    finally:
        backend.release(req, tags, targets)
    assert_no_leaks(clean_cloud)
    assert not key_dir(run_id).exists()  # the run's key is gone with the release
    assert run_secrets.get_secret(run_id, run_secrets.SSH_KEY) is None
    docs = [ResultDocument.read(p) for p in (paths.results_dir() / run_id).glob("*.json")]
    timing_docs = [d for d in docs if d.benchmark.suite == "provisioning"]
    assert len(timing_docs) == 2
    for doc in timing_docs:
        assert {s.metric for s in doc.samples} >= {"allocate_time", "deploy_to_active_time",
                                                  "reachable_over_ssh_time", "prepare_time", "undeploy_time"}


def test_stock_image_is_prepared_by_the_product_and_real_data_is_staged(clean_cloud, run_id):
    """A node from a stock Debian image (python3, no dlbench, no TensorFlow): the prepare stage
    installs the workload package and its pinned dependencies over SSH, the demo data set is
    staged and verified, and the TF smoke job runs there on real data."""
    req = request(nodes=1, data="real", prepare_timeout=900)
    backend, tags = backend_for(req.provider), tags_for(run_id)
    targets = backend.acquire(req, tags)
    try:
        (target,) = targets
        assert target.labels["prepared"] != "none" and target.timings["prepare"] > 0
        assert target.timings["stage_data"] >= 0 and int(target.labels["data_files"]) > 0
        assert target.data_dir and target.data_dir.startswith("/var/tmp/dlbench/data/")
        doc = run_smoke(req, run_id, target)
        assert doc.status is Status.OK, doc.error
        assert doc.benchmark.parameters.get("data") == "real"
    finally:
        backend.release(req, tags, targets)
    assert_no_leaks(clean_cloud)


def test_release_from_another_worker_finds_everything_by_tag(clean_cloud, run_id, tmp_path):
    """Teardown on a worker that has none of the setup worker's files (its own DLBENCH_HOME): the
    request and the tags (XCom) are all it needs."""
    req = request(nodes=2, image_source=node_image())
    backend, tags = backend_for(req.provider), tags_for(run_id)
    targets = backend.acquire(req, tags)
    code = ("import json, sys; from dlbench.pipeline import steps; "
            "steps.release(json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]))")
    other_home = tmp_path / "worker-b"
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(req.model_dump(mode="json")),
                           json.dumps(tags.as_dict()), json.dumps([t.to_xcom() for t in targets])],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DLBENCH_HOME": str(other_home), "PYTHONPATH": str(ROOT / "include")})
    if proc.returncode != 0:
        backend.release(req, tags, targets)  # never leak, even when the assertion below fails
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_no_leaks(clean_cloud)
    # The timings reached worker B's archive (shared storage in production), not A's.
    assert len(list((other_home / "results" / run_id).glob("*.json"))) == 2
    backend.release(req, tags, [])  # the setup worker's own release is idempotent and removes its key
    assert not key_dir(run_id).exists()


def test_ssh_unreachable_releases_everything_and_removes_the_key(clean_cloud, run_id):
    nodes = [n.name for n in clean_cloud.baremetal.nodes()]
    # Every node "lives" at an address in the benchmarking range where nothing listens.
    req = request(nodes=1, ssh_timeout=3, address_source="inventory",
                  inventory={name: "198.18.255.254" for name in nodes})
    with pytest.raises(ExecutionError, match="not reachable over SSH within 3 s"):
        backend_for(req.provider).acquire(req, tags_for(run_id))
    assert_no_leaks(clean_cloud)
    assert not (paths.runs_dir() / run_id).exists()  # no teardown runs after a failed setup: key removed here


def test_sshd_down_on_the_nodes_releases_everything(clean_cloud, run_id):
    """The real test hosts refuse SSH (knob ssh-down on every node): deployed, never reachable."""
    from tests.support.ironic import RESOURCE_CLASS, node_index
    from tests.support.knobs import fault

    for node in clean_cloud.baremetal.nodes(resource_class=RESOURCE_CLASS):
        fault("ssh-down", node_index(node))
    try:
        req = request(nodes=1, ssh_timeout=3)
        with pytest.raises(ExecutionError, match="not reachable over SSH within 3 s"):
            backend_for(req.provider).acquire(req, tags_for(run_id))
    finally:
        fault("reset")
    assert_no_leaks(clean_cloud)


def test_workload_crash_is_a_failed_document_and_release_still_cleans(clean_cloud, run_id):
    req = request(nodes=1, image_source=node_image())
    backend, tags = backend_for(req.provider), tags_for(run_id)
    targets = backend.acquire(req, tags)
    try:
        job = plan_jobs(req, run_id)[0]
        crashing = Job.model_validate({**job.model_dump(), "args": {**job.args, "model": "no-such-model"}})
        archive = paths.results_dir() / run_id / f"{crashing.job_id}.json"
        with run_secrets.materialized([targets[0].to_xcom()]) as (local,):
            doc = executor_for(targets[0]).execute(crashing, Target.from_xcom(local), archive, timeout=120)
        assert doc.status is Status.FAILED and "exited with status" in (doc.error or "")
        assert ResultDocument.read(archive).status is Status.FAILED
    finally:
        backend.release(req, tags, targets)
    assert_no_leaks(clean_cloud)


class TaskTimeout(BaseException):
    """Stands for Airflow's AirflowTaskTimeout (a BaseException), raised from SIGALRM."""


def test_provisioning_task_timeout_midway_undoes_its_work(clean_cloud, run_id):
    """execution_timeout fires while nodes are deploying: acquire releases what it made and
    removes the run's key before the exception leaves it (Airflow skips a failed setup's teardown)."""
    def alarm(signum: int, frame: Any) -> None:
        raise TaskTimeout(f"Timeout, PID: {os.getpid()}")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, 1.5)  # after allocation, during deploy
    try:
        with pytest.raises(TaskTimeout):
            req = request(nodes=2)
            backend_for(req.provider).acquire(req, tags_for(run_id))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert_no_leaks(clean_cloud)
    assert not (paths.runs_dir() / run_id).exists()


@pytest.mark.ironic_wide  # slow-deploy and its reset restart Ironic (tests/turns.py)
def test_setup_budget_runs_out_mid_deploy_and_the_rollback_fits_in_it(clean_cloud, run_id):
    """The setup task's execution_timeout is the whole budget: provisioning gets it minus a
    rollback reserve, so when the deploys are too slow for it (a slowed Ironic) the lifecycle
    stops waiting, releases everything and returns before the budget ends (Airflow would
    otherwise kill it mid-rollback). The budget may end in the deploy wait or, when the slowed
    deploys still end in time, in the SSH wait after it: either way the error is the budget's
    timeout (a landing run saw the second as a bare 'not reachable over SSH within 4 s')."""
    import time

    from dlbench.errors import WaitTimeout
    from tests.support.knobs import fault

    fault("slow-deploy", 2)  # a slower Ironic: every fake deploy step takes 2-3 s (restored by reset)
    try:
        req = request(nodes=2, release_timeout=60)
        budget = 40.0  # reserve max(30, 0.25 x budget) = 30 s: 10 s left, a slowed deploy needs more
        started = time.monotonic()
        with pytest.raises(WaitTimeout, match="deploy not active|not ready .* within"):
            backend_for(req.provider).acquire(req, tags_for(run_id), budget_s=budget)
        assert time.monotonic() - started < budget
    finally:
        fault("reset")
    assert_no_leaks(clean_cloud)
    assert not (paths.runs_dir() / run_id).exists()
