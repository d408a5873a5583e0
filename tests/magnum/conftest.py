"""Fixtures for the Magnum tier: the devcloud's real Magnum API and conductor (its own cluster
driver makes clusters of Ironic nodes behind a real Kubernetes control plane; docs/magnum.md).

``DLBENCH_MAGNUM_TEST_CLOUD`` / ``DLBENCH_MAGNUM_TEST_CLOUDS_FILE`` point the tier at another cloud
(default: cloud ``devcloud-nova`` from ``.devcloud/clouds.yaml``, whose catalog has Magnum).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.magnum import (
    CLOUD,
    CLOUDS_FILE,
    GUARD,
    coe_get,
)
from tests.support.prereqs import require


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
def clean_magnum(magnum_conn: Any) -> Iterator[Any]:
    """Nothing of ours left on the devcloud's Magnum after the test (:data:`tests.support.magnum.GUARD`)."""
    yield from GUARD.around(magnum_conn)
