"""The one container launch: the same value creates the same container through the docker CLI
(what the SSH executor sends to a node) and through the SDK (the local executor)."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from dlbench.execution.container import (
    ContainerLaunch,
    Mount,
    Resources,
    container_name,
    server_launch,
    workload_launch,
)
from dlbench.execution.shell import command_line
from dlbench.execution.targets import LocalDocker, SSHDocker, Target
from dlbench.jobs import Job, job_id_for

EXPIRES = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)


def a_job(suite: str = "tf_cnn", **args) -> Job:
    args = args or {"model": "alexnet", "data": "real"}
    return Job(job_id=job_id_for("run/1", "container_on_bare_metal", suite, args, 0), run_id="run/1",
               platform="container_on_bare_metal", suite=suite, command="tf-cnn" if suite == "tf_cnn" else suite,
               args=args, profile="smoke")


def targets(image: str) -> list[Target]:
    ssh = SSHDocker(address="198.18.1.2", key_path="/k", image=image)
    return [Target(name=n, platform="container_on_bare_metal", access=a, expires_at=EXPIRES, data_dir="/data/in")
            for n, a in (("local", LocalDocker(image=image)), ("node", ssh))]


def test_both_executors_get_the_same_launch():
    job = a_job()
    local, remote = (workload_launch(job, t, "/res", t.data_dir, "1000:1000") for t in targets("img:1"))
    assert local == remote
    assert local.name == container_name(job) == f"dlbench-run-1-{job.job_id[:12]}"
    assert local.labels == {"dlbench": "1", "dlbench.run_id": "run/1", "dlbench.job_id": job.job_id,
                            "dlbench.expires_at": EXPIRES.isoformat()}
    assert local.user == "1000:1000" and local.env["HOME"] == "/tmp"
    assert local.mounts == (Mount("/res", "/results"), Mount("/data/in", "/data", read_only=True))
    assert local.command[:3] == ("python", "-m", "dlbench.workloads") and "/data" in local.command
    disk = workload_launch(a_job("disk", size="1"), targets("img:1")[0], "/res", "/data/in", None)
    assert disk.mounts[1].read_only is False  # the disk suite writes its scratch files there


def test_cli_argv_is_quoted_and_complete():
    launch = ContainerLaunch(image="img:1", name="n", command=("python", "-c", "print('$(x)')"),
                             labels={"a": "b c"}, env={"K": "v; rm -rf /"}, user="1:2",
                             mounts=(Mount("/s", "/t", True),), resources=Resources(2, "1g", "all", "host"),
                             ports=(("", 5201, 5201),))
    argv = launch.cli_argv("docker")
    assert argv[:3] == ["docker", "run", "-d"] and argv[-4:] == ["img:1", "python", "-c", "print('$(x)')"]
    for pair in (["--label", "a=b c"], ["-e", "K=v; rm -rf /"], ["--user", "1:2"], ["-v", "/s:/t:ro"],
                 ["--cpus", "2"], ["--memory", "1g"], ["--gpus", "all"], ["--network", "host"],
                 ["-p", "5201:5201/tcp"]):
        assert any(argv[i:i + 2] == pair for i in range(len(argv))), pair
    assert "'K=v; rm -rf /'" in command_line(argv)
    with pytest.raises(ValueError):
        Mount("/a:b", "/t")
    with pytest.raises(ValueError):
        ContainerLaunch(image="--privileged", name="n", command=())
    with pytest.raises(ValueError):
        Resources(gpus="many")


def create_via_cli_and_sdk(docker_client, created: list, launch_for) -> tuple[dict, dict]:
    """Create (not start) the container of ``launch_for("cli")`` with the docker CLI argv and of
    ``launch_for("sdk")`` with the SDK kwargs; both are appended to ``created`` for removal.
    Returns their inspect attributes (cli, sdk)."""
    for how in ("cli", "sdk"):
        launch = launch_for(how)
        if how == "cli":
            argv = launch.cli_argv()
            argv[1:3] = ["create"]
            subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)
            created.append(docker_client.containers.get(launch.name))
        else:
            kwargs = launch.sdk_kwargs()
            kwargs.pop("detach")
            created.append(docker_client.containers.create(**kwargs))
    cli, sdk = (c.attrs for c in created[-2:])
    return cli, sdk


def test_cli_and_sdk_create_the_same_container(docker_client, workload_image):
    job = a_job()
    base = workload_launch(job, targets(workload_image)[0], "/tmp", "/tmp", "4242:4242",
                           resources=Resources(cpus=1.5, memory="256m", network="bridge"))
    expires = datetime.now(UTC) + timedelta(minutes=5)
    created = []
    try:
        cli, sdk = create_via_cli_and_sdk(docker_client, created, lambda how: ContainerLaunch(**{
            **base.__dict__, "name": f"{base.name}-{how}", "command": ("sleep", "1"),
            "labels": {**base.labels, "dlbench.expires_at": expires.isoformat()}}))
        for key in ("User", "Env", "Labels", "Image", "Cmd"):
            assert cli["Config"][key] == sdk["Config"][key] or key == "Env" and set(cli["Config"][key]) == set(
                sdk["Config"][key]), key
        # The docker CLI collects -v options in a map: the engine receives the binds in any order.
        assert sorted(cli["HostConfig"]["Binds"]) == sorted(sdk["HostConfig"]["Binds"])
        assert len(cli["HostConfig"]["Binds"]) == 2
        for key in ("NanoCpus", "Memory", "NetworkMode"):
            assert cli["HostConfig"][key] == sdk["HostConfig"][key], key
        assert cli["Config"]["User"] == "4242:4242" and cli["HostConfig"]["NanoCpus"] == 1_500_000_000
    finally:
        for container in created:
            container.remove(force=True)


def test_server_launch_publishes_both_ports_and_is_labelled():
    launch = server_launch(targets("img:1")[1], "run/1", 5201, "0:0")
    assert launch.ports == (("", 5201, 5201), ("", 5202, 5202))
    assert launch.labels["dlbench.run_id"] == "run/1" and launch.labels["dlbench.expires_at"] == EXPIRES.isoformat()
    assert "net-serve" in launch.command and launch.command[-4:] == ("--bind", "0.0.0.0", "--port", "5201")
