"""Fixtures for the Nova tier: the devcloud's real Keystone + Nova + Placement + Glance (and
Neutron with ML2/OVN enforcing security groups), never a fake compute API (docs/devcloud-nova.md).

``DLBENCH_NOVA_TEST_CLOUD`` / ``DLBENCH_NOVA_TEST_CLOUDS_FILE`` point the tier at another cloud
(default: cloud ``devcloud-nova`` from ``.devcloud/clouds.yaml``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.ironic import clean_cloud, cloud_conn  # noqa: F401 - the four-platform run uses Ironic too
from tests.support.nova import (
    ADMIN_CLOUD,
    CLOUDS_FILE,
    GUARD,
    connect,
)
from tests.support.prereqs import require


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
def clean_nova(nova_conn: Any) -> Iterator[Any]:
    """Nothing of ours left on the devcloud's Nova after the test (:data:`tests.support.nova.GUARD`)."""
    yield from GUARD.around(nova_conn)
