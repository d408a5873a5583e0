"""Fixtures for the Magnum tier: the devcloud's real Magnum API and conductor (its own cluster
driver makes clusters of Ironic nodes behind a real Kubernetes control plane; docs/magnum.md).

``DLBENCH_MAGNUM_TEST_CLOUD`` / ``DLBENCH_MAGNUM_TEST_CLOUDS_FILE`` point the tier at another cloud
(default: cloud ``devcloud-nova`` from ``.devcloud/clouds.yaml``, whose catalog has Magnum).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, require
from tests.knobs import fault as shared_fault

CLOUD = os.environ.get("DLBENCH_MAGNUM_TEST_CLOUD", "devcloud-nova")
CLOUDS_FILE = os.environ.get("DLBENCH_MAGNUM_TEST_CLOUDS_FILE", str(ROOT / ".devcloud" / "clouds.yaml"))
TEMPLATE = "dlbench-test-k8s"
POLL = 0.3
IRONIC = "http://127.0.0.1:6385"


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


@pytest.fixture(scope="session")
def magnum_conn() -> Any:
    """A connection as the benchmark user; skips (fails under CI) when the devcloud's Magnum is not up."""
    from dlbench.hooks.openstack import connect

    require(Path(CLOUDS_FILE).exists(), f"no devcloud: {CLOUDS_FILE} missing (run `make devcloud-up`)")
    try:
        conn = connect(CLOUD, config_file=CLOUDS_FILE)
        resp = coe_get(conn, "/clusters")
        resp.raise_for_status()
    except Exception as exc:  # noqa: BLE001 - any failure = the devcloud's Magnum is not usable
        require(False, f"devcloud Magnum not reachable ({type(exc).__name__}: {exc}); run `make magnum-install "
                       "devcloud-up`")
        raise
    return conn


@pytest.fixture
def run_id() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


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
    deadline = time.monotonic() + timeout
    left = leaks(conn)
    while left and time.monotonic() < deadline:
        time.sleep(POLL)
        left = leaks(conn)
    return left


def scrub(conn: Any) -> None:
    """Delete the clusters a test left (Magnum releases their nodes), only after a leak check has
    already failed: one leaking test fails, the next ones find a clean Magnum (the Ironic tier's
    ``scrub``, same reason)."""
    for cluster in coe_get(conn, "/clusters").json()["clusters"]:
        if cluster["name"].startswith("dlbench-") and cluster.get("status") != "DELETE_IN_PROGRESS":
            conn.container_infrastructure_management.delete(
                f"/clusters/{cluster['uuid']}", headers={"OpenStack-API-Version": "container-infra latest"})
    wait_clean(conn, 180)


@pytest.fixture
def clean_magnum(magnum_conn: Any) -> Any:
    """Nothing of ours after the test (knobs reset even when it failed), and a clean Magnum for the
    next test either way: what a failed test leaked is reported by it, then scrubbed."""
    if wait_clean(magnum_conn, 60):
        scrub(magnum_conn)  # an earlier test's leak (its own check failed): not this test's
    assert wait_clean(magnum_conn, 60) == []
    yield magnum_conn
    fault("magnum-reset")
    left = wait_clean(magnum_conn, 120)
    if left:
        scrub(magnum_conn)
    assert left == [], f"leaked on the devcloud's Magnum: {left}"


def fault(knob: str, *args: object) -> None:
    """A devcloud knob (docs/magnum.md): magnum-api-stop/start, cluster-create-failed [n]/ok, magnum-reset
    (here: the API started again and cluster creation back to normal)."""
    if knob == "magnum-reset":
        knob = "cluster-create-ok"
        shared_fault("magnum-api-start")
    shared_fault(knob, *args)
