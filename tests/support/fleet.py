"""Nodes a test deploys itself through the devcloud's real Ironic (the execution and Kubernetes
tiers), deliberately with raw openstacksdk (``conn.baremetal``), not dlbench's provisioning code:
those tests are about starting workloads on a machine and bringing results back, and must not
depend on how the pipeline provisions. A :class:`Fleet` allocates nodes, deploys them with a
config drive carrying a fresh key of the test, waits until SSH with that key works, and at the end
undeploys them, deletes its allocations and checks that the nodes it used are clean again
(available, no allocation or instance, not in maintenance, no ``dlbench*`` tags).

Images: ``stock`` (the devcloud's Debian image: python3 and sshd, nothing of dlbench) or
``dlbench-node`` (the project's node image, ``make node-image``). While the devcloud's nodes
still share this machine's filesystem (before real machines), :attr:`Machine.shared_fs` says so
and tests keep what they write on "the node" out of the controller's way."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.devcloud import ENDPOINT, NODE_IMAGE, STOCK_IMAGE, api_answers, wait_until
from tests.support.ironic import CLOUD, CLOUDS_FILE, RESOURCE_CLASS
from tests.support.prereqs import ROOT, require

PLACEHOLDER = Path(tempfile.gettempdir()) / "dlbench-execution-test-image.raw"
"""Any other file boots the stock image (Ironic only checks that a file:// source exists)."""


@pytest.fixture(scope="session")
def conn() -> Any:
    require(Path(CLOUDS_FILE).exists() and api_answers(),
            f"no devcloud (Ironic at {ENDPOINT}, {CLOUDS_FILE}): run `make devcloud-up`")
    import openstack

    os.environ["OS_CLIENT_CONFIG_FILE"] = CLOUDS_FILE
    connection = openstack.connect(cloud=CLOUD)
    nodes = list(connection.baremetal.nodes(resource_class=RESOURCE_CLASS))
    require(len(nodes) >= 2, f"the devcloud has {len(nodes)} node(s) in {RESOURCE_CLASS}; this tier needs 2 "
                             "(DEVCLOUD_NODES, DEVCLOUD_SECOND_POOL: docs/devcloud.md)")
    return connection


def image_source(image: str) -> str:
    if image == "dlbench-node":
        require(NODE_IMAGE.exists(), f"no dlbench-node image at {NODE_IMAGE} (run `make node-image`)")
        return f"file://{NODE_IMAGE}"
    if STOCK_IMAGE.exists():
        return f"file://{STOCK_IMAGE}"
    if not PLACEHOLDER.exists():
        PLACEHOLDER.write_bytes(b"\0" * 4096)
    return f"file://{PLACEHOLDER}"


@dataclass
class Machine:
    """A deployed node as the tests reach it."""

    node_id: str
    name: str
    allocation_id: str
    address: str
    key_path: str
    known_hosts: str
    image: str
    shared_fs: bool = False

    def access(self, **fields: Any) -> Any:
        from dlbench.execution.targets import SSHHost

        return SSHHost(address=self.address, key_path=self.key_path, known_hosts=self.known_hosts, **fields)

    def docker_access(self, image: str, **fields: Any) -> Any:
        from dlbench.execution.targets import SSHDocker

        return SSHDocker(address=self.address, key_path=self.key_path, known_hosts=self.known_hosts, image=image,
                         **fields)

    def host(self) -> Any:
        from dlbench.execution.transport import RemoteHost

        return RemoteHost(self.address, key_path=self.key_path, known_hosts=self.known_hosts)

    def target(self, platform: str, access: Any, **fields: Any) -> Any:
        from dlbench.execution.targets import Target

        return Target(name=self.name, platform=platform, access=access, instance_id=self.node_id,
                      address=self.address, **fields)

    def prefix(self) -> str:
        """Where prepare installs: /opt/dlbench on a machine of its own; a private directory while
        the nodes share this machine's filesystem (never the controller's /opt/dlbench)."""
        return f"/tmp/dlbench-prep-{self.name}-{uuid.uuid4().hex[:6]}" if self.shared_fs else "/opt/dlbench"


class Fleet:
    """Nodes deployed by one test (or module); :meth:`release` leaves them as found."""

    def __init__(self, conn: Any, workdir: Path) -> None:
        self.conn = conn
        self.workdir = workdir
        self.machines: list[Machine] = []
        self.allocations: list[str] = []
        self.lock = threading.Lock()

    def deploy(self, count: int = 1, image: str = "stock", timeout: float = 120) -> list[Machine]:
        source = image_source(image)
        key = self.workdir / f"key-{uuid.uuid4().hex[:6]}"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dlbench-exec-test", "-f", str(key)],
                       check=True)
        public = key.with_suffix(".pub").read_text().strip()
        known_hosts = str(self.workdir / "known_hosts")
        allocs = [self._allocate(timeout) for _ in range(count)]
        nodes = []
        for alloc in allocs:
            node = self.conn.baremetal.get_node(alloc.node_id)
            self.conn.baremetal.update_node(node.id, instance_info={"image_source": source, "root_gb": 10})
            drive = {"meta_data": {"public_keys": {"test": public}, "uuid": node.id, "name": node.name},
                     "user_data": "#cloud-config\n# dlbench execution test\n"}
            self.conn.baremetal.set_node_provision_state(node.id, "active", config_drive=drive)
            nodes.append(node)
        machines = []
        for node in nodes:
            done = wait_until(f"{node.name} active", lambda n=node: (
                x := self.conn.baremetal.get_node(n.id)).provision_state in ("active", "deploy failed") and x, timeout)
            assert done.provision_state == "active", f"{node.name}: {done.last_error}"
            machine = Machine(node.id, node.name, done.allocation_id or "", node.extra["test_host_address"],
                              str(key), known_hosts, image)
            with self.lock:
                self.machines.append(machine)
            machines.append(machine)
        from dlbench.execution.transport import wait_reachable

        probe = Path(tempfile.mkdtemp(prefix="dlbench-fs-probe-"))
        try:
            for machine in machines:
                wait_reachable(machine.address, "root", machine.key_path, 90, 0.3, machine.known_hosts)
                with machine.host() as host:
                    machine.shared_fs = host.run(["test", "-d", str(probe)], 30)[0] == 0
        finally:
            probe.rmdir()
        return machines

    def _allocate(self, timeout: float) -> Any:
        """An allocation (retried while every node is busy: other tiers share the devcloud)."""
        deadline = time.monotonic() + timeout
        while True:
            alloc = self.conn.baremetal.create_allocation(name=f"dlbench-exec-test-{uuid.uuid4().hex[:8]}",
                                                          resource_class=RESOURCE_CLASS)
            with self.lock:
                self.allocations.append(alloc.id)
            alloc = wait_until("allocation", lambda a=alloc: (x := self.conn.baremetal.get_allocation(a.id)).state
                               in ("active", "error") and x, 30)
            if alloc.state == "active":
                return alloc
            self.conn.baremetal.delete_allocation(alloc.id, ignore_missing=True)
            assert time.monotonic() < deadline, f"no node could be allocated: {alloc.last_error}"
            time.sleep(2)

    def release(self) -> None:
        """Undeploy and free what this fleet took. Retried for a while: the devcloud's API may be
        restarting under us (other tiers restart it), and a node must never be left deployed."""
        deadline = time.monotonic() + 180
        while True:
            try:
                self._release_once()
                break
            except Exception:  # noqa: BLE001 - API down for a moment: try again until the deadline
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)
        assert not self.leaks(), self.leaks()

    def _release_once(self) -> None:
        for machine in self.machines:
            node = self.conn.baremetal.get_node(machine.node_id)
            if node.provision_state in ("active", "deploy failed", "wait call-back"):
                self.conn.baremetal.set_node_provision_state(machine.node_id, "deleted")
        for machine in self.machines:
            wait_until(f"{machine.name} available", lambda m=machine: self.conn.baremetal.get_node(
                m.node_id).provision_state == "available", 120)
        for alloc in self.allocations:
            self.conn.baremetal.delete_allocation(alloc, ignore_missing=True)

    def leaks(self) -> list[str]:
        """What this fleet left behind. Other tiers share the devcloud: a node that another test
        allocated right after we released it is theirs, not a leak of ours."""
        found = []
        mine = set(self.allocations)
        found += [f"allocation {a.id}" for a in self.conn.baremetal.allocations() if a.id in mine]
        for machine in self.machines:
            node = self.conn.baremetal.get_node(machine.node_id)
            if node.allocation_id and node.allocation_id not in mine:
                continue  # taken by someone else since
            if node.provision_state != "available" or node.is_maintenance or node.allocation_id or node.instance_id:
                found.append(f"{node.name}: {node.provision_state} maintenance={node.is_maintenance} "
                             f"allocation={node.allocation_id} instance={node.instance_id}")
            tags = sorted(k for k in (node.extra or {}) if k.startswith("dlbench"))
            if tags:
                found.append(f"{node.name} tagged {tags}")
        return found


def controller_python_access(machine: Machine) -> dict[str, str]:
    """While the nodes share this filesystem, the controller's own venv runs on them."""
    return {"python": sys.executable, "pythonpath": str(ROOT / "include")}


def job(run_id: str, suite: str = "tf_cnn", command: str = "tf-cnn", platform: str = "bare_metal",
        **args: Any) -> Any:
    from dlbench.jobs import Job, job_id_for

    if suite == "tf_cnn":
        args = {"model": "alexnet", "data": "synthetic", **args}
    return Job(job_id=job_id_for(run_id, platform, suite, args, 0), run_id=run_id, platform=platform, suite=suite,
               command=command, args=args, profile="smoke")
