"""The Ironic driver against the real devcloud API: lifecycle, faults, competing runs, bad input.

Every test runs under ``clean_cloud``, which asserts that no allocation, tag or non-available
node is left afterwards (the leak check is the point of each fault test).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dlbench.errors import ProvisioningError
from dlbench.polling import Deadline
from dlbench.providers.base import BootConfig, Demand, Instance, Tags
from dlbench.providers.ironic import IronicDriver
from tests.support.ironic import CLOUD, CLOUDS_FILE, RELEASED, RESOURCE_CLASS, assert_no_leaks, settings


class Prov:
    """The driver's hooks with test-sized deadlines (the lifecycle passes its own)."""

    def __init__(self, conn: Any, **overrides: Any) -> None:
        self.driver = IronicDriver(settings(**overrides), conn)

    def create(self, count: int, tags: Tags, public_key: str = "") -> list[Instance]:
        return self.driver.create(Demand("bm", "bare_metal", count), tags, BootConfig(public_key=public_key),
                                  Deadline(120, "test create"))

    def wait(self, instances: list[Instance], timeout: float = 120) -> list[Instance]:
        return self.driver.wait_ready(instances, Deadline(timeout, "test wait"))

    def delete(self, instances: list[Instance], timeout: float = 120) -> dict[str, float]:
        return self.driver.delete(instances, Deadline(timeout, "test delete"))

    def owned(self, run_id: str | None = None) -> dict[str, list[Instance]]:
        return self.driver.find(run_id)

    def matching_nodes(self) -> list[Any]:
        return self.driver.matching_nodes()


def provisioner(conn: Any, **overrides: Any) -> Prov:
    return Prov(conn, **overrides)


def tags_for(run_id: str, hours: float = 1.0) -> Tags:
    return Tags(run_id=run_id, dag_id="dlbench_test", dag_run_id=f"manual__{run_id}",
                expires_at=datetime.now(UTC) + timedelta(hours=hours))


def test_two_nodes_deploy_tagged_then_release_leaves_nothing(clean_cloud, run_id):
    conn = clean_cloud
    prov = provisioner(conn)
    tags = tags_for(run_id)
    instances = prov.wait(prov.create(2, tags, public_key="ssh-ed25519 AAAAC3Nz test"), timeout=120)
    assert len({i.id for i in instances}) == 2
    for inst in instances:
        node = conn.baremetal.get_node(inst.id)
        assert node.provision_state == "active"
        assert node.allocation_id == inst.details["allocation_id"]
        assert Tags.from_dict(node.extra).run_id == run_id                      # node extra
        assert node.instance_info["dlbench_run_id"] == run_id                    # instance_info
        assert conn.baremetal.get_allocation(node.allocation_id).name == inst.name == f"dlbench-{run_id}-bm-" \
            f"{instances.index(inst)}"                                            # allocation name
        assert inst.address and inst.address == node.extra["test_host_address"]
        assert set(inst.timings) == {"allocate", "deploy_to_active"}
        assert all(v > 0 for v in inst.timings.values())
    assert set(prov.owned()) == {run_id}
    undeploy = prov.delete(instances, timeout=120)
    assert set(undeploy) == {i.id for i in instances} and all(v > 0 for v in undeploy.values())
    assert_no_leaks(conn)
    prov.delete(instances, timeout=60)  # idempotent
    assert_no_leaks(conn)


class MaintenanceAtDeploy(IronicDriver):
    """The driver, with another actor putting one allocated node in maintenance through the real
    API at the moment before the driver asks Ironic to deploy it: the fault lands in the same
    window every time (a thread racing the driver for it missed the window on a loaded machine
    and left the run deployed)."""

    victim = ""
    touched: list[str]

    def _deploy(self, instance: Instance, tags: Tags, boot: BootConfig) -> None:
        if instance.name == self.victim:
            self.conn.baremetal.set_node_maintenance(instance.id, reason="fault injection")
            self.touched.append(instance.id)
        super()._deploy(instance, tags, boot)


def test_deploy_refused_on_one_node_of_two_releases_both(clean_cloud, run_id):
    """A real refusal by Ironic: the second node is put in maintenance (by another actor) right
    after it is allocated to us, so its deploy is refused with a 400; create() must release both
    allocations and the first node's deployment before raising (no teardown will run)."""
    conn = clean_cloud
    prov = provisioner(conn)
    driver = MaintenanceAtDeploy(prov.driver.spec, conn)
    driver.victim, driver.touched = f"dlbench-{run_id}-bm-1", []
    prov.driver = driver
    made: list[Instance] = []
    try:
        with pytest.raises(Exception, match="maintenance"):
            made = prov.wait(prov.create(2, tags_for(run_id)), timeout=120)
    finally:
        for node_id in driver.touched:
            conn.baremetal.unset_node_maintenance(node_id)
        if made:  # the refusal never came: give the nodes back so the next tests find a clean cloud
            prov.delete(made)
    assert driver.touched, "the fault was never injected"
    assert_no_leaks(conn)


def test_competing_runs_never_share_nodes(clean_cloud):
    """Two runs each wanting more than half of the nodes: the second waits (all-or-nothing
    allocation, no deadlock) until the first releases, and they never hold the same node."""
    conn = clean_cloud
    total = len([n for n in conn.baremetal.nodes(details=True, resource_class=RESOURCE_CLASS)
                 if not n.is_maintenance])
    want = total // 2 + 1
    held: dict[str, set[str]] = {}
    errors: list[BaseException] = []
    first_done = threading.Event()

    def run(name: str, hold: float) -> None:
        prov = provisioner(conn, allocate_timeout=90)
        try:
            instances = prov.wait(prov.create(want, tags_for(name)), timeout=120)
            held[name] = {i.id for i in instances}
            time.sleep(hold)
            prov.delete(instances, timeout=120)
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised below
            errors.append(exc)
        finally:
            first_done.set()

    a = threading.Thread(target=run, args=("competeA", 2.0))
    b = threading.Thread(target=run, args=("competeB", 0.0))
    a.start()
    time.sleep(0.3)
    b.start()
    a.join(240)
    b.join(240)
    assert not errors, errors
    assert set(held) == {"competeA", "competeB"} and all(len(v) == want for v in held.values())
    assert_no_leaks(conn)


CONTENDED_STARTS = 8
"""Starts of two runs at the same moment: Ironic tries candidate nodes in random order, so a lost
race is random (2 in 10 contended starts of whole runs failed before issue 38); every start here
has both runs' allocations in flight together, where a whole run's had seconds of set-up between."""
RACE_WORDS = ("could not reserve any of", "filtered out during reservation")


def _started_together(conn: Any, names: tuple[str, str], want: int) -> tuple[dict[str, Any], list[str]]:
    """Two runs' all-or-nothing allocations released by one barrier; each holds its nodes for a
    moment, then gives them back. Per run: (node ids, held from, release asked); the errors.
    Another run can hold a node only after its release was asked for, so a run's node ids and
    its span are enough to show that two runs never held a node at once."""
    barrier = threading.Barrier(len(names))
    held: dict[str, Any] = {}
    errors: list[str] = []

    def run(name: str) -> None:
        driver = provisioner(conn, allocate_timeout=60).driver
        try:
            barrier.wait(30)
            instances = driver.allocate(Demand("bm", "bare_metal", want), tags_for(name), Deadline(90, "test allocate"))
            got = time.monotonic()
            time.sleep(0.5)  # not a wait: the run holds its nodes for a moment
            held[name] = ({i.id for i in instances}, got, time.monotonic())
            driver.delete(instances, Deadline(60, "test release"))
        except BaseException as exc:  # noqa: BLE001 - collected and reported by the caller
            errors.append(f"{name}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(150)
    return held, errors


def test_runs_started_together_wait_for_each_other_never_fail(clean_cloud, caplog, record_property):
    """Issue 38, item 1: two runs started at the same moment, each wanting more than half of the
    nodes, again and again. Their allocations race inside Ironic; a lost race (``could not
    reserve any of N suitable nodes``) or no free node left is capacity, so the loser waits for the
    winner's nodes instead of failing. Allocation only, through the driver's own all-or-nothing
    wait: a deploy and its cleaning would cost a minute per start and play no part in the race."""
    conn = clean_cloud
    total = len([n for n in conn.baremetal.nodes(details=True, resource_class=RESOURCE_CLASS)
                 if not n.is_maintenance])
    want = total // 2 + 1  # two runs never fit together: one of them waits in every start
    races = 0
    caplog.set_level("INFO", logger="dlbench.providers.ironic")
    for start in range(CONTENDED_STARTS):
        caplog.clear()
        names = (f"together{start}a", f"together{start}b")
        held, errors = _started_together(conn, names, want)
        assert not errors, f"contended start {start + 1} of {CONTENDED_STARTS}: " + "; ".join(errors)
        assert set(held) == set(names) and all(len(nodes) == want for nodes, _, _ in held.values()), held
        (first, a_from, a_until), (second, b_from, b_until) = held.values()
        assert not (first & second) or a_until <= b_from or b_until <= a_from, held  # never the same node at once
        # want x 2 > nodes: the runs shared a node, so one of them held it only after the other's
        # release: it waited (inside Ironic, whose allocation stays `allocating` through its own
        # lock retries, or in the driver's all-or-nothing retry after a lost race), never failed.
        assert first & second, held
        retries = [r.getMessage() for r in caplog.records if "not enough free nodes" in r.getMessage()]
        races += any(word in message for message in retries for word in RACE_WORDS)
    # CI of this stop, 8 starts: 2 lost a race inside Ironic ("all nodes were filtered out during
    # reservation") and waited in the driver; the other 6 waited inside Ironic; none failed.
    print(f"{CONTENDED_STARTS} contended starts, none failed; a run lost a race inside Ironic in {races}")
    record_property("contention", f"{CONTENDED_STARTS} starts, none failed, lost races {races}")
    assert_no_leaks(conn)


@pytest.mark.parametrize("said", [
    "could not reserve any of 2 suitable nodes",  # every candidate locked by a concurrent allocation (issue 38)
    "all nodes were filtered out during reservation",  # another allocation took them first
    "no available nodes match the resource class dlbench-bm",
    "no suitable nodes have the requested traits CUSTOM_GPU",
    "none of the requested nodes are available and match the resource class dlbench-bm",
])
def test_every_way_ironic_says_no_free_node_is_capacity(said):
    """Ironic's own words (ironic/conductor/allocations.py), as an allocation's last_error carries
    them, lead to the wait for capacity; anything else stays an error."""
    from dlbench.providers.ironic import is_no_capacity

    assert is_no_capacity(f"Failed to process allocation 6c863bf2: {said}.")
    assert not is_no_capacity("Unexpected exception during allocation: database is locked")


def test_too_few_nodes_fails_cleanly_after_allocate_timeout(clean_cloud, run_id):
    conn = clean_cloud
    holder = provisioner(conn)
    total = len(holder.matching_nodes())
    held = holder.create(total, tags_for(f"{run_id}h"))  # every node taken by another run
    try:
        prov = provisioner(conn, allocate_timeout=3)
        started = time.monotonic()
        with pytest.raises(ProvisioningError, match="not enough free nodes"):
            prov.create(1, tags_for(run_id))
        assert time.monotonic() - started < 30
        assert run_id not in prov.owned()
        assert {i.id for i in held} == {n.id for n in holder.matching_nodes() if n.allocation_id}
    finally:
        holder.wait(held, timeout=120)
        holder.delete(held, timeout=120)
    assert_no_leaks(conn)


def test_killed_midway_leaves_tagged_nodes_that_release_run_finds(clean_cloud, run_id):
    """The provisioning task dies after create (no wait, no release, e.g. SIGKILL): everything
    is still found by tag alone and released (what the teardown and the janitor do)."""
    conn = clean_cloud
    prov = provisioner(conn)
    prov.create(2, tags_for(run_id))  # deployment in flight, then the process "dies"
    fresh = provisioner(conn)                    # a new process knows only the run id
    found = fresh.owned(run_id)[run_id]
    assert len(found) == 2
    fresh.delete(found, timeout=120)
    assert_no_leaks(conn)


def test_sweep_releases_expired_and_orphaned_but_never_untagged(clean_cloud, run_id):
    conn = clean_cloud
    prov = provisioner(conn)
    nodes = prov.matching_nodes()
    untagged = nodes[0]
    # An allocation and a deployed node without our tag: someone else's, never touched.
    foreign = conn.baremetal.create_allocation(name=f"foreign-{run_id}", resource_class=RESOURCE_CLASS,
                                               extra={"owner": "someone-else"})
    try:
        deadline = time.monotonic() + 30
        while conn.baremetal.get_allocation(foreign.id).state == "allocating" and time.monotonic() < deadline:
            time.sleep(0.2)
        foreign = conn.baremetal.get_allocation(foreign.id)
        assert foreign.state == "active", foreign.last_error
        expired = prov.wait(prov.create(1, tags_for(f"{run_id}x", hours=-1)), timeout=120)
        live = prov.wait(prov.create(1, tags_for(f"{run_id}l", hours=1)), timeout=120)

        from dlbench.providers.janitor import sweep_provider

        ironic = settings()
        dry, kept = sweep_provider(ironic, lambda tags: True, dry_run=True)
        assert {k["run_id"] for k in kept} == {f"{run_id}l"} and "still active" in kept[0]["reason"]
        assert [a.name for a in dry] == [expired[0].name] and not dry[0].released
        assert conn.baremetal.get_node(expired[0].id).provision_state == "active"

        actions, _ = sweep_provider(ironic, lambda tags: tags.run_id != f"{run_id}l")  # live run "no longer running"
        reasons = {a.name: a.reason for a in actions}
        assert reasons[expired[0].name].startswith("expired")
        assert "no longer running" in reasons[live[0].name]
        assert all(a.released and not a.error for a in actions)
        assert conn.baremetal.get_allocation(foreign.id).node_id == foreign.node_id  # untouched
        assert untagged.id in {n.id for n in conn.baremetal.nodes()}
    finally:
        conn.baremetal.delete_allocation(foreign.id, ignore_missing=True)
    assert_no_leaks(conn)


def test_bad_input_fails_before_anything_is_provisioned(clean_cloud, run_id, monkeypatch):
    from dlbench.errors import ConfigError
    from dlbench.pipeline import steps
    from dlbench.request import parse_request

    conn = clean_cloud
    with pytest.raises(ConfigError, match=r"ironic.ready_timeout: Input should be greater than 0"):
        parse_request({"provider": "ironic", "ironic": {"cloud": CLOUD, "ready_timeout": 0}})
    with pytest.raises(ConfigError, match=r"ironic.poll_interval"):
        parse_request({"provider": "ironic", "ironic": {"cloud": CLOUD, "poll_interval": 0}})

    def validate(**ironic: Any) -> None:
        base = {"cloud": CLOUD, "clouds_file": CLOUDS_FILE, "resource_class": RESOURCE_CLASS}
        steps.validate({"provider": "ironic", "platforms": ["bare_metal"], "suites": ["cpu"],
                        "ironic": {**base, **ironic}})

    with pytest.raises(ConfigError, match=rf"ironic: unknown cloud 'no-such-cloud'.*allowed: .*{CLOUD}"):
        validate(cloud="no-such-cloud")
    monkeypatch.setenv("AIRFLOW_CONN_OS_NO_PASSWORD", '{"conn_type": "openstack", "host": "http://127.0.0.1:5000/v3", '
                       '"login": "bench", "extra": {"project_name": "dl"}}')
    with pytest.raises(ConfigError, match="missing credentials: password"):
        validate(conn_id="os_no_password")
    with pytest.raises(ConfigError, match="no nodes in resource class 'no-such-class'"):
        validate(resource_class="no-such-class")
    with pytest.raises(ConfigError, match="needs 999 nodes"):
        validate(nodes={"bare_metal": 999})
    with pytest.raises(ConfigError, match="ironic: platform 'virtual_machine' in nodes/runtime is not offered"):
        validate(nodes={"virtual_machine": 1})
    assert run_id not in provisioner(conn).owned()
    assert_no_leaks(conn)


def test_deploy_failed_on_two_nodes_of_three_names_both_and_releases_all(clean_cloud, run_id):
    """Ironic itself fails two deployments (``deploy failed``, knob deploy-fail) beside a healthy
    one: wait_ready() raises naming both failed nodes with Ironic's last_error (issue 38: only the
    first was named), and release by tag frees all three. Other nodes are parked in maintenance
    so the allocation must take the failing ones."""
    from tests.support.ironic import node_index
    from tests.support.knobs import fault

    conn = clean_cloud
    nodes = sorted(provisioner(conn).matching_nodes(), key=node_index)
    failing, healthy, parked = nodes[:2], nodes[2], nodes[3:]
    for node in failing:
        fault("deploy-fail", node_index(node))
    for node in parked:
        conn.baremetal.set_node_maintenance(node.id, reason="test: keep out of the allocation")
    try:
        prov = provisioner(conn)
        instances = prov.create(3, tags_for(run_id))
        assert {i.id for i in instances} == {failing[0].id, failing[1].id, healthy.id}
        with pytest.raises(ProvisioningError, match=r"deploy failed: .*(callback|Timeout)") as raised:
            prov.wait(instances, timeout=120)
        message = str(raised.value)
        assert "2 of 3 nodes failed to deploy" in message, message
        assert all(node.name in message for node in failing) and healthy.name not in message, message
        prov.delete(prov.owned(run_id)[run_id])  # what the lifecycle does on any failure: release by tag
        for node_id in (*(n.id for n in failing), healthy.id):
            node = conn.baremetal.get_node(node_id)
            assert node.provision_state in RELEASED and not node.allocation_id, node.provision_state
    finally:
        for node in parked:
            conn.baremetal.unset_node_maintenance(node.id)
        for node in failing:
            wait_available(conn, node.id)
            fault("deploy-ok", node_index(node))
    assert_no_leaks(conn)


def wait_available(conn: Any, node_id: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while conn.baremetal.get_node(node_id).provision_state != "available" and time.monotonic() < deadline:
        time.sleep(0.2)


def test_too_few_usable_nodes_names_the_one_in_maintenance_and_its_state(clean_cloud, run_id):
    """Asking for every node of the class while one is in maintenance: the refusal (before anything
    is provisioned) says how many are usable and names the node, its maintenance reason, its
    provision and power state; and a run that cannot get free nodes in time names who holds them."""
    from dlbench.errors import ConfigError, NoCapacity
    from dlbench.pipeline import steps

    conn = clean_cloud
    nodes = sorted(provisioner(conn).matching_nodes(), key=lambda n: n.name)
    parked = nodes[-1]
    conn.baremetal.set_node_maintenance(parked.id, reason="test: fan replaced")
    try:
        with pytest.raises(ConfigError) as refused:
            steps.validate({"provider": "ironic", "platforms": ["bare_metal"], "suites": ["cpu"],
                            "ironic": {"cloud": CLOUD, "clouds_file": CLOUDS_FILE, "resource_class": RESOURCE_CLASS,
                                       "nodes": {"bare_metal": len(nodes)}}})
        text = str(refused.value)
        assert f"needs {len(nodes)} nodes" in text and f"has only {len(nodes) - 1} usable of {len(nodes)}" in text
        assert f"{parked.name}: in maintenance ('test: fan replaced') [available, power off]" in text, text

        holder = provisioner(conn)
        held = holder.create(len(nodes) - 1, tags_for(f"{run_id}h"))  # every other node: another run's
        try:
            with pytest.raises(NoCapacity) as late:
                provisioner(conn, allocate_timeout=3).create(1, tags_for(run_id))
            text = str(late.value)
            assert "not enough free nodes" in text and f"0 of {len(nodes)} node(s) free now" in text, text
            assert f"held by run {run_id}h" in text and f"{parked.name}: in maintenance" in text, text
        finally:
            holder.wait(held, timeout=120)
            holder.delete(held, timeout=120)
    finally:
        conn.baremetal.unset_node_maintenance(parked.id)
    assert_no_leaks(conn)
