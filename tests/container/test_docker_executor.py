"""The container platform on a real Docker engine: the real runner in the real workload image."""

from __future__ import annotations

import os
import re
import shutil
import socket
from datetime import UTC, datetime, timedelta

import pytest

from dlbench.execution.container import container_name, labels_for
from dlbench.execution.docker import DockerExecutor
from dlbench.execution.engine import remove_run_containers, sweep_containers
from dlbench.execution.targets import LocalDocker, Target
from dlbench.jobs import Job
from dlbench.workloads.result import Platform, ResultDocument, Status


def job(run_id: str, **args) -> Job:
    return Job(job_id=f"{run_id}-{args.get('model', 'x')}-{args.get('data', 'x')}", run_id=run_id,
               platform=Platform.CONTAINER_ON_BARE_METAL, suite="tf_cnn", command="tf-cnn",
               args={"model": "alexnet", "data": "synthetic", **args}, profile="smoke")


def docker_target(image: str, data_dir: str | None = None, **fields) -> Target:
    return Target(name="local-docker", platform="container_on_bare_metal", access=LocalDocker(image=image),
                  data_dir=data_dir, **fields)


def our_containers(client, run_id):
    return client.containers.list(all=True, filters={"label": f"dlbench.run_id={run_id}"})


@pytest.mark.parametrize("data", ["synthetic", "real"])
def test_runner_in_the_image(docker_client, workload_image, tmp_path, data, tfrecords_dir):
    target = docker_target(workload_image, str(tfrecords_dir) if data == "real" else None)
    doc = DockerExecutor(workload_image).execute(job("ct1", data=data), target, tmp_path / "r.json", timeout=600)
    assert doc.status is Status.OK, doc.error
    assert doc.environment.container.inside and doc.environment.container.runtime == "docker"
    # This host itself carries /.dockerenv, so "inside" alone cannot tell: the hostname can. Docker
    # names a container's host after the first 12 hex digits of its id.
    assert doc.environment.hostname != socket.gethostname()
    assert re.fullmatch(r"[0-9a-f]{12}", doc.environment.hostname), doc.environment.hostname
    assert doc.environment.platform is Platform.CONTAINER_ON_BARE_METAL
    assert doc.sample("throughput").value > 0
    assert doc.sample("launch_to_end_time").value > doc.sample("elapsed_time").value  # container start counted
    assert ResultDocument.read(tmp_path / "r.json").job_id == doc.job_id
    assert our_containers(docker_client, "ct1") == []


def test_runs_as_an_unprivileged_user(docker_client, workload_image, tmp_path, tfrecords_dir):
    """On a user's machine the executor runs the container as that user (not root): the workload
    must read the read-only data mount and write its document without any root privilege."""
    data = tmp_path / "data"  # as on a user's machine: the data belongs to the user running dlbench
    shutil.copytree(tfrecords_dir, data)
    user = None  # not root: the executor's default (our uid) is already unprivileged
    if os.getuid() == 0:
        user = "4242:4242"
        for path in [data, *data.iterdir()]:
            os.chown(path, 4242, 4242)
    target = docker_target(workload_image, str(data))
    doc = DockerExecutor(workload_image, user=user).execute(job("ct6", data="real"), target,
                                                            tmp_path / "r.json", timeout=600)
    assert doc.status is Status.OK, doc.error
    assert our_containers(docker_client, "ct6") == []


def test_bad_arguments_are_a_failed_document_with_the_error(docker_client, workload_image, tmp_path):
    target = docker_target(workload_image)
    doc = DockerExecutor(workload_image).execute(job("ct7", model="vgg16"), target, tmp_path / "r.json", timeout=600)
    assert doc.status is Status.FAILED
    assert "exited with status 2" in doc.error and "vgg16" in doc.error, doc.error
    assert ResultDocument.read(tmp_path / "r.json").status is Status.FAILED  # archived like any other row
    assert our_containers(docker_client, "ct7") == []


def test_a_retry_replaces_the_container_left_by_a_dead_attempt(docker_client, workload_image, tmp_path):
    retried = job("ct8")
    leftover = docker_client.containers.create(workload_image, ["sleep", "60"], name=container_name(retried),
                                               labels=labels_for(retried.run_id, retried.job_id))
    leftover.start()
    target = docker_target(workload_image)
    doc = DockerExecutor(workload_image).execute(retried, target, tmp_path / "r.json", timeout=600)
    assert doc.status is Status.OK, doc.error
    assert our_containers(docker_client, "ct8") == []


def test_a_crash_is_a_failed_document_and_leaves_no_container(docker_client, workload_image, tmp_path):
    target = docker_target(workload_image, str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    doc = DockerExecutor(workload_image).execute(job("ct2", data="real"), target, tmp_path / "r.json", timeout=600)
    assert doc.status is Status.FAILED and "no TFRecord files" in doc.error
    assert our_containers(docker_client, "ct2") == []


def test_timeout_kills_and_removes_the_container(docker_client, workload_image, tmp_path):
    target = docker_target(workload_image)
    slow = job("ct3", measured_steps=100000)  # cannot end by itself in 3 s on any machine
    doc = DockerExecutor(workload_image).execute(slow, target, tmp_path / "r.json", timeout=3)
    assert doc.status is Status.FAILED and "timed out after 3 s" in doc.error
    assert our_containers(docker_client, "ct3") == []


def test_teardown_and_janitor_touch_only_our_containers(docker_client, workload_image):
    past = datetime.now(UTC) - timedelta(minutes=1)
    ours_expired = docker_client.containers.create(workload_image, ["sleep", "60"],
                                                   labels=labels_for("ct4", "j1", expires_at=past))
    ours_live = docker_client.containers.create(workload_image, ["sleep", "60"], labels=labels_for("ct5", "j2"))
    foreign = docker_client.containers.create(workload_image, ["sleep", "60"], labels={"team": "someone-else"})
    try:
        would = sweep_containers(dry_run=True)  # other streams' expired containers may be listed too
        assert ours_expired.name in would and ours_live.name not in would and foreign.name not in would
        assert ours_expired.name in sweep_containers()
        assert remove_run_containers("ct5") == [ours_live.name]
        foreign.reload()  # still there: the janitor never touches untagged containers
        assert our_containers(docker_client, "ct4") == [] and our_containers(docker_client, "ct5") == []
    finally:
        for container in (ours_expired, ours_live, foreign):
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - already removed by the code under test
                pass
