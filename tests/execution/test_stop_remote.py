"""Stopping a running job on a real devcloud node over SSH (``execute(..., stop=event)``): the host
runtime (SIGTERM to the node's ``timeout``, which SIGKILLs the workload's group after the grace)
and the docker runtime (``docker stop -t <grace>`` on the node's own engine). Each returns within
the grace, labels its document ``stopped_by_executor``, and leaves nothing on the node: no
process of the job (``ps``), no container (``docker ps -a``), no job directory.
"""

from __future__ import annotations

import threading
import time
import uuid

from dlbench.execution.base import STOPPED
from dlbench.execution.container import container_name
from dlbench.execution.image import DEFAULT_TAG
from dlbench.execution.ssh import SSHExecutor
from dlbench.workloads.result import ResultDocument, Status
from tests.container.test_stop import stop_later
from tests.execution.test_ssh_executor import containers_of, engine_image, no_job_dirs, workload_access
from tests.support.fleet import job

GRACE = 4.0
STOP_AFTER = 8.0
"""Long enough for the workload to be running on the node, short for the suite."""
LONG = {"measured_steps": 100000}
"""A tf-cnn job that would run for hours: it ends only by being stopped."""




def node_processes(machine, *patterns: str) -> str:
    """Lines of ``ps`` on the node that mention any of ``patterns`` (the ps command names none)."""
    with machine.host() as host:
        status, out = host.run(["ps", "-eo", "pid,pgid,stat,args"], 30)
    assert status == 0 and "PGID" in out, out
    return "\n".join(line for line in out.splitlines() if any(p in line for p in patterns))


def assert_stopped(doc: ResultDocument, one, archive) -> None:
    assert doc.labels.get("stopped_by_executor") == "true", doc.labels
    assert doc.job_id == one.job_id
    if doc.status is not Status.OK:
        assert STOPPED in doc.error or any(s.metric == "elapsed_time" for s in doc.samples), doc.error
    assert ResultDocument.read(archive).labels.get("stopped_by_executor") == "true"


def test_host_job_stopped_leaves_nothing_on_the_node(fleet, run_id, tmp_path, capsys):
    (machine,) = fleet.deploy(1, image=engine_image())
    target = machine.target("bare_metal", machine.access(**workload_access(machine)))
    one = job(run_id, **LONG)
    stop, when = stop_later(STOP_AFTER)
    doc = SSHExecutor(grace=GRACE).execute(one, target, tmp_path / "r.json", timeout=600, stop=stop)
    assert when, "the job ended before it was stopped"
    latency = time.monotonic() - when[0]
    with capsys.disabled():
        print(f"\nSSH host process: stop to return {latency:.2f} s (grace {GRACE} s)")
    assert latency < GRACE + 5, latency
    assert_stopped(doc, one, tmp_path / "r.json")
    assert "workload timed out" not in doc.error, doc.error  # the stop ended it, not the executor's timeout
    assert node_processes(machine, one.job_id) == ""
    assert f"/tmp/dlbench-job-{one.job_id}" not in no_job_dirs(machine)


def test_host_job_ignoring_sigterm_is_killed_with_its_group(fleet, run_id, tmp_path, capsys):
    """An interpreter wrapper on the node ignores SIGTERM and waits for a child of the group that
    ignores it too (the workload itself may handle the TERM and end): the node's ``timeout`` must
    SIGKILL the whole group after the grace, and the executor's check finds nothing left."""
    (machine,) = fleet.deploy(1, image=engine_image())
    access = workload_access(machine)
    marker = f"dlbench-straggler-{uuid.uuid4().hex[:8]}"
    wrapper = f"/tmp/{marker}.sh"
    script = (f"#!/bin/sh\ntrap '' TERM\n{access['python']} -c 'import time; time.sleep(600)' {marker} &\n"
              f'{access["python"]} "$@"\nwait\n')
    with machine.host() as host:
        host.put_bytes(script.encode(), wrapper, mode=0o755)
    try:
        target = machine.target("bare_metal", machine.access(**{**access, "python": wrapper}))
        one = job(run_id, **LONG)
        stop, when = stop_later(STOP_AFTER)
        doc = SSHExecutor(grace=GRACE).execute(one, target, tmp_path / "r.json", timeout=600, stop=stop)
        latency = time.monotonic() - when[0]
        with capsys.disabled():
            print(f"\nSSH host process ignoring SIGTERM: stop to return {latency:.2f} s (grace {GRACE} s)")
        assert GRACE - 0.5 < latency < GRACE + 8, latency  # the grace was waited, then the group killed
        assert_stopped(doc, one, tmp_path / "r.json")
        assert node_processes(machine, one.job_id, marker) == ""
    finally:
        with machine.host() as host:
            host.run(["rm", "-f", "--", wrapper], 30)


def test_docker_job_stopped_leaves_no_container(engine_node, run_id, tmp_path, capsys):
    machine, _ = engine_node
    target = machine.target("container_on_bare_metal",
                            machine.docker_access(DEFAULT_TAG, cpuset="0", publish=(22222,)))
    one = job(run_id, platform="container_on_bare_metal", **LONG)
    name = container_name(one)
    stop = threading.Event()
    seen: dict[str, str] = {}

    def inspect_then_stop() -> None:
        try:
            with machine.host() as host:
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    status, out = host.run(["docker", "inspect", "--format", "{{.State.Running}}", name], 30)
                    if status == 0 and out.strip() == "true":
                        break
                    time.sleep(0.3)
                time.sleep(STOP_AFTER)
                fmt = "{{.HostConfig.CpusetCpus}}|{{json .HostConfig.PortBindings}}|{{.State.Running}}"
                seen["inspect"] = host.run(["docker", "inspect", "--format", fmt, name], 30)[1].strip()
        finally:
            seen["stop_at"] = str(time.monotonic())
            stop.set()

    thread = threading.Thread(target=inspect_then_stop, daemon=True)
    thread.start()
    doc = SSHExecutor(grace=GRACE).execute(one, target, tmp_path / "r.json", timeout=600, stop=stop)
    latency = time.monotonic() - float(seen["stop_at"])
    thread.join(5)
    with capsys.disabled():
        print(f"\nSSH docker: stop to return {latency:.2f} s (grace {GRACE} s)")
    assert seen["inspect"] == '0|{"22222/tcp":[{"HostIp":"","HostPort":"22222"}]}|true', seen["inspect"]
    assert latency < GRACE + 8, latency
    assert_stopped(doc, one, tmp_path / "r.json")
    assert "workload timed out" not in doc.error, doc.error  # the stop ended it, not the executor's timeout
    assert containers_of(machine, run_id) == []
    assert node_processes(machine, one.job_id) == ""
    assert f"/tmp/dlbench-job-{one.job_id}" not in no_job_dirs(machine)


def test_a_stop_that_is_never_set_changes_nothing(engine_node, run_id, tmp_path):
    machine, _ = engine_node
    target = machine.target("container_on_bare_metal", machine.docker_access(DEFAULT_TAG))
    one = job(run_id, platform="container_on_bare_metal")
    doc = SSHExecutor(grace=GRACE).execute(one, target, tmp_path / "r.json", timeout=300, stop=threading.Event())
    assert doc.status is Status.OK and "stopped_by_executor" not in doc.labels, doc.error
    assert containers_of(machine, run_id) == []
