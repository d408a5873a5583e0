"""A job's claim on its machines (dlbench.execution.machine_lock): which machines a cell claims,
that a second claim waits for the first and names its holder, that the kernel releases a claim
whose process was SIGKILLed, that two real jobs on this host never overlap, and (devcloud) the
same on a node over SSH, where a dropped connection releases the claim."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dlbench.errors import MachineBusy
from dlbench.execution.machine_lock import THIS_HOST, claim_machines, machines_of
from dlbench.execution.targets import KubernetesAccess, LocalDocker, LocalProcess, SSHHost, Target
from tests.support.prereqs import ROOT


@pytest.fixture(autouse=True)
def private_lock(tmp_path, monkeypatch) -> Path:
    """This module's own host lock file: the suite's other jobs are not held up by it."""
    path = tmp_path / "machine.lock"
    monkeypatch.setenv("DLBENCH_MACHINE_LOCK", str(path))
    return path


def local(platform: str = "bare_metal") -> Target:
    access = LocalProcess() if platform == "bare_metal" else LocalDocker(image="dlbench-workload:latest")
    return Target(name="local", platform=platform, access=access, labels={"provider": "local"})


def ssh(address: str, provider: str = "ironic", platform: str = "bare_metal") -> Target:
    return Target(name=address, platform=platform, access=SSHHost(address=address, key_path="/k"),
                  labels={"provider": provider})


def test_machines_of_a_cell():
    assert [k.name for k in machines_of([local(), local("container_on_bare_metal")])] == [THIS_HOST]
    nodes = machines_of([ssh("198.18.0.12"), ssh("198.18.0.11"),
                         ssh("198.18.0.11", platform="container_on_bare_metal")])
    assert [k.name for k in nodes] == ["root@198.18.0.11:22", "root@198.18.0.12:22"]  # once each, sorted
    guest = machines_of([ssh("198.19.0.5", provider="local", platform="virtual_machine")])
    assert [k.name for k in guest] == ["root@198.19.0.5:22", THIS_HOST]  # a local guest shares this host
    pod = Target(name="pod", platform="container_on_bare_metal",
                 access=KubernetesAccess(kubeconfig="/kc", namespace="ns", image="img"))
    assert machines_of([pod]) == []


def test_second_claim_waits_for_the_first_and_names_it(caplog):
    order: list[tuple[str, float]] = []
    held = threading.Event()

    def first() -> None:
        with claim_machines([local()], "run R1 job first", wait_s=5):
            order.append(("first in", time.monotonic()))
            held.set()
            time.sleep(3)
            order.append(("first out", time.monotonic()))

    thread = threading.Thread(target=first)
    thread.start()
    held.wait(5)
    with caplog.at_level("INFO", logger="dlbench.execution.machine_lock"):
        with claim_machines([local("container_on_bare_metal")], "run R2 job second", wait_s=30) as waited:
            order.append(("second in", time.monotonic()))
    thread.join()
    names = [n for n, _ in order]
    assert names == ["first in", "first out", "second in"], order
    assert order[2][1] >= order[1][1] and waited >= 2.0
    assert "claimed by run R1 job first" in caplog.text  # who holds it, while waiting


def test_busy_past_the_wait_is_an_error_naming_the_holder():
    held, done = threading.Event(), threading.Event()

    def holder() -> None:
        with claim_machines([local()], "run R1 job holder", wait_s=5):
            held.set()
            done.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    try:
        started = time.monotonic()
        with pytest.raises(MachineBusy) as busy, claim_machines([local()], "run R2 job late", wait_s=1.5):
            pass
        assert 1.4 <= time.monotonic() - started < 5
        assert "this host is busy: claimed by run R1 job holder" in str(busy.value)
    finally:
        done.set()
        thread.join()


@pytest.mark.quiet  # timing bound of the product: re-claimed within 1 s of the holder's death
def test_a_sigkilled_holder_releases_its_claim(private_lock):
    code = ("import sys,time; sys.path.insert(0, sys.argv[1]);"
            "from dlbench.execution.machine_lock import claim_machines;"
            "from dlbench.execution.targets import LocalProcess, Target;"
            "t = Target(name='local', platform='bare_metal', access=LocalProcess());"
            "c = claim_machines([t], 'run R9 job killed', wait_s=5); c.__enter__(); print('held', flush=True);"
            "time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(ROOT / "include")], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "DLBENCH_MACHINE_LOCK": str(private_lock)})
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(MachineBusy, match="run R9 job killed"), claim_machines([local()], "x", wait_s=0.5):
            pass
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        started = time.monotonic()
        with claim_machines([local()], "run R10 job next", wait_s=5):
            assert time.monotonic() - started < 1.0  # the kernel dropped the dead process's lock
    finally:
        proc.kill()
        proc.wait()


def test_a_workload_left_by_a_killed_executor_keeps_the_machine_busy_until_it_ends(tmp_path):
    """A worker SIGKILLed mid-job (here: a process running LocalProcessExecutor.execute): its
    workload gets SIGTERM (it dies with its executor), and until it has really exited (it holds
    the busy file) the next claim waits: a retry never measures next to it."""
    from dlbench.execution.machine_lock import local_busy_path

    code = ("import sys, pathlib; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]);"
            "from dlbench.execution.local import LocalProcessExecutor;"
            "from dlbench.execution.targets import LocalProcess, Target;"
            "from tests.support.fleet import job;"
            "t = Target(name='local', platform='bare_metal', access=LocalProcess());"
            "j = job('orphanrun', measured_steps=100000);"
            "LocalProcessExecutor().execute(j, t, pathlib.Path(sys.argv[3]), timeout=600)")
    worker = subprocess.Popen([sys.executable, "-c", code, str(ROOT / "include"), str(ROOT), str(tmp_path / "r.json")],
                              start_new_session=True)
    try:
        workload = _wait_for_child(worker.pid, "dlbench.workloads", 60)
        with pytest.raises(MachineBusy, match="a workload still runs on it"), \
                claim_machines([local()], "run R1 job retry-too-early", wait_s=1):
            pass
        worker.send_signal(signal.SIGKILL)  # the worker process only: its workload is in a session of its own
        worker.wait(10)
        started = time.monotonic()
        with claim_machines([local()], "run R2 job retry", wait_s=60) as waited:
            assert not _alive(workload), "the claim was granted while the orphan still ran"
        took = time.monotonic() - started
        assert waited == pytest.approx(took, abs=1.0) and took < 30, took  # SIGTERM, not its 100000 steps
        assert local_busy_path().exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


def test_an_orphaned_container_keeps_the_machine_busy_until_its_own_timeout(tmp_path, docker_client,
                                                                           workload_image):
    """A container runs under its engine, not under our process: a worker SIGKILLed mid-job leaves
    it running. It holds the machine's busy file from inside (bind-mounted), so claims wait for
    it; its own ``timeout`` (the job's + a margin, here shortened) ends it without any retry."""
    import docker

    run_id = f"orphan{os.getpid()}"
    code = ("import sys, pathlib; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]);"
            "import dlbench.execution.container as c; c.ORPHAN_MARGIN_S = 1;"
            "from dlbench.execution.docker import DockerExecutor;"
            "from dlbench.execution.targets import LocalDocker, Target;"
            "from tests.support.fleet import job;"
            "t = Target(name='local-docker', platform='container_on_bare_metal',"
            f" access=LocalDocker(image={workload_image!r}, network='none'));"
            f"j = job({run_id!r}, platform='container_on_bare_metal', measured_steps=100000);"
            "DockerExecutor(grace=2).execute(j, t, pathlib.Path(sys.argv[3]), timeout=25)")
    worker = subprocess.Popen([sys.executable, "-c", code, str(ROOT / "include"), str(ROOT), str(tmp_path / "r.json")],
                              start_new_session=True)
    labels = {"label": f"dlbench.run_id={run_id}"}
    try:
        deadline = time.monotonic() + 90
        while True:  # the container runs and its workload holds the busy file
            assert time.monotonic() < deadline, "the workload container never held the machine"
            running = docker_client.containers.list(filters=labels)
            if running:
                try:
                    with claim_machines([local("container_on_bare_metal")], "probe", wait_s=0.5):
                        pass
                except MachineBusy as exc:
                    assert "a workload still runs" in str(exc)
                    break
            time.sleep(0.5)
        (container,) = running
        assert container.attrs["Config"]["Cmd"][:3] == ["timeout", "--kill-after=2", "26"], container.attrs["Config"]
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        time.sleep(1)
        container.reload()
        assert container.status == "running", "the engine keeps a container whose executor died"
        with pytest.raises(MachineBusy, match="a workload still runs on it"), \
                claim_machines([local("container_on_bare_metal")], "run R1 job next", wait_s=1):
            pass
        with claim_machines([local("container_on_bare_metal")], "run R2 job next", wait_s=60) as waited:
            # The workload released the lock on exiting; its container's PID 1 (timeout) follows.
            deadline = time.monotonic() + 5
            while container.reload() or container.status == "running":
                assert time.monotonic() < deadline, "the claim was granted while the orphan container ran"
                time.sleep(0.1)
        assert 0 < waited < 40, waited
        assert container.attrs["State"]["ExitCode"] != 0  # ended by its own timeout, not by finishing
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        for leftover in docker_client.containers.list(all=True, filters=labels):
            with contextlib.suppress(docker.errors.APIError):
                leftover.remove(force=True)


def _wait_for_child(parent: int, needle: str, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent and needle in cmd:
                return int(pid)
        time.sleep(0.2)
    raise AssertionError(f"no {needle} child of {parent} within {timeout} s")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_two_jobs_on_this_host_never_overlap(tmp_path, monkeypatch):
    """Two runs' jobs started at the same moment on this host (steps.run_job, as two Airflow
    workers would): one waits, their measured windows do not overlap, the wait is labelled."""
    from dlbench.pipeline import steps
    from dlbench.workloads.result import ResultDocument
    from tests.support.fleet import job

    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path / "home"))
    target = local().to_xcom()
    jobs = [job(f"lockrun{i}", suite="cpu", command="cpu").model_dump(mode="json") for i in (1, 2)]
    results: dict[int, dict] = {}

    def go(i: int) -> None:
        results[i] = steps.run_job(jobs[i], [target], timeout=600)

    threads = [threading.Thread(target=go, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(700)
    assert set(results) == {0, 1}, results
    docs = [ResultDocument.read(Path(results[i]["archive"])) for i in (0, 1)]
    first, second = sorted(docs, key=lambda d: d.started_at)
    assert first.finished_at is not None and first.finished_at <= second.started_at, (
        first.started_at, first.finished_at, second.started_at)
    waits = sorted(int(d.labels["machine_wait_s"]) for d in docs)
    assert waits[0] == 0 and waits[1] >= 1, waits


def test_a_node_claim_over_ssh_waits_and_a_dropped_connection_releases_it(fleet):
    """On a devcloud node (its own filesystem and sshd): the claim lives on the node; a second
    claim of the same node waits; another node is not held up; closing the holder's connection
    abruptly (as a SIGKILLed worker's kernel does) releases the claim."""
    machines = fleet.deploy(2)
    one, two = (m.target("bare_metal", m.access()) for m in machines)
    with claim_machines([one], "run R1 job node-holder", wait_s=30):
        started = time.monotonic()
        with claim_machines([two], "run R2 job other-node", wait_s=5):
            assert time.monotonic() - started < 5  # another machine: no wait
        with pytest.raises(MachineBusy, match="claimed by run R1 job node-holder"), \
                claim_machines([one], "run R3 job same-node", wait_s=2):
            pass
    with claim_machines([one], "run R4 job after", wait_s=10):  # released on leaving the block
        pass
    # A holder process SIGKILLed while it holds the node (a worker killed mid-job): its
    # connection dies with it, the node's sshd ends the session, and the claim is released.
    code = ("import sys,time; sys.path.insert(0, sys.argv[1]);"
            "from dlbench.execution.machine_lock import claim_machines;"
            "from dlbench.execution.targets import Target;"
            "t = Target.model_validate_json(sys.argv[2]);"
            "c = claim_machines([t], 'run R5 job killed-worker', wait_s=10); c.__enter__(); print('held', flush=True);"
            "time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(ROOT / "include"), one.model_dump_json()],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(MachineBusy, match="run R5 job killed-worker"), \
                claim_machines([one], "run R6 job blocked", wait_s=1):
            pass
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        started = time.monotonic()
        with claim_machines([one], "run R7 job after-kill", wait_s=30):
            took = time.monotonic() - started
    finally:
        proc.kill()
        proc.wait()
    assert took < 10, took
    print(f"node claim released {took:.1f} s after its holder was SIGKILLed")
    # A workload whose session is gone (run under REMOTE_HOLD, detached): the node stays busy
    # until it ends, then the claim goes through.
    from dlbench.execution.machine_lock import REMOTE_HOLD

    with machines[0].host() as host:
        status, out = host.run(["sh", "-c", 'setsid "$@" > /dev/null 2>&1 < /dev/null &', "sh", *REMOTE_HOLD,
                                "sleep", "6"], 30)
        assert status == 0, out
    with pytest.raises(MachineBusy, match="a workload still runs on it"), \
            claim_machines([one], "run R8 job next-to-orphan", wait_s=1):
        pass
    with claim_machines([one], "run R9 job after-orphan", wait_s=30) as waited:
        assert 1.0 <= waited <= 10, waited
