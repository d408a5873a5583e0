"""The Nova driver against the devcloud's real Nova (Keystone auth on): lifecycle, placement,
leases, release of every kind of resource, refusals before anything is created, and the
cloud's faults surfaced in Nova's own words. Every test leaves nothing behind (``clean_nova``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dlbench.polling import Deadline
from dlbench.providers.base import LEASE_KEY, BootConfig, Demand, Tags
from dlbench.providers.machines import generate_keypair
from dlbench.providers.nova import KIND, NovaDriver, NovaError, benchmark_ports, support_name
from tests.support.knobs import fault
from tests.support.nova import settings


def boot_config(tmp_path: Path) -> tuple[Path, BootConfig]:
    key, public = generate_keypair(tmp_path / "ssh")
    return key, BootConfig(public_key=public, user_data="#cloud-config\n# dlbench test\n")


def ssh(address: str, key: Path, *argv: str) -> str:
    from dlbench.execution.transport import RemoteHost, wait_reachable

    wait_reachable(address, "root", str(key), 60, 0.5, None)
    with RemoteHost(address, user="root", key_path=str(key)) as host:
        status, out = host.run(list(argv), 30)
    assert status == 0, out
    return out.strip()


def test_lifecycle_spread_reachable_renewed_and_released(clean_nova, admin_conn, run_id, tmp_path):
    """Three VMs for the distributed scenario land on three hypervisors; each is a machine that
    answers SSH with the run's key under its own name; the lease is written where the janitor
    reads it; release deletes servers, server group, keypair and security group."""
    driver = NovaDriver(settings())
    key, boot = boot_config(tmp_path)
    tags = Tags(run_id=run_id)
    demand = Demand(role="vm", platform="virtual_machine", count=3, placement="spread")
    driver.preflight([demand])
    started = time.monotonic()
    instances = driver.create(demand, tags, boot, Deadline(180, "create"))
    try:
        driver.wait_ready(instances, Deadline(180, "ready"))
        print(f"\n3 servers create -> ACTIVE in {time.monotonic() - started:.1f} s: "
              + ", ".join(f"{i.timings['create_to_active']:.1f}" for i in instances))
        assert all(i.address and i.address.startswith("198.18.") for i in instances)
        assert len({i.details["host_id"] for i in instances}) == 3, [i.details for i in instances]
        hypervisors = {admin_conn.compute.get_server(i.id).hypervisor_hostname for i in instances}
        assert len(hypervisors) == 3, hypervisors
        assert {i.details["placement"] for i in instances} == {"anti-affinity"}
        for inst in instances:
            assert ssh(str(inst.address), key, "hostname") == inst.name
        # the security group: our tags, SSH from anywhere, the benchmark ports from the group only
        conn = driver.conn
        (group,) = [g for g in conn.network.security_groups() if g.name == support_name(run_id)]
        rules = {(r["protocol"], r.get("port_range_min"), r.get("remote_group_id") == group.id)
                 for r in group.security_group_rules if r["direction"] == "ingress"}
        assert ("tcp", 22, False) in rules and ("icmp", None, True) in rules
        assert all((proto, low, True) in rules for proto, low, _ in benchmark_ports())
        assert conn.compute.find_keypair(support_name(run_id)) is not None
        found = driver.find(run_id)[run_id]
        assert sorted(i.id for i in found if i.details[KIND] == "server") == sorted(i.id for i in instances)
        assert [i.details[KIND] for i in found if i.details[KIND] != "server"] == ["security_group"]
        # the lease: on the servers and on the security group
        until = Tags(run_id=run_id).expires_at
        driver.renew(found, until)
        for inst in driver.find(run_id)[run_id]:
            assert inst.tags.lease_until == until, inst
        assert conn.compute.get_server(instances[0].id).metadata[LEASE_KEY] == until.isoformat()
    finally:
        timings = driver.delete(instances, Deadline(180, "delete"))
    print("delete -> gone: " + ", ".join(f"{t:.1f}" for t in timings.values()))
    assert sorted(timings) == sorted(i.id for i in instances)
    assert driver.find(run_id) == {}


@pytest.mark.parametrize(("overrides", "message"), [
    ({"flavor": "no-such-flavor"}, r"nova.flavor: no flavor 'no-such-flavor' \(flavors: .*dlbench.small"),
    ({"image": "no-such-image"}, r"nova.image: no image 'no-such-image' in Glance \(images: .*stock"),
    ({"network": "no-such-net"}, r"nova.network: no network 'no-such-net' \(networks: .*devcloud-net"),
    ({"flavor": None, "vcpus": 512}, r"nova.vcpus/ram_mb/disk_gb/gpus: no flavor has 512 vCPUs"),
])
def test_bad_names_are_refused_before_anything_is_created(clean_nova, overrides, message):
    with pytest.raises(NovaError, match=message):
        NovaDriver(settings(**overrides)).preflight([Demand(role="vm", platform="virtual_machine", count=1)])


def test_quota_is_checked_before_and_explained_at_create(clean_nova, run_id, tmp_path):
    driver = NovaDriver(settings())
    with pytest.raises(NovaError, match=r"nova quota: the run needs 400 instances but the project has \d+ of \d+ left"):
        driver.preflight([Demand(role="vm", platform="virtual_machine", count=400)])
    fault("quota-exhausted")
    _, boot = boot_config(tmp_path)
    with pytest.raises(NovaError, match="nova quota: .*[Qq]uota exceeded"):
        driver.create(Demand(role="vm", platform="virtual_machine", count=1), Tags(run_id=run_id), boot,
                      Deadline(60, "create"))
    # create() removed its own support resources' servers; the run's security group and keypair
    # are released by tag like everything else
    driver.delete(driver.find(run_id).get(run_id, []), Deadline(60, "release"))


@pytest.mark.parametrize(("knob", "words"), [
    ("server-error", "devcloud fault server-error"),
    ("hypervisor-full", "No valid host was found.*the cloud is full"),
])
def test_server_errors_carry_novas_fault(clean_nova, run_id, tmp_path, knob, words):
    driver = NovaDriver(settings())
    _, boot = boot_config(tmp_path)
    fault(knob)
    demand = Demand(role="vm", platform="virtual_machine", count=1)
    instances = driver.create(demand, Tags(run_id=run_id), boot, Deadline(120, "create"))
    try:
        with pytest.raises(NovaError, match=f"server {instances[0].name}: ERROR: .*{words}"):
            driver.wait_ready(instances, Deadline(120, "ready"))
    finally:
        fault("reset")
        driver.delete(driver.find(run_id).get(run_id, []), Deadline(120, "release"))


def test_a_restarting_api_is_waited_for(clean_nova, run_id, tmp_path):
    """nova-api down for a few seconds mid-wait: the poll retries the connection errors."""
    import threading

    driver = NovaDriver(settings())
    _, boot = boot_config(tmp_path)
    instances = driver.create(Demand(role="vm", platform="virtual_machine", count=1), Tags(run_id=run_id), boot,
                              Deadline(120, "create"))
    try:
        fault("nova-api-stop")
        threading.Timer(6, fault, args=("nova-api-start",)).start()
        driver.wait_ready(instances, Deadline(180, "ready"))
        assert instances[0].address
    finally:
        fault("nova-api-start")
        driver.delete(driver.find(run_id).get(run_id, []), Deadline(180, "release"))


def test_vms_that_never_answer_ssh_are_rolled_back(clean_nova, run_id):
    """The whole lifecycle (MachineBackend) on Nova: servers ACTIVE but sshd never starts: setup
    fails naming SSH, and everything of the run is released before the error reaches Airflow."""
    from dlbench.providers.registry import backend_for_request
    from dlbench.request import parse_request

    request = parse_request({"provider": "nova", "platforms": ["virtual_machine"], "suites": ["cpu"],
                             "nova": settings(ssh_timeout=8, nodes={"virtual_machine": 2}).model_dump(
                                 exclude={"name"}, mode="json")})
    fault("server-ssh-down")
    with pytest.raises(Exception, match="not reachable over SSH"):
        backend_for_request(request).acquire(request, Tags(run_id=run_id), budget_s=300)
    assert NovaDriver(settings()).find(run_id) == {}


def test_pack_puts_two_vms_on_one_hypervisor_and_gpus_pick_the_passthrough_flavor(clean_nova, admin_conn,
                                                                                     run_id, tmp_path):
    """The shared-resource scenario's two VMs on one host (affinity), and `gpus: 1` choosing the
    flavor whose pci_passthrough:alias passes one `fake-gpu` through (scheduled where the devices
    are: devcloud-hv-1)."""
    driver = NovaDriver(settings(flavor=None, gpus=1, gpu_alias="fake-gpu", vcpus=1, ram_mb=512, disk_gb=1))
    _, boot = boot_config(tmp_path)
    demand = Demand(role="vm", platform="virtual_machine", count=2, placement="pack")
    driver.preflight([demand])
    instances = driver.create(demand, Tags(run_id=run_id), boot, Deadline(120, "create"))
    try:
        driver.wait_ready(instances, Deadline(120, "ready"))
        assert {i.details["labels"]["flavor"] for i in instances} == {"dlbench.gpu"}
        assert {i.details["labels"]["placement"] for i in instances} == {"affinity"}
        assert len({i.details["host_id"] for i in instances}) == 1
        assert {admin_conn.compute.get_server(i.id).hypervisor_hostname for i in instances} == {"devcloud-hv-1"}
    finally:
        driver.delete(driver.find(run_id).get(run_id, []), Deadline(120, "release"))
