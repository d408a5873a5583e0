"""Messages that say what is known, built from real objects (no cloud needed): the capacity
message names every Ironic node a run cannot have and why (openstacksdk's own ``Node`` objects,
as the API returns them), and the janitor's reason for keeping a run says the lease is unexpired,
until when and for which run, not that a task of the run is alive. The same messages against the
real Ironic are in tests/ironic (devcloud)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from openstack.baremetal.v1.node import Node

from dlbench.providers.base import Instance, Tags
from dlbench.providers.ironic import NodeUse, capacity_text, node_use
from dlbench.providers.sweep import decide

HOLDER = Tags(run_id="other-run", dag_id="dlbench_benchmark", dag_run_id="manual__x").as_dict()


def node(name: str, **fields: object) -> Node:
    base: dict[str, object] = {"id": f"uuid-{name}", "name": name, "provision_state": "available",
                               "power_state": "power off", "is_maintenance": False, "traits": ["CUSTOM_GPU"],
                               "extra": {}, "allocation_id": None, "instance_id": None, "reservation": None}
    return Node(**{**base, **fields})


FLEET = [
    node("node-0"),
    node("node-1", provision_state="active", power_state="power on", allocation_id="alloc-9", extra=HOLDER),
    node("node-2", is_maintenance=True, maintenance_reason="disk swap"),
    node("node-3", provision_state="manageable"),
    node("node-4", traits=[]),
    node("node-5", provision_state="clean failed", last_error="IPMI timeout"),
    node("node-6", provision_state="cleaning", power_state="power on"),
]


def test_each_node_says_why_a_run_cannot_have_it():
    uses = {n.name: node_use(n, ["CUSTOM_GPU"]) for n in FLEET}
    assert uses["node-0"] == (NodeUse.FREE, "free")
    assert uses["node-1"] == (NodeUse.HELD, "held by run other-run")
    assert uses["node-2"] == (NodeUse.UNUSABLE, "in maintenance ('disk swap')")
    assert uses["node-3"][0] is NodeUse.UNUSABLE and "provision state manageable" in uses["node-3"][1]
    assert uses["node-4"] == (NodeUse.UNUSABLE, "lacks trait(s) CUSTOM_GPU")
    assert uses["node-5"][0] is NodeUse.UNUSABLE and "clean failed: IPMI timeout" in uses["node-5"][1]
    assert uses["node-6"][0] is NodeUse.HELD and "cleaning" in uses["node-6"][1]
    # Without traits asked for, node-4 is free like node-0.
    assert node_use(FLEET[4])[0] is NodeUse.FREE


def test_the_capacity_message_names_the_nodes_not_usable_with_state_and_power():
    """The issue's case: 3 nodes, one in maintenance: "only 2 usable", and which one and why."""
    usable, free, others = capacity_text([node("node-0"), node("node-1"), node("node-2", is_maintenance=True,
                                                                                 maintenance_reason="fan")])
    assert (usable, free) == (2, 2)
    assert others == "node-2: in maintenance ('fan') [available, power off]"

    usable, free, others = capacity_text(FLEET, ["CUSTOM_GPU"])
    assert (usable, free) == (3, 1)  # node-0 free; node-1 and node-6 come back; the rest need an operator
    parts = others.split("; ")
    assert [p.split(":")[0] for p in parts] == ["node-1", "node-2", "node-3", "node-4", "node-5", "node-6"]
    assert "node-1: held by run other-run [active, power on]" in parts
    assert "node-5: provision state clean failed: IPMI timeout (an operator must make it available) " \
           "[clean failed, power off]" in parts


def test_the_janitor_says_what_it_knows_about_an_unexpired_lease():
    now = datetime.now(UTC)
    lease = now + timedelta(minutes=3)

    def instance(lease_until: datetime | None, expires: datetime = now + timedelta(hours=1)) -> Instance:
        return Instance(id="i", name="dlbench-r1-vm-0", platform="virtual_machine", provider="local",
                        tags=Tags(run_id="r1", dag_id="dlbench_benchmark", dag_run_id="manual__r1",
                                  expires_at=expires, lease_until=lease_until))

    reason, keep = decide([instance(lease)], lambda _tags: True, now)
    assert keep and reason.startswith(f"lease of run r1 unexpired until {lease.isoformat()}: kept until then"), reason
    assert "live task of the run" not in reason  # the run may as well have been killed a second ago
    reason, keep = decide([instance(lease, expires=now - timedelta(minutes=1))], lambda _tags: True, now)
    assert keep and "its expiry has passed" in reason
    reason, keep = decide([instance(now - timedelta(seconds=1))], lambda _tags: True, now)
    assert not keep and reason.startswith("lease lapsed at")
