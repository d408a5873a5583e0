"""A deployed devcloud node is a machine that shares nothing with the controller (docs/devcloud.md):
its own root filesystem from the deployed image, hostname, /tmp, processes, SSH host keys and,
with the dlbench-node image, its own Docker engine; nodes reach each other through the host;
undeploy wipes the disk. All real: Ironic deploys, the node agent boots, ssh checks."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.devcloud import (
    NODE_IMAGE,
    STATE,
    STOCK_IMAGE,
    allocate,
    deploy,
    host_key,
    image,
    key_drive,
    node_index,
    node_status,
    release,
    ssh,
    ssh_ok,
    wait_state,
    wait_until,
)
from tests.support.prereqs import require


@pytest.fixture(scope="module", autouse=True)
def stock_image_built() -> None:
    require(STOCK_IMAGE.exists(), f"no stock image {STOCK_IMAGE}: run `make devcloud-images`")


@contextmanager
def deployed(conn: Any, key: Path, count: int = 1, image_source: str | None = None,
             tag: str = "machines") -> Iterator[list[Any]]:
    """``count`` nodes allocated and deployed with ``key``; released (undeployed) afterwards."""
    allocs = []
    try:
        for k in range(count):
            alloc = allocate(conn, f"devcloud-infra-{tag}-{k}")
            allocs.append(alloc)
            assert alloc.state == "active", alloc.last_error
        for alloc in allocs:
            conn.baremetal.update_node(alloc.node_id, instance_info={"image_source": image_source or image(),
                                                                      "root_gb": 10})
            conn.baremetal.set_node_provision_state(alloc.node_id, "active", config_drive=key_drive(key))
        nodes = [wait_state(conn, a.node_id, {"active", "deploy failed"}) for a in allocs]
        assert all(n.provision_state == "active" for n in nodes), [n.last_error for n in nodes]
        yield nodes
    finally:
        errors = []
        for alloc in allocs:  # every one, also an allocation that failed, even if one release fails
            try:
                release(conn, alloc.node_id, alloc)
            except Exception as exc:  # noqa: BLE001 - re-raised below, after the others are released
                errors.append(exc)
        if errors:
            raise errors[0]


def addr(node: Any) -> str:
    return node.extra["test_host_address"]


def test_stock_node_sees_only_its_own_filesystem(conn, keypair):
    key = keypair("stock")
    marker = Path("/tmp") / f"devcloud-infra-{uuid.uuid4().hex}"
    marker.write_text("the controller's /tmp\n")
    node_file = f"devcloud-infra-node-{uuid.uuid4().hex}"
    try:
        with deployed(conn, key, tag="stock") as (node,):
            out = ssh_ok(addr(node), key, f"""
                hostname
                test -e /work && echo SEES-WORK
                test -e /work/main/.venv/bin/python && echo SEES-CONTROLLER-PYTHON
                test -e /var/run/docker.sock && echo SEES-DOCKER-SOCKET
                test -e {marker} && echo SEES-CONTROLLER-TMP
                command -v docker dockerd && echo HAS-DOCKER
                test -e /etc/dlbench && echo HAS-DLBENCH-MARKER
                python3 -c 'import sys; print("python %d.%d" % sys.version_info[:2])'
                python3 -c 'import dlbench' 2>/dev/null && echo IMPORTS-DLBENCH
                echo "pid1 $(tr '\\0' ' ' </proc/1/cmdline)"
                echo "processes $(ps -e --no-headers | wc -l)"
                ps -e -o comm= | grep -qE '^(ironic|postgres|dockerd|containerd)' && echo SEES-CONTROLLER-PROCESSES
                echo "root $(stat -f -c %T /)"
                . /etc/os-release; echo "os $VERSION_CODENAME"
                echo on-the-node >/tmp/{node_file}
            """).stdout
            lines = out.splitlines()
            assert lines[0] == node.name  # no hostname in the drive: the node's name
            assert not re.search(r"SEES-|HAS-|IMPORTS-", out), out
            assert "python 3.11" in lines and "os bookworm" in lines and "root overlayfs" in lines, out
            assert "/run/devcloud/init.py" in out and int(re.search(r"processes (\d+)", out)[1]) < 15, out
            assert not (Path("/tmp") / node_file).exists()  # and the node's /tmp is not the controller's
            status = node_status(node.name)
            assert (status["machine"], status["image"], status["sshd"], status["dockerd"]) == \
                ("up", "stock", "up", "-"), status
    finally:
        marker.unlink()


def test_nodes_have_their_own_host_keys_and_reach_each_other(conn, keypair):
    key = keypair("pair")
    with deployed(conn, key, count=2, tag="pair") as (one, two):
        for node in (one, two):
            ssh_ok(addr(node), key)
        assert host_key(addr(one)) != host_key(addr(two))
        # node 1 -> node 2 through the host (each node's default route is its 198.18.<i>.1)
        other = addr(two)
        banner = ssh(addr(one), key, f"python3 -c \"import socket; s = socket.create_connection(('{other}', 22), 5); "
                     f"print(s.recv(64).decode().strip())\"; ping -c 1 -W 2 {other} >/dev/null && echo PING-OK")
        assert banner.returncode == 0, banner.stderr
        assert banner.stdout.startswith("SSH-2.0-OpenSSH") and "PING-OK" in banner.stdout, banner.stdout


def test_undeploy_wipes_the_disk_and_a_redeploy_is_a_new_machine(conn, keypair):
    key = keypair("wipe")
    alloc = allocate(conn, "devcloud-infra-wipe")
    node_id = alloc.node_id
    try:
        node = deploy(conn, node_id, key_drive(key))
        i, address = node_index(node), addr(node)
        ssh_ok(address, key, "echo written-on-the-node >/root/wipe-me && mkdir -p /var/lib/x && touch /var/lib/x/y")
        first_key = host_key(address)
        disk = STATE / "nodes" / str(i) / "disk"
        assert (disk / "upper" / "root" / "wipe-me").read_text() == "written-on-the-node\n"  # the node's disk
        conn.baremetal.set_node_provision_state(node_id, "deleted")
        wait_state(conn, node_id, {"available"})
        wait_until("machine stopped and disk wiped",
                   lambda: not disk.exists() and node_status(node.name)["machine"] == "down", 15)
        assert ssh(address, key).returncode == 255  # nothing answers on an undeployed node
        assert deploy(conn, node_id, key_drive(key)).provision_state == "active"
        again = ssh_ok(address, key, "test -e /root/wipe-me && echo STILL-THERE; test -e /var/lib/x && "
                       "echo STILL-THERE; echo fresh").stdout
        assert again.strip() == "fresh", again
        assert host_key(address) != first_key  # a new machine generates new host keys
    finally:
        release(conn, node_id, alloc)


def mini_image(address: str, key: Path) -> None:
    """A tiny image (bash + iperf3 and their libraries) imported into the node's own engine
    (the node has no registry, like the devcloud itself)."""
    res = ssh(address, key, """set -e
        rm -rf /tmp/mini && mkdir -p /tmp/mini/tmp && chmod 1777 /tmp/mini/tmp
        for b in /bin/bash /usr/bin/iperf3; do
          cp --parents "$b" /tmp/mini
          ldd "$b" | grep -o '/[^ ]*' | xargs -I{} cp --parents -L {} /tmp/mini
        done
        tar -C /tmp/mini -c . | docker import - devcloud-mini:latest >/dev/null
    """, timeout=60)
    assert res.returncode == 0, res.stderr


def iperf_bps(output: str) -> float:
    """Received bits/s of an ``iperf3 -J`` client run (its error when it failed)."""
    result = json.loads(output)
    assert not result.get("error"), result["error"]
    return result["end"]["sum_received"]["bits_per_second"]


def docker_id(run: Callable[[str], subprocess.CompletedProcess[str]]) -> str:
    res = run("docker info --format '{{.ID}}'")
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_node_image_has_its_marker_its_own_engine_and_a_shaped_network(conn, keypair):
    require(NODE_IMAGE.exists(), f"no node image {NODE_IMAGE}: run `make node-image`")
    key = keypair("node-image")
    with deployed(conn, key, count=2, image_source=image(NODE_IMAGE), tag="node-image") as (one, two):
        a, b = addr(one), addr(two)
        marker = json.loads(ssh_ok(a, key, "cat /etc/dlbench/node-image.json").stdout)
        assert marker["image"] == "dlbench-node" and re.fullmatch(r"[0-9a-f]{16}", marker["context"]), marker
        assert (marker["python"], marker["pythonpath"]) == ("/opt/dlbench/venv/bin/python", "/opt/dlbench/include")
        tools = ssh(a, key, f"PYTHONPATH={marker['pythonpath']} {marker['python']} -c 'import dlbench.workloads' && "
                    "test -x /opt/dlbench/bin/dlbench-hpcg && fio --version && iperf3 --version && hpcc -h; "
                    "echo rc=$?", timeout=60)
        assert "fio-" in tools.stdout and "iperf 3" in tools.stdout, tools.stdout + tools.stderr
        # Its own engine: ready within seconds of the boot, another ID than the controller's and
        # the other node's, its own (empty) containers, its data root on the node's disk.
        for node in (one, two):
            wait_until(f"dockerd on {node.name}", lambda n=node: ssh(addr(n), key, "docker info").returncode == 0, 30)
            status = node_status(node.name)
            assert (status["machine"], status["image"], status["sshd"], status["dockerd"]) == \
                ("up", "dlbench-node", "up", "up"), status
        ids = {docker_id(lambda c: ssh(a, key, c)), docker_id(lambda c: ssh(b, key, c))}
        assert len(ids) == 2
        if shutil.which("docker") and subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
            controller = subprocess.run(["docker", "info", "--format", "{{.ID}}"], capture_output=True, text=True)
            assert controller.stdout.strip() not in ids
        info = ssh(a, key, "docker info --format '{{.Name}} {{.DockerRootDir}} {{.CgroupDriver}} {{.Containers}}'; "
                   "docker ps -aq | wc -l; ip -br addr show docker0").stdout.split()
        assert info[:5] == [one.name, "/var/lib/docker", "cgroupfs", "0", "0"], info
        assert f"198.19.{node_index(one)}.1/24" in info
        assert (STATE / "nodes" / str(node_index(one)) / "docker" / "overlay2").is_dir()
        # A container on node 1 reaches a port published by node 2's engine (Docker's NAT in each
        # node's namespace, forwarding through the host), over the 1 Gbit/s shaped links.
        for address in (a, b):
            mini_image(address, key)
        server = ssh(b, key, "docker run -d --name iperf -p 5201:5201 devcloud-mini /usr/bin/iperf3 -s -1")
        assert server.returncode == 0, server.stderr
        client = ssh(a, key, f"docker run --rm devcloud-mini /usr/bin/iperf3 -c {b} -t 2 -J", timeout=60)
        assert client.returncode == 0, client.stdout[-500:] + client.stderr
        container_bps = iperf_bps(client.stdout)
        # node 1 -> node 2 directly (iperf3 of the image on both nodes)
        ssh(b, key, "iperf3 -s -D -1 -p 5202")
        direct = ssh(a, key, f"iperf3 -c {b} -p 5202 -t 3 -J", timeout=60)
        assert direct.returncode == 0, direct.stdout[-500:] + direct.stderr
        bps = iperf_bps(direct.stdout)
        print(f"node -> node: {bps / 1e6:.0f} Mbit/s; container -> other node's published port: "
              f"{container_bps / 1e6:.0f} Mbit/s")
        assert 50e6 < bps < 1.05e9 and 50e6 < container_bps < 1.05e9, (bps, container_bps)
    wait_until("node engines' data wiped", lambda: not any(
        (STATE / "nodes" / str(node_index(n)) / "docker").exists() for n in (one, two)), 30)


def shared_layer_files(store: Path, count: int = 40) -> list[Path]:
    """Up to ``count`` regular files of the image layers' contents in a node's Docker store."""
    found: list[Path] = []
    for layer in sorted((store / "overlay2").iterdir()):
        for dirpath, _, filenames in os.walk(layer / "diff"):
            found += [p for p in (Path(dirpath) / f for f in filenames) if p.is_file() and not p.is_symlink()]
            if len(found) >= count:
                return found[:count]
    return found


def test_node_image_carries_the_workload_image_in_each_nodes_own_store(conn, keypair, workload_image):
    """The node image's pre-loaded workload image (docs/node-image.md) is in every freshly
    deployed node's own engine: the marker names it, the engine has that id and workload context
    (the controller's, so the prepare stage moves nothing). The layers' files are shared with the
    image's extracted copy like a copy-on-write disk's base (hard links, never written), the
    engine's metadata is the node's own; a container's write, and `docker rmi`, on one node leave
    the other node's image as it was."""
    require(NODE_IMAGE.exists(), f"no node image {NODE_IMAGE}: run `make node-image`")
    from dlbench.execution.prepare import local_image_context

    key = keypair("preloaded")
    with deployed(conn, key, count=2, image_source=image(NODE_IMAGE), tag="preloaded") as (one, two):
        a, b = addr(one), addr(two)
        marker = json.loads(ssh_ok(a, key, "cat /etc/dlbench/node-image.json").stdout)
        (carried,) = marker["docker_images"]
        assert carried["image"] == workload_image, marker
        assert carried["context"] == local_image_context(workload_image), (carried, "node image older than the tree")
        fmt = '{{.Id}} {{index .Config.Labels "dlbench.context"}}'
        for address in (a, b):
            wait_until(f"dockerd on {address}", lambda x=address: ssh(x, key, "docker info").returncode == 0, 30)
            found = ssh_ok(address, key, f"docker image inspect --format '{fmt}' {workload_image}").stdout.split()
            assert found == [carried["id"], carried["context"]], found
        stores = [STATE / "nodes" / str(node_index(n)) / "docker" for n in (one, two)]
        seeded = json.loads((STATE / "nodes" / str(node_index(one)) / "machine.json").read_text())
        print(f"node store seeded in {seeded['docker_seed_s']} s")
        for store in stores:
            assert (store / "image" / "overlay2" / "repositories.json").stat().st_nlink == 1
        layers = shared_layer_files(stores[0])
        assert layers and all(p.stat().st_nlink >= 3 for p in layers), [(p, p.stat().st_nlink) for p in layers]
        lower = Path(seeded["lower"]) / "var" / "lib" / "docker"
        originals = {p.relative_to(stores[0]): p.read_bytes() for p in layers}
        # A container's write lands in its own layer: the other node, and the image, see the original.
        def run(address: str, command: str) -> str:
            res = ssh(address, key, command, timeout=120)
            assert res.returncode == 0, (command, res.stdout[-500:], res.stderr[-500:])
            return res.stdout

        before = run(b, f"docker run --rm --entrypoint cat {workload_image} /etc/debian_version")
        run(a, f"docker run --rm --entrypoint /bin/sh {workload_image} -c 'echo changed-by-a > /etc/debian_version'")
        after = run(b, f"docker run --rm --entrypoint cat {workload_image} /etc/debian_version")
        assert after == before and "changed-by-a" not in after, (before, after)
        # Removing the image on one node unlinks that node's names only.
        run(a, f"docker image rm -f {workload_image}")
        assert ssh(a, key, f"docker image inspect {workload_image}").returncode != 0
        assert run(b, f"docker image inspect --format '{fmt}' {workload_image}").split() == found
        assert all((lower / rel).read_bytes() == data for rel, data in originals.items())
        assert all((stores[1] / rel).read_bytes() == data for rel, data in originals.items())
