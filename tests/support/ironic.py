"""The Ironic tier's cloud: the devcloud's real Ironic (or another, by environment), its test
settings, the connection and leak guard fixtures (the Nova tier's four-platform run uses them too),
what counts as a leak in this stream's pool and how a leak is scrubbed.

``DLBENCH_IRONIC_TEST_CLOUD`` / ``DLBENCH_IRONIC_TEST_CLOUDS_FILE`` /
``DLBENCH_IRONIC_TEST_RESOURCE_CLASS`` point the tier at another Ironic (default: cloud
``devcloud`` from ``.devcloud/clouds.yaml``, resource class ``dlbench-bm``)."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import devcloud
from tests.support.devcloud import NODE_IMAGE
from tests.support.knobs import fault
from tests.support.leaks import LeakGuard
from tests.support.prereqs import require

CLOUD = os.environ.get("DLBENCH_IRONIC_TEST_CLOUD", "devcloud")
CLOUDS_FILE = os.environ.get("DLBENCH_IRONIC_TEST_CLOUDS_FILE", str(devcloud.CLOUDS_FILE))
RESOURCE_CLASS = os.environ.get("DLBENCH_IRONIC_TEST_RESOURCE_CLASS", devcloud.MAIN_POOL_CLASS)
POLL = 0.2
SSH_KEY = os.environ.get("DLBENCH_IRONIC_TEST_SSH_KEY") or None
"""Only for an Ironic whose hosts do not install the config drive's key (the devcloud does)."""
IMAGE = Path(tempfile.gettempdir()) / "dlbench-ironic-test-image.raw"
"""A tiny image file: Ironic (on this machine) validates that a file:// image_source exists."""


"""The project's node image (``make node-image``): the devcloud boots a node from it when it is the
deploy's image_source; any other file boots the devcloud's stock Debian image (docs/devcloud.md)."""


def settings(**overrides: Any) -> Any:
    """IronicSettings for the test cloud with fast polling (stock image unless overridden)."""
    from dlbench.providers.ironic import IronicSettings

    if not IMAGE.exists():
        IMAGE.write_bytes(b"\0" * 4096)
    base: dict[str, Any] = dict(image_source=f"file://{IMAGE}", cloud=CLOUD, clouds_file=CLOUDS_FILE,
                                resource_class=RESOURCE_CLASS,
                                poll_interval=POLL, allocate_timeout=60, ready_timeout=120, ssh_timeout=60,
                                release_timeout=120, expiry_hours=1, ssh_key_path=SSH_KEY)
    base.update(overrides)
    return IronicSettings(**base)


def node_image() -> str:
    """image_source of the project's node image; required (CI builds it with `make node-image`)."""
    require(NODE_IMAGE.exists(), f"no node image at {NODE_IMAGE} (run `make node-image`)")
    return f"file://{NODE_IMAGE}"


@pytest.fixture(scope="session")
def cloud_conn() -> Any:
    """An openstacksdk connection to the devcloud; skips (fails under CI) when it is not up."""
    from dlbench.errors import CloudConfigError
    from dlbench.hooks.openstack import connect

    require(Path(CLOUDS_FILE).exists(), f"no devcloud: {CLOUDS_FILE} missing (run `make devcloud-up`)")
    try:
        conn = connect(CLOUD, config_file=CLOUDS_FILE)
        nodes = list(conn.baremetal.nodes(resource_class=RESOURCE_CLASS))
    except (CloudConfigError, Exception) as exc:  # noqa: BLE001 - any failure = devcloud not usable
        require(False, f"devcloud not reachable ({type(exc).__name__}: {exc}); run `make devcloud-up`")
        raise
    require(len(nodes) >= 2, f"devcloud has {len(nodes)} node(s) in {RESOURCE_CLASS}; the tier needs 2")
    return conn


@pytest.fixture
def clean_cloud(cloud_conn: Any) -> Iterator[Any]:
    """Nothing of ours left on this stream's pool after the test (:data:`GUARD`)."""
    yield from GUARD.around(cloud_conn)


RELEASED = ("available", "cleaning")
"""A released node: ``available``, or still ``cleaning`` (Ironic's automated cleaning after undeploy,
docs/devcloud.md: no run holds it; the next allocation waits for it). ``clean failed`` is a leak."""


def own_allocations(conn: Any) -> list[Any]:
    """The allocations in this tier's pool (``RESOURCE_CLASS``)."""
    return [a for a in conn.baremetal.allocations() if a.resource_class == RESOURCE_CLASS]


def leaks(conn: Any) -> list[str]:
    """Everything that shows a run still holds the devcloud's pool (``RESOURCE_CLASS``):
    allocations, tags, nodes neither available nor cleaning. Another pool's (the Kubernetes tier
    deploys on the second pool meanwhile: docs/testing.md) is not this tier's to judge."""
    found = [f"allocation {a.name or a.id} (node {a.node_id}, state {a.state})" for a in own_allocations(conn)]
    for node in conn.baremetal.nodes(details=True, resource_class=RESOURCE_CLASS):
        if node.is_maintenance:
            found.append(f"node {node.name} left in maintenance")
        if node.provision_state not in RELEASED:
            found.append(f"node {node.name} in {node.provision_state}")
        if node.allocation_id or node.instance_id:
            found.append(f"node {node.name} allocation={node.allocation_id} instance={node.instance_id}")
        ours = sorted(k for k in (node.extra or {}) if k.startswith("dlbench"))
        if ours:
            found.append(f"node {node.name} still tagged {ours}")
    return found


def wait_clean(conn: Any, timeout: float) -> list[str]:
    return GUARD.wait_clean(conn, timeout)


def assert_no_leaks(conn: Any) -> None:
    left = leaks(conn)
    assert not left, f"leaked: {left}"


SCRUB_WAIT = 180
"""Seconds the scrub gives a node to settle (a deploy finishing, an undeploy and its cleaning)."""


def scrub(conn: Any) -> None:
    """Give back everything of this pool (``RESOURCE_CLASS``) that a test left: out of maintenance,
    undeployed, a failed cleaning managed and provided again, allocations deleted, ``dlbench*``
    tags removed. Only after a test's leak check has failed, so it never hides a leak (the check
    reports what it found before this runs); it keeps that leak from failing every later test
    (the CI of stop 44: one leaked node, 37 later tests failed waiting for it)."""
    def settle(node: Any) -> Any:
        deadline = time.monotonic() + SCRUB_WAIT
        while node.provision_state.endswith("ing") and node.provision_state != "cleaning" \
                and time.monotonic() < deadline:  # deploying, deleting, wait call-back's deploy
            time.sleep(1)
            node = conn.baremetal.get_node(node.id)
        return node

    for node in conn.baremetal.nodes(details=True, resource_class=RESOURCE_CLASS):
        if node.is_maintenance:
            conn.baremetal.unset_node_maintenance(node.id)
        node = settle(conn.baremetal.get_node(node.id))
        if node.provision_state in ("active", "deploy failed", "wait call-back", "error"):
            conn.baremetal.set_node_provision_state(node.id, "deleted")
        elif node.provision_state == "clean failed":
            conn.baremetal.set_node_provision_state(node.id, "manage", wait=True, timeout=SCRUB_WAIT)
            conn.baremetal.set_node_provision_state(node.id, "provide")
        elif node.provision_state == "manageable":
            conn.baremetal.set_node_provision_state(node.id, "provide")
        ours = [k for k in (node.extra or {}) if k.startswith("dlbench")]
        if ours:
            conn.baremetal.patch_node(node.id, [{"op": "remove", "path": f"/extra/{k}"} for k in ours])
    deadline = time.monotonic() + SCRUB_WAIT
    for node in conn.baremetal.nodes(details=True, resource_class=RESOURCE_CLASS):
        while conn.baremetal.get_node(node.id).provision_state not in RELEASED + ("clean failed",) \
                and time.monotonic() < deadline:
            time.sleep(1)
    for allocation in own_allocations(conn):
        conn.baremetal.delete_allocation(allocation, ignore_missing=True)
    wait_clean(conn, timeout=SCRUB_WAIT)


def node_index(node: Any) -> int:
    """``devcloud-node-<i>`` -> i (the knobs take the index)."""
    return int(str(node.name).rsplit("-", 1)[1])


GUARD = LeakGuard("the devcloud's Ironic pool " + RESOURCE_CLASS, leaks, scrub, lambda: fault("reset"), POLL,
                  before_s=120, after_s=5)
"""Released nodes are ``cleaning`` at once (:data:`RELEASED`), so 5 s after a test is enough;
before it, an earlier test's nodes may still be deploying or undeploying."""
