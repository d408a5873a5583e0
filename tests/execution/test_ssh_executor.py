"""SSHExecutor on a real node: the workload image on the node's own engine (and the image loaded
into it when it lacks it), containers gone after success, failure and timeout; the host runtime
with its process group killed on timeout. Results come back over SFTP; nothing stays behind."""

from __future__ import annotations

from dlbench.execution.image import DEFAULT_TAG
from dlbench.execution.prepare import local_image_context, prepare, remote_image_context
from dlbench.execution.ssh import SSHExecutor
from dlbench.workloads.result import ResultDocument, Status
from tests.support.fleet import NODE_IMAGE, controller_python_access, job
from tests.support.prereqs import require


def engine_image() -> str:
    """Nodes with an engine: the dlbench-node image when built, else the stock one (which has an
    engine only while the devcloud nodes share this machine's filesystem and Docker socket)."""
    return "dlbench-node" if NODE_IMAGE.exists() else "stock"


def containers_of(machine, run_id: str) -> list[str]:
    with machine.host() as host:
        status, out = host.run(["docker", "ps", "-a", "--format", "{{.Names}}", "--filter",
                                f"label=dlbench.run_id={run_id}"], 60)
    assert status == 0, out
    return out.split()


def no_job_dirs(machine) -> list[str]:
    with machine.host() as host:
        _, out = host.run(["sh", "-c", "ls -d /tmp/dlbench-job-* 2>/dev/null; true"], 30)
    return out.split()


def test_docker_job_succeeds_and_its_container_is_gone(engine_node, run_id, tmp_path):
    machine, _ = engine_node
    target = machine.target("container_on_bare_metal", machine.docker_access(DEFAULT_TAG))
    one = job(run_id, platform="container_on_bare_metal")
    doc = SSHExecutor().execute(one, target, tmp_path / "r.json", timeout=300)
    assert doc.status is Status.OK, doc.error
    assert doc.environment.container.inside and doc.environment.container.runtime == "docker"
    assert doc.sample("throughput").value > 0
    assert doc.sample("launch_to_end_time").value > doc.sample("elapsed_time").value
    assert ResultDocument.read(tmp_path / "r.json").job_id == one.job_id
    assert containers_of(machine, run_id) == []
    assert f"/tmp/dlbench-job-{one.job_id}" not in no_job_dirs(machine)


def test_docker_job_timing_out_leaves_no_container(engine_node, run_id, tmp_path):
    machine, _ = engine_node
    target = machine.target("container_on_bare_metal", machine.docker_access(DEFAULT_TAG))
    slow = job(run_id, platform="container_on_bare_metal", model="inception3")
    doc = SSHExecutor().execute(slow, target, tmp_path / "r.json", timeout=4)
    assert doc.status is Status.FAILED and "timed out after 4 s" in doc.error, doc.error
    assert containers_of(machine, run_id) == []
    assert ResultDocument.read(tmp_path / "r.json").status is Status.FAILED


def test_docker_job_failing_is_a_document_and_no_container(engine_node, run_id, tmp_path):
    machine, _ = engine_node
    target = machine.target("container_on_bare_metal", machine.docker_access(DEFAULT_TAG))
    doc = SSHExecutor().execute(job(run_id, platform="container_on_bare_metal", model="vgg16"), target,
                                tmp_path / "r.json", timeout=300)
    assert doc.status is Status.FAILED and "exited with status 2" in doc.error and "vgg16" in doc.error, doc.error
    assert containers_of(machine, run_id) == []
    missing = machine.target("container_on_bare_metal", machine.docker_access("dlbench-no-such-image:0"))
    doc = SSHExecutor().execute(job(run_id, platform="container_on_bare_metal"), missing, tmp_path / "m.json",
                                timeout=60)
    assert doc.status is Status.FAILED and "could not start the workload container" in doc.error, doc.error
    assert containers_of(machine, run_id) == []


def test_image_is_loaded_into_a_node_engine_that_lacks_it(engine_node, workload_image, capsys):
    """docker save | docker load over SSH, verified by the dlbench.context label; then a no-op."""
    machine, first = engine_node
    import subprocess

    local_id = subprocess.run(["docker", "info", "--format", "{{.ID}}"], capture_output=True, text=True,
                              check=True).stdout.strip()
    require(first.engine_id != local_id,
            "the devcloud node's engine is this machine's own Docker engine (the nodes share its filesystem "
            "and socket), so there is no separate engine to load the image into: needs devcloud machines "
            "with their own dockerd (dlbench-node image)")
    with machine.host() as host:
        if any("loaded image" in a for a in first.actions):
            loaded = first
        else:  # the node's image already matched: remove it to prove the load path
            host.check(["docker", "image", "rm", "-f", workload_image], 300)
            loaded = prepare(host, host_runtime=False, docker_image=workload_image)
        assert any("loaded image" in a for a in loaded.actions), loaded.actions
        assert remote_image_context(host, workload_image) == local_image_context(workload_image)
        again = prepare(host, host_runtime=False, docker_image=workload_image)
    assert again.image_loaded and not again.actions
    with capsys.disabled():
        print(f"\nimage load: {loaded.timings.get('image_load')} s; second prepare {again.seconds} s")


def workload_access(machine) -> dict[str, str]:
    """How the host runtime reaches the workload package on a node that has it without a prepare."""
    if machine.image == "dlbench-node":
        return {"python": "/opt/dlbench/venv/bin/python", "pythonpath": "/opt/dlbench/include"}
    require(machine.shared_fs, "a stock node has no workload package: see test_prepare for the host runtime")
    return controller_python_access(machine)


def test_host_job_timing_out_kills_its_process_group(fleet, run_id, tmp_path):
    (machine,) = fleet.deploy(1, image=engine_image())
    target = machine.target("bare_metal", machine.access(**workload_access(machine)))
    slow = job(run_id, measured_steps=100000)  # cannot end by itself in 4 s on any machine
    doc = SSHExecutor().execute(slow, target, tmp_path / "r.json", timeout=4)
    assert doc.status is Status.FAILED and "timed out after 4 s" in doc.error, doc.error
    with machine.host() as host:
        _, out = host.run(["sh", "-c", 'pgrep -af -- "--job-id $1" || true', "sh", slow.job_id], 30)
    assert out.strip() == "", f"workload still running on the node: {out}"
    assert no_job_dirs(machine) == [] or f"/tmp/dlbench-job-{slow.job_id}" not in no_job_dirs(machine)
