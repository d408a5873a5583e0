"""Ironic that cleans (issue 25): the devcloud's Ironic runs with automated cleaning on, so every
undeploy is ``deleting`` -> ``cleaning`` -> ``available``. These tests lengthen the cleaning with
the ``slow-clean`` knob (docs/devcloud.md) so that what a release, a following run and the
janitor do meanwhile is really exercised, and fail a cleaning with ``clean-fail`` (a real Ironic
``clean wait`` that times out)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.ironic import assert_no_leaks, node_index, own_allocations, settings
from tests.support.knobs import fault

pytestmark = pytest.mark.ironic_wide  # slow-clean and its reset restart Ironic (tests/turns.py)

CLEAN_S = 15
"""The slow-clean knob's seconds per cleaning: far longer than an undeploy's tear-down (~1-4 s)."""
RELEASE_MAX_S = 8
"""A release waits for the tear-down only (measured 3.5 s on 2 shared cores), never the cleaning."""


def _driver(**overrides: Any) -> Any:
    from dlbench.providers.registry import driver_for

    return driver_for(settings(**overrides))


def _tags(run_id: str) -> Any:
    from dlbench.providers.base import Tags

    return Tags(run_id=run_id, expires_at=datetime.now(UTC) + timedelta(hours=1))


def _deploy(driver: Any, run_id: str, count: int) -> list[Any]:
    from dlbench.polling import Deadline
    from dlbench.providers.base import BootConfig, Demand

    instances = driver.create(Demand("bm", "bare_metal", count), _tags(run_id), BootConfig(public_key=""),
                              Deadline(120, "create"))
    return list(driver.wait_ready(instances, Deadline(120, "ready")))


def _wait_available(conn: Any, names: set[str], timeout: float) -> tuple[float, set[str]]:
    """(seconds until every named node is available, the states seen meanwhile)."""
    started, seen = time.monotonic(), set()
    while time.monotonic() - started < timeout:
        states = {n.name: n.provision_state for n in conn.baremetal.nodes(details=True) if n.name in names}
        seen |= set(states.values())
        if all(s == "available" for s in states.values()):
            return time.monotonic() - started, seen
        time.sleep(0.3)
    raise AssertionError(f"nodes {sorted(names)} not available within {timeout} s (seen {sorted(seen)})")


@pytest.fixture
def slow_clean(clean_cloud: Any) -> Any:
    fault("slow-clean", CLEAN_S)
    yield clean_cloud
    fault("reset")  # waits for no node cleaning, then restores the normal cleaning delay


def test_release_returns_before_cleaning_ends_and_the_node_cleans_to_available(slow_clean, run_id):
    from dlbench.polling import Deadline

    conn, driver = slow_clean, _driver()
    instances = _deploy(driver, run_id, 1)
    name = conn.baremetal.get_node(instances[0].id).name
    started = time.monotonic()
    driver.delete(instances, Deadline(120, "release"))
    release_s = time.monotonic() - started
    node = conn.baremetal.get_node(instances[0].id)
    assert node.provision_state in ("cleaning", "clean wait"), node.provision_state  # Ironic's now
    assert not node.allocation_id and not [k for k in node.extra or {} if k.startswith("dlbench")]
    assert not own_allocations(conn)
    cleaning_s, seen = _wait_available(conn, {name}, 120)
    print(f"release {release_s:.1f} s, then cleaning {cleaning_s:.1f} s more")
    assert release_s < RELEASE_MAX_S and release_s + cleaning_s > CLEAN_S, (release_s, cleaning_s)
    assert "cleaning" in seen
    assert_no_leaks(conn)


def test_a_run_started_while_nodes_clean_waits_and_takes_them_once_available(slow_clean, run_id, caplog):
    from dlbench.polling import Deadline

    conn, driver = slow_clean, _driver(allocate_timeout=120)
    total = len(list(conn.baremetal.nodes(resource_class=settings().resource_class)))
    first = _deploy(driver, run_id, total)
    driver.delete(first, Deadline(120, "release"))
    released = time.monotonic()
    with caplog.at_level(logging.INFO, logger="dlbench.providers.ironic"):
        second = _deploy(driver, f"{run_id}b", total)  # every node: must wait for all cleanings
    waited = time.monotonic() - released
    try:
        assert waited > CLEAN_S - RELEASE_MAX_S, waited
        assert {i.id for i in second} == {i.id for i in first}
        waits = [r.getMessage() for r in caplog.records if "not enough free nodes" in r.getMessage()]
        assert waits and "provision state cleaning" in waits[0], waits[:1]
    finally:
        driver.delete(second, Deadline(120, "release"))
    _wait_available(conn, {conn.baremetal.get_node(i.id).name for i in second}, 120)
    assert_no_leaks(conn)


def test_two_concurrent_janitor_sweeps_finish_quickly_and_report_each_node_once(slow_clean, run_id):
    from dlbench.providers.sweep import sweep_driver

    conn, driver = slow_clean, _driver()
    instances = _deploy(driver, run_id, 2)
    reports: list[list[Any]] = []
    seconds: list[float] = []

    def sweep() -> None:
        started = time.monotonic()
        actions, _ = sweep_driver(_driver(), 120, lambda tags: tags.run_id != run_id)
        seconds.append(time.monotonic() - started)
        reports.append([a for a in actions if a.run_id == run_id])

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    print(f"sweeps took {seconds}")
    assert len(seconds) == 2 and max(seconds) < RELEASE_MAX_S + 2, seconds  # not the whole cleaning
    released = [a.resource_id for report in reports for a in report if a.released]
    assert sorted(released) == sorted(i.id for i in instances), reports  # each node once, none twice
    assert all(not a.error for report in reports for a in report), reports
    _wait_available(conn, {conn.baremetal.get_node(i.id).name for i in instances}, 120)
    assert_no_leaks(conn)


def test_a_clean_failed_node_is_named_to_the_operator_and_never_allocated(clean_cloud, run_id):
    from dlbench.errors import NoCapacity
    from dlbench.polling import Deadline
    from dlbench.providers.janitor import sweep

    conn, driver = clean_cloud, _driver(allocate_timeout=20)
    instances = _deploy(driver, run_id, 1)
    node = conn.baremetal.get_node(instances[0].id)
    fault("clean-fail", node_index(node))  # its next cleaning waits for an agent that never calls back
    try:
        driver.delete(instances, Deadline(120, "release"))
        deadline = time.monotonic() + 60
        while conn.baremetal.get_node(node.id).provision_state != "clean failed":
            assert time.monotonic() < deadline, conn.baremetal.get_node(node.id).provision_state
            time.sleep(0.5)
        total = len(list(conn.baremetal.nodes(resource_class=settings().resource_class)))
        with pytest.raises(NoCapacity) as refused:  # every node: the failed one is not taken
            _deploy(driver, f"{run_id}b", total)
        assert f"{node.name}: provision state clean failed" in str(refused.value), refused.value
        assert "operator" in str(refused.value)
        # Ironic clears a failed cleaning's last_error a while later (22 s in issue 38): what it
        # said is still named, from the node's history.
        deadline = time.monotonic() + 60
        while conn.baremetal.get_node(node.id).last_error:
            assert time.monotonic() < deadline, "Ironic kept last_error"
            time.sleep(1.0)
        report = sweep([settings()], lambda tags: True, docker=False, local_vms=False)
        (item,) = [item for item in report["operator"] if node.name in item and "clean failed" in item]
        assert "no last_error" not in item and "node history" in item, item
        assert conn.baremetal.get_node(node.id).provision_state == "clean failed"  # never silently reused
    finally:
        fault("reset")  # manage -> fake deploy interface -> provide: cleaned and available again
    _wait_available(conn, {node.name}, 120)
    assert_no_leaks(conn)
