"""Fixtures of the execution tier: real machines deployed through the devcloud's real Ironic.

The nodes and their :class:`~tests.support.fleet.Fleet` are in :mod:`tests.support.fleet` (the
Kubernetes tier deploys with them too).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleet import (
    NODE_IMAGE,
    Fleet,
    conn,  # noqa: F401 - fixture
)
from tests.support.prereqs import require


@pytest.fixture
def fleet(conn: Any, tmp_path: Path) -> Iterator[Fleet]:  # noqa: F811
    nodes = Fleet(conn, tmp_path)
    yield nodes
    nodes.release()


@pytest.fixture(scope="module")
def module_fleet(conn: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:  # noqa: F811
    nodes = Fleet(conn, tmp_path_factory.mktemp("fleet"))
    yield nodes
    nodes.release()


@pytest.fixture(scope="package")
def engine_node(conn: Any, tmp_path_factory: pytest.TempPathFactory, workload_image: str) -> Iterator[Any]:  # noqa: F811
    """One node with its own container engine and the workload image loaded by prepare (the
    load takes about a minute: done once for this tier, shared by its docker-runtime tests, and
    released when the tier ends: the next tiers' leak checks need every node free)."""
    from dlbench.execution.prepare import prepare

    nodes = Fleet(conn, tmp_path_factory.mktemp("engine-fleet"))
    try:
        (machine,) = nodes.deploy(1, image="dlbench-node" if NODE_IMAGE.exists() else "stock")
        with machine.host() as host:
            prep = prepare(host, host_runtime=False, docker_image=workload_image)
        require(bool(prep.engine), f"no container engine on the devcloud node: {prep.engine_reason}")
        assert prep.image_loaded, prep.image_reason
        yield machine, prep
    finally:
        nodes.release()
