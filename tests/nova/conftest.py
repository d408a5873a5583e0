"""Fixtures for the Nova tier: the devcloud's real Keystone + Nova + Placement + Glance (and
Neutron with ML2/OVN enforcing security groups), never a fake compute API (docs/devcloud-nova.md).

``DLBENCH_NOVA_TEST_CLOUD`` / ``DLBENCH_NOVA_TEST_CLOUDS_FILE`` point the tier at another cloud
(default: cloud ``devcloud-nova`` from ``.devcloud/clouds.yaml``).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, require
from tests.ironic.conftest import clean_cloud, cloud_conn  # noqa: F401 - the four-platform run uses Ironic too
from tests.knobs import fault

CLOUD = os.environ.get("DLBENCH_NOVA_TEST_CLOUD", "devcloud-nova")
ADMIN_CLOUD = os.environ.get("DLBENCH_NOVA_TEST_ADMIN_CLOUD", "devcloud-admin")
CLOUDS_FILE = os.environ.get("DLBENCH_NOVA_TEST_CLOUDS_FILE", str(ROOT / ".devcloud" / "clouds.yaml"))
FLAVOR = os.environ.get("DLBENCH_NOVA_TEST_FLAVOR", "dlbench.small")
NETWORK = os.environ.get("DLBENCH_NOVA_TEST_NETWORK", "devcloud-net")
POLL = 0.3


def settings(**overrides: Any) -> Any:
    """NovaSettings for the test cloud (stock image unless overridden), fast polling."""
    from dlbench.providers.nova import NovaSettings

    base: dict[str, Any] = dict(cloud=CLOUD, clouds_file=CLOUDS_FILE, flavor=FLAVOR, image="stock", network=NETWORK,
                                poll_interval=POLL, ready_timeout=180, ssh_timeout=90, release_timeout=180,
                                expiry_hours=1, api_retry_seconds=60)
    base.update(overrides)
    return NovaSettings(**base)


def connect(cloud: str = CLOUD) -> Any:
    from dlbench.hooks.openstack import connect as open_cloud

    return open_cloud(cloud, config_file=CLOUDS_FILE)


@pytest.fixture(scope="session")
def nova_conn() -> Any:
    """A connection as the benchmark user; skips (fails under CI) when the devcloud's Nova is not up."""
    require(Path(CLOUDS_FILE).exists(), f"no devcloud: {CLOUDS_FILE} missing (run `make devcloud-up`)")
    try:
        conn = connect()
        list(conn.compute.flavors())
    except Exception as exc:  # noqa: BLE001 - any failure = the devcloud's Nova is not usable
        require(False, f"devcloud Nova not reachable ({type(exc).__name__}: {exc}); run `make devcloud-up`")
        raise
    return conn


@pytest.fixture(scope="session")
def admin_conn(nova_conn: Any) -> Any:
    return connect(ADMIN_CLOUD)


@pytest.fixture
def run_id() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def leaks(conn: Any) -> list[str]:
    """Everything of ours still on the cloud: servers, keypairs, server groups, security groups,
    and Neutron ports a deleted server left behind (Nova deletes the ports it made)."""
    servers = list(conn.compute.servers())
    found = [f"server {s.name} ({s.status})" for s in servers if (s.name or "").startswith("dlbench-")]
    found += [f"port {p.id} of deleted server {p.device_id}" for p in conn.network.ports()
              if (p.device_owner or "").startswith("compute:") and p.device_id not in {s.id for s in servers}]
    found += [f"keypair {k.name}" for k in conn.compute.keypairs() if (k.name or "").startswith("dlbench-")]
    found += [f"server group {g.name}" for g in conn.compute.server_groups() if (g.name or "").startswith("dlbench-")]
    found += [f"security group {g.name}" for g in conn.network.security_groups()
              if (g.name or "").startswith("dlbench-")]
    return found


def wait_clean(conn: Any, timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    left = leaks(conn)
    while left and time.monotonic() < deadline:
        time.sleep(POLL)
        left = leaks(conn)
    return left


def scrub(conn: Any) -> None:
    """Delete what a test left (servers first, then what they held), only after a leak check has
    already failed: one leaking test fails, the tests after it find a clean Nova (the Ironic tier's
    ``scrub``, same reason)."""
    for server in conn.compute.servers():
        if (server.name or "").startswith("dlbench-"):
            conn.compute.delete_server(server, ignore_missing=True)
    for server in conn.compute.servers():
        if (server.name or "").startswith("dlbench-"):
            conn.compute.wait_for_delete(server, wait=120)
    live = {s.id for s in conn.compute.servers()}
    for port in conn.network.ports():
        if (port.device_owner or "").startswith("compute:") and port.device_id not in live:
            conn.network.delete_port(port, ignore_missing=True)
    for keypair in conn.compute.keypairs():
        if (keypair.name or "").startswith("dlbench-"):
            conn.compute.delete_keypair(keypair, ignore_missing=True)
    for group in conn.compute.server_groups():
        if (group.name or "").startswith("dlbench-"):
            conn.compute.delete_server_group(group, ignore_missing=True)
    for group in conn.network.security_groups():
        if (group.name or "").startswith("dlbench-"):
            conn.network.delete_security_group(group, ignore_missing=True)


@pytest.fixture
def clean_nova(nova_conn: Any) -> Any:
    """Nothing of ours after the test (knobs reset even when it failed), and a clean Nova for the
    next test either way: what a failed test leaked is reported by it, then scrubbed."""
    if wait_clean(nova_conn, 60):
        scrub(nova_conn)  # an earlier test's leak (its own check failed): not this test's
    assert wait_clean(nova_conn, 60) == []
    yield nova_conn
    fault("reset")
    left = wait_clean(nova_conn, 120)
    if left:
        scrub(nova_conn)
    assert left == [], f"leaked on the devcloud's Nova: {left}"


