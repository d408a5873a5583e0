"""Stopping a running job from outside (``execute(..., stop=event)``), container options of
co-operating jobs (cpuset, published ports, a user-defined network where containers find each
other by name) and the lifetime of a job network: real processes, the real workload image on
the real Docker engine.

A stop must end the workload within the executor's grace (SIGTERM, then SIGKILL), return a
document labelled ``stopped_by_executor``, and leave no process or container behind.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dlbench.execution.base import STOPPED, StopWatch, on_stop
from dlbench.execution.container import container_name, workload_launch
from dlbench.execution.docker import DockerExecutor
from dlbench.execution.engine import NETWORK_RANGE, job_network, network_name, sweep_networks
from dlbench.execution.local import LocalProcessExecutor
from dlbench.execution.targets import LocalDocker, LocalProcess, Target
from dlbench.jobs import Job, job_id_for
from dlbench.providers import janitor
from dlbench.workloads.result import ResultDocument, Status
from tests.container.test_launch import create_via_cli_and_sdk

GRACE = 4.0
STOP_AFTER = 5.0
"""Long enough for the workload to be in its run (TensorFlow imported), short for the suite."""
LONG = {"model": "alexnet", "data": "synthetic", "measured_steps": 100000}
"""A tf-cnn job that would run for hours: it ends only by being stopped."""


def a_job(run_id: str, platform: str, suite: str = "tf_cnn", command: str = "tf-cnn", repetition: int = 0,
          **args) -> Job:
    args = args or dict(LONG)
    return Job(job_id=job_id_for(run_id, platform, suite, args, repetition), run_id=run_id, platform=platform,
               suite=suite, command=command, args=args, profile="smoke", repetition=repetition)


def docker_target(image: str, **access) -> Target:
    return Target(name="local-docker", platform="container_on_bare_metal",
                  access=LocalDocker(image=image, **access), expires_at=datetime.now(UTC) + timedelta(hours=1))


def stop_later(seconds: float) -> tuple[threading.Event, list[float]]:
    """An event set ``seconds`` from now; the list receives the monotonic time it was set."""
    stop, when = threading.Event(), []

    def fire() -> None:
        when.append(time.monotonic())
        stop.set()

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return stop, when


def processes_of(job: Job) -> str:
    out = subprocess.run(["pgrep", "-af", "--", f"--job-id {job.job_id}"], capture_output=True, text=True)
    return out.stdout.strip()


def assert_stopped(doc: ResultDocument, job: Job, archive: Path) -> None:
    """Labelled, archived, and either the workload's own document (written on SIGTERM) or the
    executor's failed one saying it was stopped."""
    assert doc.labels.get("stopped_by_executor") == "true", doc.labels
    assert doc.job_id == job.job_id
    if doc.status is not Status.OK:
        assert STOPPED in doc.error or any(s.metric == "elapsed_time" for s in doc.samples), doc.error
    stored = ResultDocument.read(archive)
    assert stored.labels.get("stopped_by_executor") == "true"


# -- the shared mechanism -------------------------------------------------------------------------


@pytest.mark.quiet  # timing bound of the product: the stop action within 0.3 s
def test_on_stop_runs_its_action_once_and_only_while_the_body_runs():
    calls: list[float] = []
    stop = threading.Event()
    with on_stop(stop, lambda w: calls.append(time.monotonic())) as watch:
        time.sleep(0.3)
    assert calls == [] and not watch.fired  # never set: never run
    with on_stop(stop, lambda w: calls.append(time.monotonic())) as watch:
        set_at = time.monotonic()
        stop.set()
        time.sleep(0.5)
    assert len(calls) == 1 and watch.fired and calls[0] - set_at < 0.3
    with on_stop(stop, lambda w: calls.append(time.monotonic())):  # already set when the block starts
        time.sleep(0.3)
    assert len(calls) == 2
    ended_seen: list[bool] = []
    with on_stop(stop, lambda w: ended_seen.append(w.ended.wait(5))):
        time.sleep(0.2)
    assert ended_seen == [True]  # the action may wait for the body's end: leaving the block sets it


def test_on_stop_reports_an_action_that_fails():
    stop = threading.Event()
    stop.set()

    def broken(_: StopWatch) -> None:
        raise OSError("engine gone")

    with on_stop(stop, broken) as watch:
        time.sleep(0.3)
    assert watch.fired and "engine gone" in watch.error


# -- local process --------------------------------------------------------------------------------


def test_local_process_stopped(tmp_path):
    job = a_job(f"st{uuid.uuid4().hex[:8]}", "bare_metal")
    stop, when = stop_later(STOP_AFTER)
    started = time.monotonic()
    doc = LocalProcessExecutor(grace=GRACE).execute(job, Target(name="local", platform="bare_metal",
                                                                access=LocalProcess()),
                                                    tmp_path / "r.json", timeout=600, stop=stop)
    ended = time.monotonic()
    assert when, "the job ended before it was stopped"
    latency = ended - when[0]
    print(f"\nlocal process: stop to return {latency:.2f} s (grace {GRACE} s), run {ended - started:.1f} s")
    assert latency < GRACE + 3, latency
    assert_stopped(doc, job, tmp_path / "r.json")
    assert processes_of(job) == ""


def test_local_process_that_ignores_sigterm_is_killed_with_its_group(tmp_path):
    """An interpreter wrapper that ignores SIGTERM and waits for a child of the group that ignores
    it too (the workload itself may handle the TERM and end): the process the executor waits for
    does not end, so the executor must SIGKILL the group after the grace."""
    marker = f"dlbench-straggler-{uuid.uuid4().hex[:8]}"
    wrapper = tmp_path / "python"
    wrapper.write_text("#!/bin/sh\ntrap '' TERM\n"
                       f"{sys.executable} -c 'import time; time.sleep(600)' {marker} &\n"
                       f'{sys.executable} "$@"\nwait\n')
    wrapper.chmod(0o755)
    job = a_job(f"st{uuid.uuid4().hex[:8]}", "bare_metal")
    stop, when = stop_later(STOP_AFTER)
    doc = LocalProcessExecutor(python=str(wrapper), grace=GRACE).execute(
        job, Target(name="local", platform="bare_metal", access=LocalProcess()), tmp_path / "r.json",
        timeout=600, stop=stop)
    latency = time.monotonic() - when[0]
    print(f"\nlocal process ignoring SIGTERM: stop to return {latency:.2f} s (grace {GRACE} s)")
    assert GRACE - 0.5 < latency < GRACE + 3, latency  # it waited the grace, then killed
    assert_stopped(doc, job, tmp_path / "r.json")
    assert processes_of(job) == ""
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.strip()
    assert left == "", f"a child of the workload's group survived: {left}"


def test_local_process_timeout_is_the_reported_cause(tmp_path):
    """The timeout SIGTERMs the workload, which writes a document saying it was stopped: the
    error a user reads must name the timeout first, then what the workload said."""
    job = a_job(f"st{uuid.uuid4().hex[:8]}", "bare_metal")
    doc = LocalProcessExecutor(grace=GRACE).execute(job, Target(name="local", platform="bare_metal",
                                                                access=LocalProcess()),
                                                    tmp_path / "r.json", timeout=STOP_AFTER)
    assert doc.status is Status.FAILED
    assert doc.error.startswith(f"workload timed out after {STOP_AFTER:.0f} s"), doc.error
    assert "stopped_by_executor" not in doc.labels
    assert ResultDocument.read(tmp_path / "r.json").error == doc.error
    assert processes_of(job) == ""


def test_local_process_without_stop_is_unlabelled(tmp_path):
    job = a_job(f"st{uuid.uuid4().hex[:8]}", "bare_metal", model="alexnet", data="synthetic")
    doc = LocalProcessExecutor().execute(job, Target(name="local", platform="bare_metal", access=LocalProcess()),
                                         tmp_path / "r.json", timeout=600, stop=threading.Event())
    assert doc.status is Status.OK, doc.error
    assert "stopped_by_executor" not in doc.labels


# -- local Docker ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def wait_running(client, name: str, timeout: float = 60):
    import docker

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            container = client.containers.get(name)
            if container.status == "running":
                return container
        except docker.errors.NotFound:
            pass
        time.sleep(0.2)
    raise AssertionError(f"container {name} not running within {timeout} s")


def test_docker_stopped_with_cpuset_publish_and_network(docker_client, workload_image, tmp_path):
    run_id = f"st{uuid.uuid4().hex[:8]}"
    job = a_job(run_id, "container_on_bare_metal")
    port = free_port()
    with job_network(run_id, "group") as net:
        target = docker_target(workload_image, cpuset="0", publish=(port,), network=net)
        stop = threading.Event()
        seen: dict = {}

        def inspect_then_stop() -> None:
            try:
                container = wait_running(docker_client, container_name(job))
                time.sleep(STOP_AFTER)
                container.reload()
                seen.update(container.attrs)
            finally:
                seen["stop_at"] = time.monotonic()
                stop.set()

        thread = threading.Thread(target=inspect_then_stop, daemon=True)
        thread.start()
        doc = DockerExecutor(workload_image, grace=GRACE).execute(job, target, tmp_path / "r.json", timeout=600,
                                                                   stop=stop)
        ended = time.monotonic()
        thread.join(5)
        latency = ended - seen["stop_at"]
        print(f"\nlocal docker: stop to return {latency:.2f} s (grace {GRACE} s)")
        assert latency < GRACE + 5, latency
        assert_stopped(doc, job, tmp_path / "r.json")
        assert docker_client.containers.list(all=True, filters={"label": f"dlbench.run_id={run_id}"}) == []
        host_config, config = seen["HostConfig"], seen["Config"]
        assert host_config["CpusetCpus"] == "0"
        assert host_config["PortBindings"] == {f"{port}/tcp": [{"HostIp": "", "HostPort": str(port)}]}
        assert host_config["NetworkMode"] == net and list(seen["NetworkSettings"]["Networks"]) == [net]
        assert config["Hostname"] == container_name(job) == seen["Name"].lstrip("/")


def test_docker_stop_of_a_finished_job_keeps_its_result(docker_client, workload_image, tmp_path):
    """A stop that comes after the workload ended (a group stopping roles that already finished)
    changes nothing but the label: the document stays the workload's own."""
    run_id = f"st{uuid.uuid4().hex[:8]}"
    job = a_job(run_id, "container_on_bare_metal", model="alexnet", data="synthetic")
    stop = threading.Event()
    doc = DockerExecutor(workload_image, grace=GRACE).execute(job, docker_target(workload_image),
                                                               tmp_path / "r.json", timeout=600, stop=stop)
    assert doc.status is Status.OK and "stopped_by_executor" not in doc.labels, doc.error


def test_two_containers_on_a_job_network_reach_each_other_by_name(docker_client, workload_image, tmp_path):
    """The network suite's client in one container measures against ``net-serve`` in another,
    addressed by its container name only. On the default bridge the same name does not resolve:
    what the job network adds."""
    run_id = f"st{uuid.uuid4().hex[:8]}"
    with job_network(run_id, "pair") as net:
        server_job = a_job(run_id, "container_on_bare_metal", suite="network", command="network", repetition=9,
                           server="-")  # only its launch (name, hostname, network) is used
        target = docker_target(workload_image, network=net)
        launch = workload_launch(server_job, target, str(tmp_path), None, f"{os.getuid()}:{os.getgid()}")
        launch = replace(launch, command=("python", "-m", "dlbench.workloads", "net-serve", "--bind", "0.0.0.0",
                                          "--port", "5201"))
        assert launch.hostname == launch.name == container_name(server_job)
        server = docker_client.containers.run(**launch.sdk_kwargs())
        try:
            deadline = time.monotonic() + 60
            while b"serving iperf3" not in server.logs():
                assert time.monotonic() < deadline, server.logs().decode(errors="replace")
                time.sleep(0.3)
            client_job = a_job(run_id, "container_on_bare_metal", suite="network", command="network",
                               server=launch.name, port=5201)
            doc = DockerExecutor(workload_image).execute(client_job, target, tmp_path / "c.json", timeout=300)
            assert doc.status is Status.OK, doc.error
            assert doc.environment.hostname == container_name(client_job)  # its own name, as its peers see it
            assert any(s.value > 0 for s in doc.samples), doc.samples
            alone = a_job(run_id, "container_on_bare_metal", suite="network", command="network", repetition=1,
                          server=launch.name, port=5201)
            off = DockerExecutor(workload_image).execute(alone, docker_target(workload_image), tmp_path / "o.json",
                                                         timeout=300)
            assert off.status is Status.FAILED, "the name resolved on the default bridge too: the test proves nothing"
            assert "not known" in off.error or "resolve" in off.error, off.error  # a DNS failure, not another one
        finally:
            server.remove(force=True)


def test_job_network_subnet_labels_and_removal(docker_client):
    run_id = f"st{uuid.uuid4().hex[:8]}"
    expires = datetime.now(UTC) + timedelta(hours=2)
    with job_network(run_id, "a", expires_at=expires) as first, job_network(run_id, "b") as second:
        assert first == network_name(run_id, "a") and first != second
        subnets = []
        for name in (first, second):
            network = docker_client.networks.get(name)
            assert network.attrs["Driver"] == "bridge"
            labels = network.attrs["Labels"]
            assert labels["dlbench"] == "1" and labels["dlbench.run_id"] == run_id
            (config,) = network.attrs["IPAM"]["Config"]
            subnet = ipaddress.ip_network(config["Subnet"])
            assert subnet.subnet_of(NETWORK_RANGE) and subnet.prefixlen == 24
            assert 201 <= int(subnet.network_address.packed[2]) <= 250 and subnet.network_address.packed[1] == 18
            assert ipaddress.ip_address(config["Gateway"]) in subnet
            subnets.append(subnet)
        assert subnets[0] != subnets[1]
        assert docker_client.networks.get(first).attrs["Labels"]["dlbench.expires_at"] == expires.isoformat()
    assert docker_client.networks.list(names=[first, second]) == []


def test_job_network_is_removed_when_the_block_fails(docker_client):
    run_id = f"st{uuid.uuid4().hex[:8]}"
    with pytest.raises(RuntimeError, match="boom"), job_network(run_id, "x"):
        raise RuntimeError("boom")
    assert docker_client.networks.list(filters={"label": f"dlbench.run_id={run_id}"}) == []


def test_janitor_removes_expired_networks_only(docker_client):
    import docker

    run_id = f"st{uuid.uuid4().hex[:8]}"
    past = datetime.now(UTC) - timedelta(minutes=1)
    foreign_name = f"someone-else-{run_id}"
    # A foreign network: no dlbench label (its subnet in the benchmarking range, outside the job networks').
    pool = docker.types.IPAMPool(subnet="198.18.251.0/24", gateway="198.18.251.1")
    foreign = docker_client.networks.create(foreign_name, driver="bridge", labels={"team": "someone-else"},
                                            ipam=docker.types.IPAMConfig(pool_configs=[pool]))
    try:
        with job_network(run_id, "expired", expires_at=past) as expired, job_network(run_id, "live") as live:
            assert expired in sweep_networks(dry_run=True)
            assert docker_client.networks.list(names=[expired])  # a dry run removes nothing
            report = janitor.sweep([], lambda tags: True, docker=True)
            assert expired in report["networks"] and live not in report["networks"], report
            assert not report["errors"], report["errors"]
            assert docker_client.networks.list(names=[expired]) == []
            assert docker_client.networks.get(live).name == live
            foreign.reload()  # still there: never ours
            over = sweep_networks(runs_over={run_id})  # a run released in this sweep: its networks go too
            assert live in over and docker_client.networks.list(names=[live]) == []
    finally:
        try:
            foreign.remove()
        except docker.errors.NotFound:
            pass


def test_cli_and_sdk_launches_agree_on_cpuset_ports_network_and_hostname(docker_client, workload_image):
    """The SSH path sends ``docker run`` argv, the local path uses the SDK: the same container."""
    run_id = f"st{uuid.uuid4().hex[:8]}"
    job = a_job(run_id, "container_on_bare_metal")
    port = free_port()
    created = []
    with job_network(run_id, "cli") as net:
        target = docker_target(workload_image, cpuset="0", publish=(port,), network=net)
        base = workload_launch(job, target, "/tmp", None, "4242:4242")
        assert base.cpuset == "0" and base.ports == (("", port, port),) and base.hostname == base.name
        try:
            cli, sdk = create_via_cli_and_sdk(docker_client, created, lambda how: replace(
                base, name=f"{base.name[:50]}-{how}", hostname=f"h-{how}", command=("sleep", "1")))
            for key in ("CpusetCpus", "PortBindings", "NetworkMode"):
                assert cli["HostConfig"][key] == sdk["HostConfig"][key], (key, cli["HostConfig"][key],
                                                                          sdk["HostConfig"][key])
            assert cli["HostConfig"]["CpusetCpus"] == "0" and cli["HostConfig"]["NetworkMode"] == net
            assert cli["HostConfig"]["PortBindings"] == {f"{port}/tcp": [{"HostIp": "", "HostPort": str(port)}]}
            assert (cli["Config"]["Hostname"], sdk["Config"]["Hostname"]) == ("h-cli", "h-sdk")
        finally:
            for container in created:
                container.remove(force=True)
