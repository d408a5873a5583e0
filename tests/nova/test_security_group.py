"""The run's security group against the devcloud's real Neutron (ML2/OVN, ACLs on every port):
what the Nova driver opens is what gets through, so a missing or a too-wide rule fails here as it
would on a production cloud (docs/devcloud-nova.md, "Neutron").

Two runs: R1's two VMs (spread, with a distributed port of their own, as a user profile's) and
R2's one VM whose ``ssh_cidr`` is this host's address on the VM network only. Listeners on R1's
first VM; connections from R1's second VM, from R2's VM and from this host. "filtered" (no
answer: OVN dropped the SYN) is told apart from "refused" (the machine answered: nothing
listens), so a rule that lets traffic through to a closed port still counts as open."""

from __future__ import annotations

import json
import socket
import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from dlbench.execution.transport import RemoteHost, wait_reachable
from dlbench.polling import Deadline
from dlbench.providers.base import Demand, Tags
from dlbench.providers.nova import NovaDriver, support_name
from dlbench.workloads.micro.network import DEFAULT_PORT
from tests.nova.test_driver import boot_config
from tests.support.nova import settings

CUSTOM_PORT = 29517
"""A distributed port no built-in profile uses (what a user profile may choose)."""
UNOPENED_PORT = 29518
HOST_ON_VM_NET = "198.18.96.1/32"
"""This host's address on the devcloud's VM network (the gateway on ``dcvmbr``)."""

LISTEN = textwrap.dedent("""
    import socket, sys, threading
    def serve(port):
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port)); s.listen(16)
        while True:
            c, _ = s.accept(); c.close()
    for p in sys.argv[1:]:
        threading.Thread(target=serve, args=(int(p),)).start()
""")
PROBE = textwrap.dedent("""
    import socket, sys
    for p in sys.argv[2:]:
        s = socket.socket(); s.settimeout(3)
        try:
            s.connect((sys.argv[1], int(p))); r = "open"
        except ConnectionRefusedError:
            r = "refused"
        except OSError:
            r = "filtered"
        print(p, r)
""")


def poll_until(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.3)


def run(address: str, key: Path, argv: list[str]) -> str:
    with RemoteHost(address, user="root", key_path=str(key)) as host:
        status, out = host.run(argv, 60)
    assert status == 0, out
    return out


def probe_from(address: str, key: Path, target: str, ports: list[int]) -> dict[int, str]:
    out = run(address, key, ["python3", "-c", PROBE, target, *map(str, ports)])
    return {int(p): r for p, r in (line.split() for line in out.splitlines() if line.strip())}


def probe_here(target: str, ports: list[int]) -> dict[int, str]:
    found = {}
    for port in ports:
        try:
            with socket.create_connection((target, port), timeout=3):
                found[port] = "open"
        except ConnectionRefusedError:
            found[port] = "refused"
        except OSError:
            found[port] = "filtered"
    return found


def test_a_runs_group_lets_exactly_its_own_traffic_through(clean_nova, admin_conn, tmp_path):
    r1, r2 = f"t{uuid.uuid4().hex[:10]}", f"t{uuid.uuid4().hex[:10]}"
    key1, boot1 = boot_config(tmp_path / "r1")
    key2, boot2 = boot_config(tmp_path / "r2")
    open_driver = NovaDriver(settings())
    narrow_driver = NovaDriver(settings(ssh_cidr=HOST_ON_VM_NET))
    made: list[tuple[NovaDriver, list]] = []
    try:
        pair = open_driver.create(Demand(role="vm", platform="virtual_machine", count=2, placement="spread",
                                         ports=(("tcp", CUSTOM_PORT, CUSTOM_PORT),)),
                                  Tags(run_id=r1), boot1, Deadline(180, "create"))
        made.append((open_driver, pair))
        (other,) = narrow_driver.create(Demand(role="vm", platform="virtual_machine", count=1),
                                        Tags(run_id=r2), boot2, Deadline(180, "create"))
        made.append((narrow_driver, [other]))
        open_driver.wait_ready(pair, Deadline(180, "ready"))
        narrow_driver.wait_ready([other], Deadline(180, "ready"))  # SSH from this host: inside its ssh_cidr
        a, b, c = (str(i.address) for i in (*pair, other))
        for inst in (*pair, other):  # the ports are bound by OVN on the server's hypervisor and go up
            (port,) = list(admin_conn.network.ports(device_id=inst.id))
            assert port.binding_vif_type == "ovs", port
            assert port.binding_host_id == admin_conn.compute.get_server(inst.id).hypervisor_hostname
            # ACTIVE once ovn-controller reports the plugged port up (asynchronous, as on any cloud)
            poll_until(f"port {port.id} ACTIVE",
                       lambda p=port: admin_conn.network.get_port(p.id).status == "ACTIVE", 30)

        wait_reachable(a, "root", str(key1), 60, 0.5, None)
        run(a, key1, ["sh", "-c", "setsid nohup python3 -c \"$0\" \"$@\" >/dev/null 2>&1 </dev/null &", LISTEN,
                      str(DEFAULT_PORT), str(CUSTOM_PORT), str(UNOPENED_PORT)])
        ports = [DEFAULT_PORT, DEFAULT_PORT + 1, CUSTOM_PORT, UNOPENED_PORT, 22]
        deadline = time.monotonic() + 20
        while (inside := probe_from(b, key1, a, ports))[DEFAULT_PORT] != "open" and time.monotonic() < deadline:
            time.sleep(0.5)  # the listener starting
        # within the run: its benchmark ports and its own distributed port; nothing else
        assert inside == {DEFAULT_PORT: "open", DEFAULT_PORT + 1: "refused", CUSTOM_PORT: "open",
                          UNOPENED_PORT: "filtered", 22: "open"}, inside
        # another run's VM: SSH only (R1's ssh_cidr is 0.0.0.0/0), never the benchmark ports
        outside = probe_from(c, key2, a, ports)
        assert outside == {DEFAULT_PORT: "filtered", DEFAULT_PORT + 1: "filtered", CUSTOM_PORT: "filtered",
                           UNOPENED_PORT: "filtered", 22: "open"}, outside
        # this host, outside every group: iperf3's port is not reachable either
        assert probe_here(a, ports) == outside
        # R2 lets SSH in from this host only: R1's VM gets no answer on its port 22
        assert probe_from(a, key1, c, [22]) == {22: "filtered"}
        assert probe_here(c, [22]) == {22: "open"}
        # the rules are what the group says: R1's lists the custom port, R2's does not
        net = open_driver.conn.network
        groups = {g.name: g for g in net.security_groups() if g.name in (support_name(r1), support_name(r2))}
        custom = {g: any(r.get("port_range_min") == CUSTOM_PORT for r in groups[g].security_group_rules)
                  for g in groups}
        assert custom == {support_name(r1): True, support_name(r2): False}
    finally:
        for driver, instances in made:
            driver.delete(instances, Deadline(180, "delete"))
    # deleting the servers deleted their ports (Nova) and the groups (the driver): nothing is left
    for driver, instances in made:
        assert driver.find(instances[0].tags.run_id) == {}
        for inst in instances:
            assert list(admin_conn.network.ports(device_id=inst.id)) == []


def test_the_groups_description_fits_neutrons_255_characters():
    """A real Neutron refuses a longer description (400 "exceeds maximum length of 255"): with an
    Airflow run id as long as the pipeline allows (80 characters), the group's tags still fit and
    still carry what the janitor reads (run id, expiry, lease)."""
    from datetime import UTC, datetime, timedelta

    from dlbench.pipeline.steps import safe_run_id
    from dlbench.providers.nova import DESCRIPTION_MAX, _description, _tags_of

    dag_run_id = "manual__2026-11-26T15:20:01.426924+00:00" + "x" * 200
    now = datetime.now(UTC)
    tags = Tags(run_id=safe_run_id(dag_run_id), dag_id="dlbench_benchmark", dag_run_id=dag_run_id,
                expires_at=now + timedelta(hours=6), lease_until=now + timedelta(minutes=15))
    assert len(tags.run_id) == 80
    text = _description(tags)
    assert len(text) <= DESCRIPTION_MAX
    back = Tags.from_dict(_tags_of(type("Group", (), {"description": text})()))
    assert back is not None
    assert (back.run_id, back.expires_at, back.lease_until) == (tags.run_id, tags.expires_at, tags.lease_until)
    short = Tags(run_id="r1", dag_id="d", dag_run_id="r1", expires_at=now)
    assert Tags.from_dict(_tags_of(type("Group", (), {"description": _description(short)})())) == short
    # An ordinary DAG run id fits whole, so the janitor names the DAG run of a run whose security
    # group alone was left (issue 38: the long keys left 289 characters, the DAG run id was dropped).
    for ordinary in ("manual__2026-11-28T04:11:50.123456+00:00", "scheduled__2026-11-28T00:00:00+00:00"):
        tags = Tags(run_id=safe_run_id(ordinary), dag_id="dlbench_benchmark", dag_run_id=ordinary,
                    expires_at=now + timedelta(hours=6), lease_until=now + timedelta(minutes=15))
        assert Tags.from_dict(_tags_of(type("Group", (), {"description": _description(tags)})())) == tags
    # A group made before the compact form (the tags' own keys) still reads.
    old = json.dumps(short.as_dict())
    assert Tags.from_dict(_tags_of(type("Group", (), {"description": old})())) == short
