"""The Magnum driver against the devcloud's real Magnum API and conductor: template made or reused,
cluster CREATE_COMPLETE with nodes that are Ironic machines, kubeconfig the way `openstack coe
cluster config` makes it (the Kubernetes API accepts it; 0600), CREATE_FAILED with Magnum's reason,
the API down and back, delete until gone, the janitor by label. Nothing is left behind."""

from __future__ import annotations

import stat
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from dlbench.polling import Deadline
from dlbench.providers.base import BootConfig, Demand, Tags
from dlbench.providers.magnum import MagnumDriver, MagnumError
from tests.support.magnum import TEMPLATE, fault, settings

DEMAND = Demand(role="k8s", platform="container_on_bare_metal", count=1)
BOOT = BootConfig(public_key="")


def test_cluster_kubeconfig_api_and_delete(clean_magnum, run_id, tmp_path):
    driver = MagnumDriver(settings())
    driver.preflight([DEMAND])
    assert driver.template()["name"] == TEMPLATE  # made once, then reused by name
    (cluster,) = driver.create(DEMAND, Tags(run_id=run_id), BOOT, Deadline(60, "create"))
    try:
        driver.wait_ready([cluster], Deadline(180, "ready"))
        path = tmp_path / "run" / "cluster.kubeconfig"
        driver.write_kubeconfig(cluster, path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert cluster.address and cluster.address.startswith("https://127.0.0.1:")
        driver.wait_api(cluster, path, Deadline(60, "api"))
        from kubernetes import client

        from dlbench.execution.kubernetes.client import api_client

        nodes = client.CoreV1Api(api_client(str(path))).list_node().items
        assert [n.status.addresses[0].address for n in nodes] == cluster.details["node_addresses"]
        found = driver.find(run_id)
        assert [i.id for i in found[run_id]] == [cluster.id]
    finally:
        deleted = driver.delete([cluster], Deadline(180, "delete"))
    print(f"\nMagnum timings: {cluster.timings}, delete {deleted[cluster.id]:.1f} s")
    assert set(cluster.timings) == {"create_to_complete", "kubeconfig", "api_reachable"}
    assert driver.find(run_id) == {}


def test_create_failed_names_magnum_reason(clean_magnum, run_id):
    driver = MagnumDriver(settings())
    fault("cluster-create-failed", 1)
    (cluster,) = driver.create(DEMAND, Tags(run_id=run_id), BOOT, Deadline(60, "create"))
    try:
        with pytest.raises(MagnumError, match=r"CREATE_FAILED: devcloud fault cluster-create-failed.*faults"):
            driver.wait_ready([cluster], Deadline(120, "ready"))
    finally:
        driver.delete([cluster], Deadline(120, "delete"))


def test_unknown_template_refused_before_anything(clean_magnum):
    driver = MagnumDriver(settings(cluster_template="no-such-template", template=None))
    with pytest.raises(MagnumError, match=r"magnum.cluster_template: no template 'no-such-template'"):
        driver.preflight([DEMAND])


def test_api_down_then_back_is_retried(clean_magnum):
    driver = MagnumDriver(settings(api_retry_seconds=60))
    driver.preflight([DEMAND])  # connection made while up
    fault("magnum-api-stop")
    restart = threading.Timer(3.0, fault, args=("magnum-api-start",))
    restart.start()
    started = time.monotonic()
    try:
        assert isinstance(driver.find(), dict)
    finally:
        restart.join()
    assert time.monotonic() - started >= 2.5


def test_api_down_fails_with_the_cause(clean_magnum):
    driver = MagnumDriver(settings(api_retry_seconds=2))
    driver.preflight([DEMAND])
    fault("magnum-api-stop")
    with pytest.raises(Exception, match=r"(?i)connect|refused|unable|Magnum"):
        driver.find()


def test_janitor_releases_an_expired_cluster(clean_magnum, run_id):
    from dlbench.providers.sweep import sweep_driver

    driver = MagnumDriver(settings())
    tags = Tags(run_id=run_id, expires_at=datetime.now(UTC) - timedelta(minutes=1))
    (cluster,) = driver.create(DEMAND, tags, BOOT, Deadline(60, "create"))
    driver.wait_ready([cluster], Deadline(180, "ready"))
    actions, _ = sweep_driver(driver, 180, lambda t: t.run_id != run_id)
    mine = [a for a in actions if a.run_id == run_id]
    assert [(a.resource_id, a.released) for a in mine] == [(cluster.id, True)], actions
    assert driver.find(run_id) == {}
