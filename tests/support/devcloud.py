"""The devcloud as its own tests (and the tiers that drive its Ironic directly) reach it: its state
directory, images, endpoint and main pool; the devcloud CLI; allocate, deploy, release and SSH
helpers over raw openstacksdk (never dlbench's provisioning code)."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.prereqs import ROOT

STATE = ROOT / ".devcloud"
CLOUDS_FILE = STATE / "clouds.yaml"
SCRIPT = ROOT / "devcloud" / "devcloud.py"
STOCK_IMAGE = STATE / "images" / "stock.tar"
NODE_IMAGE = ROOT / "build" / "node-image" / "dlbench-node.tar.zst"
TEST_IMAGE = STATE / "tmp" / "devcloud-test-image.raw"
ENDPOINT = "http://127.0.0.1:6385"
MAIN_POOL_CLASS = "dlbench-bm"
"""The devcloud's main node pool (the devcloud stream's); the Kubernetes stream deploys in the second."""
SECOND_POOL_CLASS = "dlbench-bm-2"
POLL = 0.2


def api_answers() -> bool:
    try:
        with urllib.request.urlopen(f"{ENDPOINT}/v1", timeout=3) as resp:
            return resp.status == 200
    except OSError:
        return False


def devcloud(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``devcloud/devcloud.py`` (up, down, fault ...) and fail with its output if it fails
    (``check=False``: the caller judges the result)."""
    res = subprocess.run(["python3", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0 or not check, f"devcloud {' '.join(args)} failed:\n{res.stdout}{res.stderr}"
    return res


def node_status(name: str) -> dict[str, str]:
    """Node ``name``'s row of ``devcloud status`` (columns: provision, machine, image, sshd, dockerd...)."""
    lines = devcloud("status").stdout.splitlines()
    header = next(line for line in lines if line.startswith("node "))
    row = next(line for line in lines if line.split() and line.split()[0] == name)
    starts = [(m.group(), m.start()) for m in re.finditer(r"\S+", header)][:10]  # fixed-width columns
    return {col: row[start:(starts[k + 1][1] if k + 1 < len(starts) else None)].strip()
            for k, (col, start) in enumerate(starts)}


def wait_until(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    """Our own short polling (openstacksdk's waits poll every 2 s)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(POLL)


def node_index(node: Any) -> int:
    return int(node.name.rsplit("-", 1)[1])


def wait_state(conn: Any, node_id: str, states: set[str], timeout: float = 60) -> Any:
    return wait_until(f"node {node_id} in {states}",
                      lambda: (n := conn.baremetal.get_node(node_id)).provision_state in states and n, timeout)


def release(conn: Any, node_id: str | None, allocation: Any = None) -> None:
    """Undeploy (if deployed) and free: the devcloud is left as the tests found it."""
    if node_id:
        node = conn.baremetal.get_node(node_id)
        if node.provision_state in ("active", "deploy failed", "wait call-back", "deploying"):
            if node.provision_state == "deploying":
                node = wait_state(conn, node_id, {"active", "deploy failed", "wait call-back"})
            conn.baremetal.set_node_provision_state(node_id, "deleted")
        wait_state(conn, node_id, {"available"})
    if allocation is not None:
        conn.baremetal.delete_allocation(allocation, ignore_missing=True)


def image(path: Path | None = None) -> str:
    """A file:// image_source. Ironic checks that the file exists on this machine; the devcloud
    boots the image when it is one of its tarballs, else the stock image (a tiny file is fine)."""
    if path is None:
        if not TEST_IMAGE.exists():
            TEST_IMAGE.parent.mkdir(parents=True, exist_ok=True)
            TEST_IMAGE.write_bytes(b"\0" * 4096)
        path = TEST_IMAGE
    return f"file://{path}"


def allocate(conn: Any, name: str, traits: list[str] | None = None, wait_free: float = 300) -> Any:
    """An allocation (active, or error when no node matches). The devcloud is shared with other
    test runs: while every matching node is taken, wait up to ``wait_free`` s for one."""
    deadline = time.monotonic() + wait_free
    while True:
        alloc = conn.baremetal.create_allocation(name=name, resource_class=MAIN_POOL_CLASS, traits=traits or [])
        alloc = wait_until(f"allocation {name}", lambda a=alloc: (
            b := conn.baremetal.get_allocation(a.id)).state in ("active", "error") and b, 30)
        busy = re.search("no available nodes|no suitable nodes", alloc.last_error or "")
        if alloc.state == "active" or not busy or time.monotonic() > deadline:
            return alloc
        conn.baremetal.delete_allocation(alloc, ignore_missing=True)
        time.sleep(2)


def deploy(conn: Any, node_id: str, config_drive: Any, image_source: str | None = None) -> Any:
    conn.baremetal.update_node(node_id, instance_info={"image_source": image_source or image(), "root_gb": 10})
    conn.baremetal.set_node_provision_state(node_id, "active", config_drive=config_drive)
    node = wait_state(conn, node_id, {"active", "deploy failed"}, timeout=60)
    if node.provision_state == "deploy failed" and not node.last_error:
        # Ironic's timeout handler moves the node to ``deploy failed`` first and writes last_error
        # from a worker a moment later (the product re-reads it too: IronicProvider._late_last_error).
        node = wait_until(f"last_error of node {node_id}",
                          lambda: (n := conn.baremetal.get_node(node_id)).last_error and n, 15)
    return node


def key_drive(key: Path, **meta: Any) -> dict[str, Any]:
    """A config drive (dict form) installing ``key``'s public half."""
    return {"meta_data": {"public_keys": {"test": Path(f"{key}.pub").read_text().strip()}, **meta}}


SSH_READY_S = 60
"""How long a node may take from ``active`` to letting the key in: its first boot of an image
extracts it first (the node image: 7.8-9.8 s on an idle machine, over 20 s on CI's loaded one, stop
37's run W), the same allowance as the product's ``ssh_timeout`` in the Ironic tier."""


def ssh_ok(address: str, key: Path, command: str = "true",
           timeout: float = SSH_READY_S) -> subprocess.CompletedProcess[str]:
    """``command`` over SSH once the node lets the key in (a client retries on a real cloud too)."""
    return wait_until(f"ssh root@{address} {command!r}",
                      lambda: (r := ssh(address, key, command)).returncode == 0 and r, timeout)


def host_key(address: str) -> str:
    """The node's ed25519 SSH host key as ssh-keyscan sees it."""
    res = subprocess.run(["ssh-keyscan", "-T", "5", "-t", "ed25519", address], capture_output=True, text=True,
                         timeout=15)
    keys = [line.split(None, 1)[1] for line in res.stdout.splitlines() if line and not line.startswith("#")]
    assert keys, f"no host key from {address}: {res.stderr}"
    return keys[0]


def ssh(address: str, key: Path, command: str = "hostname", timeout: float = 5) -> subprocess.CompletedProcess[str]:
    """The plain OpenSSH client as a user would run it, key auth only."""
    return subprocess.run(
        ["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", f"ConnectTimeout={int(timeout)}",
         f"root@{address}", command], capture_output=True, text=True, timeout=timeout + 10)
