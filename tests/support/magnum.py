"""The Magnum tier's cloud: the devcloud's real Magnum API and conductor (or another cloud, by
environment), its test settings and cluster template, what counts as a leak there (clusters, and
Ironic nodes a cluster still holds) and how a leak is scrubbed.

``DLBENCH_MAGNUM_TEST_CLOUD`` / ``DLBENCH_MAGNUM_TEST_CLOUDS_FILE`` point the tier at another cloud
(default: cloud ``devcloud-nova`` from ``.devcloud/clouds.yaml``, whose catalog has Magnum)."""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

from tests.support import devcloud
from tests.support.knobs import fault as shared_fault
from tests.support.leaks import LeakGuard

CLOUD = os.environ.get("DLBENCH_MAGNUM_TEST_CLOUD", "devcloud-nova")
CLOUDS_FILE = os.environ.get("DLBENCH_MAGNUM_TEST_CLOUDS_FILE", str(devcloud.CLOUDS_FILE))
TEMPLATE = "dlbench-test-k8s"
POLL = 0.3
IRONIC = devcloud.ENDPOINT


def settings(**overrides: Any) -> Any:
    """MagnumSettings for the devcloud: a bare-metal template made on first use, fast polling."""
    from dlbench.providers.magnum import MagnumSettings

    base: dict[str, Any] = dict(
        cloud=CLOUD, clouds_file=CLOUDS_FILE, cluster_template=TEMPLATE, poll_interval=POLL, ready_timeout=180,
        release_timeout=180, api_timeout=60, expiry_hours=1, api_retry_seconds=60,
        template={"image": "dlbench-k8s", "flavor": "dlbench.small", "server_type": "bm", "network_driver": "flannel",
                  "docker_volume_size": 10, "labels": {"devcloud_image": "dlbench-node"}})
    base.update(overrides)
    return MagnumSettings(**base)


def coe_get(conn: Any, path: str) -> Any:
    return conn.container_infrastructure_management.get(path, headers={
        "OpenStack-API-Version": "container-infra latest"})


def ironic_nodes() -> list[dict[str, Any]]:
    req = urllib.request.Request(f"{IRONIC}/v1/nodes?fields=name,provision_state,extra,instance_uuid",
                                 headers={"X-OpenStack-Ironic-API-Version": "latest"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())["nodes"]


def leaks(conn: Any) -> list[str]:
    """Clusters of ours still in Magnum, Ironic nodes still held by a Magnum cluster."""
    found = [f"cluster {c['name']} ({c.get('status')})" for c in coe_get(conn, "/clusters").json()["clusters"]
             if c["name"].startswith("dlbench-")]
    found += [f"node {n['name']} ({n['provision_state']}, cluster {n['extra']['magnum_cluster']})"
              for n in ironic_nodes() if "magnum_cluster" in (n.get("extra") or {})]
    return found


def wait_clean(conn: Any, timeout: float) -> list[str]:
    return GUARD.wait_clean(conn, timeout)


def scrub(conn: Any) -> None:
    """Delete the clusters a test left (Magnum releases their nodes), only after a leak check has
    already failed: one leaking test fails, the next ones find a clean Magnum (the Ironic tier's
    ``scrub``, same reason)."""
    for cluster in coe_get(conn, "/clusters").json()["clusters"]:
        if cluster["name"].startswith("dlbench-") and cluster.get("status") != "DELETE_IN_PROGRESS":
            conn.container_infrastructure_management.delete(
                f"/clusters/{cluster['uuid']}", headers={"OpenStack-API-Version": "container-infra latest"})
    wait_clean(conn, 180)


def fault(knob: str, *args: object) -> None:
    """A devcloud knob (docs/magnum.md): magnum-api-stop/start, cluster-create-failed [n]/ok, magnum-reset
    (here: the API started again and cluster creation back to normal)."""
    if knob == "magnum-reset":
        knob = "cluster-create-ok"
        shared_fault("magnum-api-start")
    shared_fault(knob, *args)


GUARD = LeakGuard("the devcloud's Magnum", leaks, scrub, lambda: fault("magnum-reset"), POLL)
