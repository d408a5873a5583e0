"""The Nova tier's cloud: the devcloud's real Keystone, Nova, Placement, Glance and Neutron (or
another cloud, by environment), its test settings, what counts as a leak there and how a leak is
scrubbed.

``DLBENCH_NOVA_TEST_CLOUD`` / ``DLBENCH_NOVA_TEST_CLOUDS_FILE`` point the tier at another cloud
(default: cloud ``devcloud-nova`` from ``.devcloud/clouds.yaml``)."""

from __future__ import annotations

import os
from typing import Any

from tests.support import devcloud
from tests.support.knobs import fault
from tests.support.leaks import LeakGuard

CLOUD = os.environ.get("DLBENCH_NOVA_TEST_CLOUD", "devcloud-nova")
ADMIN_CLOUD = os.environ.get("DLBENCH_NOVA_TEST_ADMIN_CLOUD", "devcloud-admin")
CLOUDS_FILE = os.environ.get("DLBENCH_NOVA_TEST_CLOUDS_FILE", str(devcloud.CLOUDS_FILE))
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
    return GUARD.wait_clean(conn, timeout)


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


GUARD = LeakGuard("the devcloud's Nova", leaks, scrub, lambda: fault("reset"), POLL)
