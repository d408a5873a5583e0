"""Fixtures for the devcloud's own tests: the real Ironic API through raw openstacksdk.

The session fixture uses a running devcloud (CI runs ``make devcloud-up`` first); when none
runs and this machine can host one (root, ``make devcloud-install`` done) it brings one up with
the same script and takes it down again at the end, so nothing is left running.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.devcloud import (
    CLOUDS_FILE,
    MAIN_POOL_CLASS,
    STATE,
    api_answers,
    devcloud,
)
from tests.support.prereqs import require


@pytest.fixture(scope="session")
def conn() -> Iterator[Any]:
    """An openstacksdk connection to cloud ``devcloud``; brings the devcloud up if needed."""
    started_here = False
    if not (api_answers() and CLOUDS_FILE.exists()):
        require(os.geteuid() == 0, "the devcloud needs root (namespaces, veths, tc); run `make devcloud-up`")
        require((STATE / "venv" / "bin" / "ironic").exists(), "devcloud not installed: run `make devcloud-install`")
        devcloud("up")
        started_here = True
    import openstack

    os.environ["OS_CLIENT_CONFIG_FILE"] = str(CLOUDS_FILE)
    connection = openstack.connect(cloud="devcloud")
    nodes = list(connection.baremetal.nodes(resource_class=MAIN_POOL_CLASS))
    require(len(nodes) >= 2, f"the devcloud has {len(nodes)} node(s); these tests need 2 (DEVCLOUD_NODES)")
    yield connection
    if started_here:
        devcloud("down")


@pytest.fixture
def keypair(tmp_path: Path) -> Callable[[str], Path]:
    """Fresh ed25519 keys: ``keypair(name)`` -> private key path (public key next to it)."""
    def make(name: str) -> Path:
        path = tmp_path / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True)
        return path
    return make
