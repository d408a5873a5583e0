"""The devcloud's Nova (docs/devcloud-nova.md), all real: Keystone tokens, Nova's scheduler and
fake hypervisors, Glance images, Neutron's ports bound by OVN, and the machine a server becomes
(SSH with the keypair, hostname, fixed IP). Every fault knob is observed through the API.

Run with the devcloud lock: ``flock /tmp/dlbench-devcloud.lock .venv/bin/pytest -q tests/devcloud_infra/test_nova.py``.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.devcloud import CLOUDS_FILE, ENDPOINT, STATE, STOCK_IMAGE, devcloud, ssh, ssh_ok, wait_until
from tests.support.prereqs import require

KEYSTONE = "http://127.0.0.1:5000/v3"
NOVA = "http://127.0.0.1:8774/"
HYPERVISORS = {"devcloud-hv-1", "devcloud-hv-2", "devcloud-hv-3"}
PREFIX = "test-nova-"


def answers(url: str, timeout: float = 3) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def nova_configured() -> bool:
    return CLOUDS_FILE.exists() and "devcloud-nova:" in CLOUDS_FILE.read_text()


@pytest.fixture(scope="module")
def clouds() -> Iterator[tuple[Any, Any]]:
    """(user dlbench's connection, admin's connection); brings the Nova part up if needed."""
    started = None
    if not (answers(KEYSTONE) and answers(NOVA) and nova_configured()):
        require(os.geteuid() == 0, "the devcloud needs root; run `make devcloud-up`")
        require((STATE / "nova-venv" / ".installed").exists(), "no .devcloud/nova-venv: run `make devcloud-install`")
        started = "nova-down" if answers(f"{ENDPOINT}/v1") else "down"
        devcloud("nova-up" if started == "nova-down" else "up", timeout=900)
    require(STOCK_IMAGE.exists(), f"no stock image {STOCK_IMAGE}: run `make devcloud-images`")
    import openstack

    os.environ["OS_CLIENT_CONFIG_FILE"] = str(CLOUDS_FILE)
    user, admin = openstack.connect(cloud="devcloud-nova"), openstack.connect(cloud="devcloud-admin")
    for server in admin.compute.servers(all_projects=True):  # left by an interrupted run
        if server.name.startswith(PREFIX):
            admin.compute.delete_server(server.id)
    yield user, admin
    if started:
        devcloud(started, timeout=300)


@pytest.fixture
def key(tmp_path: Path) -> Callable[[str], Path]:
    def make(name: str) -> Path:
        path = tmp_path / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True)
        return path
    return make


def knob(*args: str) -> None:
    devcloud("fault", *args, timeout=180)


def wait_server(conn: Any, server_id: str, timeout: float = 90) -> Any:
    return wait_until(f"server {server_id} ACTIVE or ERROR", lambda: (
        s := conn.compute.get_server(server_id)).status in ("ACTIVE", "ERROR") and s, timeout)


def gone(conn: Any, server_id: str) -> bool:
    import openstack

    try:
        conn.compute.get_server(server_id)
    except openstack.exceptions.NotFoundException:
        return True
    return False


@contextmanager
def servers(conn: Any, count: int = 1, **kw: Any) -> Iterator[list[Any]]:
    """``count`` servers (stock image, dlbench.small, devcloud-net) created at once, waited for;
    deleted afterwards (and waited for: nothing is left)."""
    image = conn.image.find_image("stock")
    flavor = conn.compute.find_flavor(kw.pop("flavor", "dlbench.small"))
    net = conn.network.find_network("devcloud-net")
    made = []
    try:
        for k in range(count):
            name = kw.pop("name", None) if k == 0 and "name" in kw else f"{PREFIX}{uuid.uuid4().hex[:6]}-{k}"
            made.append(conn.compute.create_server(name=name, image_id=image.id, flavor_id=flavor.id,
                                                   networks=[{"uuid": net.id}], **kw))
        yield [wait_server(conn, s.id) for s in made]
    finally:
        for s in made:
            conn.compute.delete_server(s.id, ignore_missing=True)
        for s in made:
            wait_until(f"server {s.id} gone", lambda s=s: gone(conn, s.id), 60)


def address(conn: Any, server: Any) -> str:
    ports = list(conn.network.ports(device_id=server.id))
    assert len(ports) == 1, ports
    return ports[0].fixed_ips[0]["ip_address"]


def ovn_chassis_of(port_id: str) -> str:
    """The chassis (hostname) OVN's Southbound database binds a logical port to, or ''."""
    sb = f"unix:{STATE / 'ovn' / 'central' / 'sb.sock'}"
    out = subprocess.run(["ovn-sbctl", f"--db={sb}", "--bare", "--columns=chassis", "find", "Port_Binding",
                          f"logical_port={port_id}"], capture_output=True, text=True, check=True).stdout.strip()
    if not out:
        return ""
    return subprocess.run(["ovn-sbctl", f"--db={sb}", "--bare", "--columns=hostname", "list", "Chassis", out],
                          capture_output=True, text=True, check=True).stdout.strip()


def tcp_refused(addr: str, port: int = 22) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return True  # unreachable / timed out: nothing answers either


def test_keystone_tokens(clouds: tuple[Any, Any]) -> None:
    import openstack

    user, _ = clouds
    assert user.authorize()  # a fernet token for dlbench in project dlbench
    assert user.current_project.name == "dlbench"
    wrong = openstack.connect(auth_type="password", auth={
        "auth_url": KEYSTONE, "username": "dlbench", "password": "not-the-password", "project_name": "dlbench",
        "user_domain_name": "Default", "project_domain_name": "Default"}, region_name="RegionOne",
        load_yaml_config=False, load_envvars=False)
    with pytest.raises(openstack.exceptions.SDKException) as exc:
        wrong.authorize()
    assert "HTTP 401" in str(exc.value)


def test_contract_objects(clouds: tuple[Any, Any]) -> None:
    user, admin = clouds
    flavors = {f.name: f for f in user.compute.flavors()}
    small = flavors["dlbench.small"]
    assert (small.vcpus, small.ram, small.disk) == (2, 2048, 10)
    assert flavors["dlbench.gpu"].extra_specs.get("pci_passthrough:alias") == "fake-gpu:1" or \
        admin.compute.fetch_flavor_extra_specs(flavors["dlbench.gpu"]).extra_specs["pci_passthrough:alias"] == \
        "fake-gpu:1"
    images = {i.name: i for i in user.image.images()}
    assert images["stock"].properties.get("devcloud_image") == "stock"
    assert images["dlbench-node"].properties.get("devcloud_image") == "dlbench-node"
    net = user.network.find_network("devcloud-net")
    assert net.mtu == 1500 and net.is_shared
    subnet = user.network.get_subnet(net.subnet_ids[0])
    assert (subnet.cidr, subnet.gateway_ip) == ("198.18.96.0/20", "198.18.96.1")
    hyps = {h.name for h in admin.compute.hypervisors()}
    assert HYPERVISORS <= hyps


def test_server_is_a_machine(clouds: tuple[Any, Any], key: Callable[[str], Path]) -> None:
    """Flavor, keypair, security group (tagged), server group, server as user dlbench; SSH with
    the keypair: hostname = server name, address = the port's fixed IP; delete wipes it."""
    user, admin = clouds
    tag = uuid.uuid4().hex[:6]
    good, bad = key("good"), key("bad")
    flavor = admin.compute.create_flavor(name=f"{PREFIX}{tag}", vcpus=1, ram=512, disk=1, is_public=True)
    keypair = user.compute.create_keypair(name=f"{PREFIX}{tag}", public_key=Path(f"{good}.pub").read_text())
    sg = user.network.create_security_group(name=f"{PREFIX}{tag}", description="test")
    group = user.compute.create_server_group(name=f"{PREFIX}{tag}", policy="anti-affinity")
    name = f"{PREFIX}{tag}-vm"
    try:
        rule = user.network.create_security_group_rule(security_group_id=sg.id, direction="ingress",
                                                       protocol="tcp", port_range_min=22, port_range_max=22,
                                                       remote_ip_prefix="0.0.0.0/0", ethertype="IPv4")
        user.network.set_tags(sg, ["dlbench-test", tag])
        assert [s.id for s in user.network.security_groups(tags=tag)] == [sg.id]
        assert rule.id in {r.id for r in user.network.security_group_rules(security_group_id=sg.id)}
        started = time.monotonic()
        with servers(user, 1, name=name, key_name=keypair.name, flavor=flavor.name,
                     security_groups=[{"name": sg.name}], scheduler_hints={"group": group.id},
                     user_data=base64.b64encode(b"#cloud-config\n# dlbench test\n").decode()) as (server,):
            active_s = time.monotonic() - started
            assert server.status == "ACTIVE", server.fault
            assert admin.compute.get_server(server.id).hypervisor_hostname in HYPERVISORS
            addr = address(user, server)
            assert server.addresses["devcloud-net"][0]["addr"] == addr
            # Neutron bound the port to the server's hypervisor; OVN's chassis there claimed it
            (port,) = list(admin.network.ports(device_id=server.id))
            host = admin.compute.get_server(server.id).hypervisor_hostname
            assert (port.binding_host_id, port.binding_vif_type) == (host, "ovs"), port
            wait_until(f"OVN binds port {port.id} on {host}", lambda: ovn_chassis_of(port.id) == host, 15)
            assert addr.startswith("198.18.")
            res = ssh_ok(addr, good, "hostname; ip -4 -o addr show eth0; cat /run/devcloud/user_data", timeout=30)
            ssh_s = time.monotonic() - started - active_s
            lines = res.stdout.splitlines()
            assert lines[0] == name
            assert f" {addr}/20 " in lines[1]
            assert "# dlbench test" in res.stdout
            assert ssh(addr, bad).returncode != 0  # a wrong key is refused
            print(f"create -> ACTIVE {active_s:.1f} s, ACTIVE -> SSH {ssh_s:.1f} s")
            netns = [ns for ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
                     .stdout.split() if ns.startswith("devcloud-vm-")]
            assert netns
            deleted = time.monotonic()
        print(f"delete -> gone {time.monotonic() - deleted:.1f} s")
        wait_until(f"the machine at {addr} switched off", lambda: tcp_refused(addr), 15)
        wait_until("its disk wiped", lambda: not any(
            (d / "server").exists() and (d / "server").read_text().strip() == server.id
            for d in (STATE / "nodes").iterdir()), 15)
    finally:
        user.compute.delete_server_group(group, ignore_missing=True)
        user.network.delete_security_group(sg, ignore_missing=True)
        user.compute.delete_keypair(keypair, ignore_missing=True)
        admin.compute.delete_flavor(flavor, ignore_missing=True)


def test_server_groups_place_servers(clouds: tuple[Any, Any]) -> None:
    user, admin = clouds
    anti = user.compute.create_server_group(name=f"{PREFIX}anti", policy="anti-affinity")
    same = user.compute.create_server_group(name=f"{PREFIX}same", policy="affinity")
    try:
        with servers(user, 3, scheduler_hints={"group": anti.id}) as spread:
            assert all(s.status == "ACTIVE" for s in spread), [s.fault for s in spread]
            hosts = [admin.compute.get_server(s.id).hypervisor_hostname for s in spread]
            assert sorted(hosts) == sorted(HYPERVISORS)
            assert len({s.host_id for s in spread}) == 3  # what a non-admin sees
        with servers(user, 2, scheduler_hints={"group": same.id}) as together:
            assert all(s.status == "ACTIVE" for s in together), [s.fault for s in together]
            hosts = {admin.compute.get_server(s.id).hypervisor_hostname for s in together}
            assert len(hosts) == 1 and hosts <= HYPERVISORS
    finally:
        user.compute.delete_server_group(anti, ignore_missing=True)
        user.compute.delete_server_group(same, ignore_missing=True)


def test_fault_server_error(clouds: tuple[Any, Any]) -> None:
    user, _ = clouds
    knob("server-error", "1")
    try:
        with servers(user, 1) as (server,):
            assert server.status == "ERROR"
            assert "devcloud fault server-error" in server.fault["message"]
        with servers(user, 1) as (server,):  # the knob counted one build
            assert server.status == "ACTIVE", server.fault
    finally:
        knob("server-ok")


def test_fault_quota_exhausted(clouds: tuple[Any, Any]) -> None:
    import openstack

    user, _ = clouds
    knob("quota-exhausted")
    try:
        with pytest.raises(openstack.exceptions.HttpException) as exc, servers(user, 1):
            pass
        assert exc.value.status_code == 403
        assert "Quota exceeded" in str(exc.value)
    finally:
        knob("quota-ok")


def test_fault_hypervisor_full(clouds: tuple[Any, Any]) -> None:
    user, _ = clouds
    knob("hypervisor-full")
    try:
        with servers(user, 1) as (server,):
            assert server.status == "ERROR"
            assert "No valid host was found" in server.fault["message"]
    finally:
        knob("hypervisor-ok")


def test_fault_server_ssh_down(clouds: tuple[Any, Any], key: Callable[[str], Path]) -> None:
    user, _ = clouds
    good = key("good")
    keypair = user.compute.create_keypair(name=f"{PREFIX}{uuid.uuid4().hex[:6]}",
                                          public_key=Path(f"{good}.pub").read_text())
    # Neutron enforces security groups: the project's default group lets nothing in from this host
    sg = user.network.create_security_group(name=keypair.name, description="test: SSH from anywhere")
    user.network.create_security_group_rule(security_group_id=sg.id, direction="ingress", protocol="tcp",
                                            port_range_min=22, port_range_max=22, remote_ip_prefix="0.0.0.0/0",
                                            ethertype="IPv4")
    knob("server-ssh-down")
    try:
        with servers(user, 1, key_name=keypair.name, security_groups=[{"name": sg.name}]) as (server,):
            assert server.status == "ACTIVE"
            addr = address(user, server)
            time.sleep(3)  # booted by now: still nothing on port 22 (the machine answers: refused)
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((addr, 22), timeout=5).close()
            knob("server-ssh-up")
            ssh_ok(addr, good, timeout=30)
    finally:
        knob("server-ssh-up")
        user.compute.delete_keypair(keypair, ignore_missing=True)
        user.network.delete_security_group(sg, ignore_missing=True)


def test_fault_nova_api(clouds: tuple[Any, Any]) -> None:
    user, _ = clouds
    knob("nova-api-stop")
    try:
        assert not answers(NOVA)
        with pytest.raises(Exception):  # noqa: B017 - keystoneauth's ConnectFailure, whatever wraps it
            list(user.compute.servers())
    finally:
        knob("nova-api-start")
    assert answers(NOVA)
    list(user.compute.servers())
    knob("nova-api-freeze")
    try:
        req = urllib.request.Request(NOVA)
        with pytest.raises((TimeoutError, urllib.error.URLError, socket.timeout)):
            urllib.request.urlopen(req, timeout=2)
    finally:
        knob("nova-api-thaw")
    assert answers(NOVA, timeout=10)


def test_gpu_flavor_lands_on_the_gpu_hypervisor(clouds: tuple[Any, Any]) -> None:
    """dlbench.gpu asks for the PCI alias fake-gpu; only devcloud-hv-1 reports such devices."""
    user, admin = clouds
    with servers(user, 1, flavor="dlbench.gpu") as (server,):
        assert server.status == "ACTIVE", server.fault
        assert admin.compute.get_server(server.id).hypervisor_hostname == "devcloud-hv-1"


def test_a_hypervisor_switch_that_aborts_is_started_again_and_reprogrammed(clouds: tuple[Any, Any]) -> None:
    """Debian 12's Open vSwitch 3.1 userspace conntrack can abort ovs-vswitchd on an assertion
    (stop 45's CI: hypervisor 2's switch died mid-tier, and every later Nova test on it timed
    out). The devcloud runs it under ``--monitor``: a SIGABRT'd switch is started again by its
    monitor, and ovn-controller programs its integration bridge again."""
    hv = "devcloud-hv-2"
    chassis = STATE / "ovn" / hv
    monitor = int((STATE / "run" / f"ovs-vswitchd-{hv}.pid").read_text().split()[0])

    def daemon() -> int | None:
        kids = [int(p) for p in Path(f"/proc/{monitor}/task/{monitor}/children").read_text().split()]
        return kids[0] if kids else None

    def flows() -> int:
        out = subprocess.run(["ovs-ofctl", "dump-flows", f"unix:{chassis}/br-int.mgmt"], capture_output=True,
                             text=True, timeout=10)
        return len(out.stdout.splitlines()) if out.returncode == 0 else 0

    before = wait_until("the switch's daemon under its monitor", daemon, 10)
    assert flows() > 10
    os.kill(before, 6)  # SIGABRT, as the failed assertion raises
    after = wait_until("a new switch daemon", lambda: (d := daemon()) and d != before and d, 60)
    assert after != before and Path(f"/proc/{monitor}").exists()
    wait_until("br-int programmed again by ovn-controller", lambda: flows() > 10, 60)
