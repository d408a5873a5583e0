"""The devcloud keeps its contract (docs/devcloud.md), checked with raw openstacksdk and ssh:
nodes as enrolled, allocations, deploy -> the config drive's key opens the node's machine and no
other key does, undeploy closes it again, 1 Gbit/s links, and every fault knob really bites.
What a node's machine is (own filesystem, engine, network) is test_machines.py."""

from __future__ import annotations

import re
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.devcloud import (
    ENDPOINT,
    MAIN_POOL_CLASS,
    SECOND_POOL_CLASS,
    STATE,
    allocate,
    api_answers,
    deploy,
    devcloud,
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


def test_nodes_are_enrolled_as_the_contract_says(conn):
    # A node another test just released is still cleaning (Ironic's automated cleaning): wait for it.
    wait_until("no node of the main pool cleaning", lambda: not [
        n for n in conn.baremetal.nodes(details=True, resource_class=MAIN_POOL_CLASS)
        if n.provision_state in ("cleaning", "clean wait")], 120)
    nodes = sorted(conn.baremetal.nodes(details=True, resource_class=MAIN_POOL_CLASS), key=node_index)
    second = sorted(conn.baremetal.nodes(details=True, resource_class=SECOND_POOL_CLASS), key=node_index)
    # the main pool is nodes 1..N, the second pool (DEVCLOUD_SECOND_POOL, 2 by default) the next ones
    assert [node_index(n) for n in nodes] == list(range(1, len(nodes) + 1))
    assert [node_index(n) for n in second] == list(range(len(nodes) + 1, len(nodes) + len(second) + 1))
    assert len(second) >= 2, "make test's Kubernetes stream deploys two nodes of the second pool"
    for node in nodes + second:
        i = node_index(node)
        assert node.name == f"devcloud-node-{i}"
        assert (node.driver, node.boot_interface, node.power_interface) == ("fake-hardware", "fake", "fake")
        # The devcloud is shared (the Kubernetes stream deploys the second pool): skip nodes in use.
        if node.resource_class == MAIN_POOL_CLASS and not (node.allocation_id or node.instance_id):
            assert node.deploy_interface == "fake", node.name
            assert node.provision_state == "available" and node.power_state == "power off", node.name
            assert not node.is_maintenance, node.name
            assert (STATE / "nodes" / str(i) / "authorized_keys").read_text() == ""
            assert node_status(node.name)["machine"] == "down"  # an available node is a machine switched off
        assert node.extra["test_host_address"] == f"198.18.{i}.2"
        assert node.extra["devcloud_netns"] == node.name
        assert {"cpus", "memory_mb", "local_gb"} <= set(node.properties)
        assert "CUSTOM_DLBENCH_TEST" in node.traits
        assert ("CUSTOM_GPU_FAKE" in node.traits) == (i == 1)
        ports = list(conn.baremetal.ports(node_id=node.id))
        assert [p.address for p in ports] == [f"52:54:00:c6:12:{i:02x}"]


def test_allocation_picks_an_available_node_and_honours_traits(conn):
    available = {n.id for n in conn.baremetal.nodes(resource_class=MAIN_POOL_CLASS, provision_state="available")}
    plain = allocate(conn, "devcloud-infra-plain", ["CUSTOM_DLBENCH_TEST"])
    gpu = None
    try:
        assert plain.state == "active", plain.last_error
        assert plain.node_id in available
        if conn.baremetal.get_node(plain.node_id).name != "devcloud-node-1":
            gpu = allocate(conn, "devcloud-infra-gpu", ["CUSTOM_GPU_FAKE"])
            assert gpu.state == "active", gpu.last_error
            assert conn.baremetal.get_node(gpu.node_id).name == "devcloud-node-1"
    finally:
        for alloc in (plain, gpu):
            if alloc is not None:
                conn.baremetal.delete_allocation(alloc)


@pytest.mark.parametrize("drive_format", ["dict", "iso"])
def test_config_drive_key_opens_the_host_and_no_other_key_does(conn, keypair, drive_format):
    good, wrong = keypair("good"), keypair("wrong")
    public = Path(f"{good}.pub").read_text().strip()
    user_data = f"#cloud-config\n# devcloud infra test ({drive_format})\n"
    alloc = allocate(conn, f"devcloud-infra-{drive_format}")
    node_id = alloc.node_id
    try:
        node = conn.baremetal.get_node(node_id)
        i, address = node_index(node), node.extra["test_host_address"]
        keys_file = STATE / "nodes" / str(i) / "authorized_keys"
        assert ssh(address, good).returncode != 0, "a key works before any deploy"
        if drive_format == "dict":
            drive: Any = {"meta_data": {"public_keys": {"run": public}}, "user_data": user_data}
        else:
            from openstack.baremetal import configdrive

            drive = configdrive.build({"uuid": node_id, "public_keys": {"run": public},
                                       "hostname": f"devcloud-infra-{drive_format}"}, user_data=user_data.encode())
        node = deploy(conn, node_id, drive)
        assert node.provision_state == "active", node.last_error
        ok = wait_until("ssh with the config drive's key", lambda: (r := ssh(address, good, "hostname; "
                        "ip -br addr show; cat /proc/self/net/dev | wc -l")).returncode == 0 and r, 15)
        assert f"{address}/24" in ok.stdout  # the session runs inside node i's namespace
        # The machine's hostname: the drive's meta_data hostname, else the node's name.
        assert ok.stdout.split()[0] == (node.name if drive_format == "dict" else f"devcloud-infra-{drive_format}")
        denied = ssh(address, wrong)
        assert denied.returncode == 255 and "Permission denied" in denied.stderr
        assert keys_file.read_text().strip() == public  # the host's copy, for inspection
        assert ssh(address, good, "cat /root/.ssh/authorized_keys").stdout.strip() == public  # the machine's
        assert (STATE / "nodes" / str(i) / "user_data").read_text() == user_data
        conn.baremetal.set_node_provision_state(node_id, "deleted")
        wait_state(conn, node_id, {"available"})
        wait_until("authorized_keys emptied", lambda: keys_file.read_text() == "", 5)
        assert ssh(address, good).returncode == 255, "the run key still works after undeploy"
    finally:
        release(conn, node_id, alloc)


def test_links_are_shaped_to_1_gbit_on_both_ends(conn):
    for node in conn.baremetal.nodes(resource_class=MAIN_POOL_CLASS):
        i = node_index(node)
        inside = subprocess.run(["ip", "netns", "exec", node.name, "tc", "qdisc", "show", "dev", f"dc{i}n"],
                                capture_output=True, text=True, check=True).stdout
        outside = subprocess.run(["tc", "qdisc", "show", "dev", f"dc{i}h"],
                                 capture_output=True, text=True, check=True).stdout
        for shown in (inside, outside):
            assert re.search(r"qdisc tbf .* rate 1Gbit", shown), shown


def test_deploy_fail_knob_makes_ironic_fail_the_deploy(conn):
    alloc = allocate(conn, "devcloud-infra-deploy-fail")  # any free node (the devcloud is shared)
    node = conn.baremetal.get_node(alloc.node_id)
    i = str(node_index(node))
    devcloud("fault", "deploy-fail", i)
    try:
        failed = deploy(conn, node.id, {"meta_data": {"public_keys": {"k": "ssh-ed25519 AAAA never"}}})
        assert failed.provision_state == "deploy failed"
        assert "Timeout reached while waiting for callback" in failed.last_error
        assert (STATE / "nodes" / i / "authorized_keys").read_text() == ""
        assert node_status(node.name)["machine"] == "down"  # a failed deploy never boots
    finally:
        release(conn, node.id, alloc)
        devcloud("fault", "deploy-ok", i)
    assert conn.baremetal.get_node(node.id).deploy_interface == "fake"


def test_settle_knob_waits_for_every_cleaning_and_names_a_node_that_does_not_end(conn):
    """``settle``: what a test that stops Ironic waits for first (tests/turns.py). With clean-fail
    the node's cleaning waits in ``clean wait`` for ~10 s: a 1-s settle names it and fails, a
    plain one returns once the node is out of it (``clean failed``)."""
    alloc = allocate(conn, "devcloud-infra-settle")
    node = conn.baremetal.get_node(alloc.node_id)
    i = str(node_index(node))
    try:
        deploy(conn, node.id, {"meta_data": {"public_keys": {"k": "ssh-ed25519 AAAA never"}}})
        devcloud("fault", "clean-fail", i)
        conn.baremetal.set_node_provision_state(node.id, "deleted")
        wait_state(conn, node.id, {"clean wait"}, timeout=30)
        short = devcloud("fault", "settle", "1", check=False)
        assert short.returncode != 0 and f"{node.name} clean wait" in short.stderr, short
        devcloud("fault", "settle")
        assert conn.baremetal.get_node(node.id).provision_state == "clean failed"
    finally:
        devcloud("fault", "settle", timeout=300, check=False)
        devcloud("fault", "reset")  # manage, fake, provide: cleaned and available
        release(conn, node.id, alloc)
    assert conn.baremetal.get_node(node.id).provision_state == "available"


def test_ssh_and_link_knobs_make_the_node_unreachable(conn, keypair):
    """ssh-down stops the machine's own sshd (refused) and keeps it stopped across a deploy;
    link-down makes the address time out; the up knobs (and reset) bring both back."""
    key = keypair("knobs")
    alloc = allocate(conn, "devcloud-infra-knobs")
    node_id = alloc.node_id
    node = conn.baremetal.get_node(node_id)
    i, address = node_index(node), node.extra["test_host_address"]
    try:
        assert "Connection refused" in ssh(address, key).stderr  # not deployed: no machine, nothing listens
        devcloud("fault", "ssh-down", str(i))  # set before the deploy: the machine boots without sshd
        assert deploy(conn, node_id, key_drive(key)).provision_state == "active"
        wait_until("machine booted", lambda: node_status(node.name)["machine"] == "up", 20)
        assert node_status(node.name)["sshd"] == "off"
        assert "Connection refused" in ssh(address, key).stderr
        devcloud("fault", "ssh-up", str(i))
        assert ssh_ok(address, key, "hostname", timeout=10).stdout.strip() == node.name
        devcloud("fault", "ssh-down", str(i))
        try:
            assert "Connection refused" in ssh(address, key).stderr
        finally:
            devcloud("fault", "ssh-up", str(i))
        assert ssh(address, key).returncode == 0
        devcloud("fault", "link-down", str(i))
        try:
            assert re.search("timed out|No route to host|unreachable", ssh(address, key, timeout=2).stderr)
        finally:
            devcloud("fault", "link-up", str(i))
        assert ssh(address, key).returncode == 0
        devcloud("fault", "ssh-down", str(i))
        devcloud("fault", "reset")
        assert ssh(address, key).returncode == 0
    finally:
        try:
            release(conn, node_id, alloc)
        finally:
            devcloud("fault", "ssh-up", str(i))


@pytest.mark.ironic_wide  # tests/turns.py
def test_api_knobs_stop_freeze_and_bring_back_the_same_cloud(conn):
    # Same DB: the same nodes (their states may move meanwhile: the devcloud is shared).
    before = {n.name: n.id for n in conn.baremetal.nodes(resource_class=MAIN_POOL_CLASS)}
    devcloud("fault", "api-stop")
    try:
        assert not api_answers()
    finally:
        devcloud("fault", "api-start")
    assert {n.name: n.id for n in conn.baremetal.nodes(resource_class=MAIN_POOL_CLASS)} == before
    devcloud("fault", "api-freeze")
    try:
        with pytest.raises(OSError):  # a frozen API accepts the connection but never answers
            urllib.request.urlopen(f"{ENDPOINT}/v1", timeout=2)
    finally:
        devcloud("fault", "api-thaw")
    assert api_answers()


@pytest.mark.ironic_wide  # tests/turns.py
def test_api_kill_mid_deploy_leaves_a_failed_deploy_that_undeploys(conn):
    """A crashed Ironic (SIGKILL) cannot resume a deploy: after a restart the node is
    ``deploy failed`` and still releasable, which is what leak handling must cope with."""
    alloc = allocate(conn, "devcloud-infra-api-kill")
    node = conn.baremetal.get_node(alloc.node_id)
    conn.baremetal.update_node(node.id, instance_info={"image_source": image(), "root_gb": 10})
    conn.baremetal.set_node_provision_state(node.id, "active",
                                            config_drive={"meta_data": {"public_keys": {"k": "ssh-ed25519 AAAA x"}}})
    try:
        assert conn.baremetal.get_node(node.id).provision_state == "deploying"
        devcloud("fault", "api-kill")
        assert not api_answers()
        devcloud("fault", "api-start")
        failed = conn.baremetal.get_node(node.id)
        assert failed.provision_state == "deploy failed"
        assert "can't be resumed" in failed.last_error
    finally:
        if not api_answers():
            devcloud("fault", "api-start")
        release(conn, node.id, alloc)
