"""Ironic stops answering in the middle of a deployment and comes back: the run rides it out
(retries with backoff, never a hung task) and nothing leaks."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

import pytest

from dlbench.hooks.openstack import resolve
from dlbench.providers.base import Tags
from dlbench.providers.ironic import IronicDriver
from tests.ironic.test_provisioner import Prov
from tests.support.ironic import CLOUD, CLOUDS_FILE, assert_no_leaks, settings
from tests.support.knobs import fault

pytestmark = pytest.mark.ironic_wide  # every test stops, freezes or kills Ironic (tests/turns.py)


def prov_on(conn: object) -> Prov:
    prov = Prov(conn)
    prov.driver = IronicDriver(settings(), conn)
    return prov


@pytest.mark.parametrize(("down", "up"), [("api-stop", "api-start"), ("api-freeze", "api-thaw")],
                         ids=["refused", "hung"])
def test_api_down_during_deploy_then_back(clean_cloud, run_id, caplog, down, up):
    """``api-stop``: the ironic process is killed (connection refused) and restarted on the same
    DB; ``api-freeze``: it stops answering (requests time out). Either way the wait rides it out."""
    caplog.set_level(logging.WARNING, logger="dlbench.polling")
    fault("reset")
    spec = dataclasses.replace(resolve(CLOUD, config_file=CLOUDS_FILE), api_timeout=2)
    prov = prov_on(spec.connect())
    instances = prov.create(2, Tags(run_id))
    down_for = 6.0

    def outage_window() -> None:
        fault(down)
        try:
            time.sleep(down_for)
        finally:
            fault(up)

    thread = threading.Thread(target=outage_window)
    started = time.monotonic()
    thread.start()
    try:
        time.sleep(0.2)
        prov.wait(instances, timeout=180)
    finally:
        thread.join()
    assert time.monotonic() - started >= down_for
    assert "transient API error" in caplog.text  # the outage was seen and retried, not waited out blindly
    assert all(clean_cloud.baremetal.get_node(i.id).provision_state == "active" for i in instances)
    prov.delete(instances, timeout=120)
    assert_no_leaks(clean_cloud)


def test_ironic_crash_mid_deploy_fails_clearly_and_leaks_nothing(clean_cloud, run_id):
    """``api-kill``: the deployments in flight are lost; after the restart Ironic marks the
    nodes ``deploy failed``: wait_ready() reports Ironic's last_error; release by tag frees both."""
    from dlbench.errors import ProvisioningError

    prov = prov_on(resolve(CLOUD, config_file=CLOUDS_FILE).connect())
    instances = prov.create(2, Tags(run_id))
    fault("api-kill")
    try:
        time.sleep(1.0)
    finally:
        fault("api-start")
    with pytest.raises(ProvisioningError, match="deploy failed: .*resumed"):
        prov.wait(instances, timeout=120)
    prov.delete(prov.owned(run_id)[run_id])
    assert_no_leaks(clean_cloud)
