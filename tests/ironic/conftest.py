"""Fixtures for the Ironic tier: the real devcloud (``make devcloud-up``), never a fake API.

``DLBENCH_IRONIC_TEST_CLOUD`` / ``DLBENCH_IRONIC_TEST_CLOUDS_FILE`` /
``DLBENCH_IRONIC_TEST_RESOURCE_CLASS`` point the tier at another Ironic (default: cloud
``devcloud`` from ``.devcloud/clouds.yaml``, resource class ``dlbench-bm``).
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, require

CLOUD = os.environ.get("DLBENCH_IRONIC_TEST_CLOUD", "devcloud")
CLOUDS_FILE = os.environ.get("DLBENCH_IRONIC_TEST_CLOUDS_FILE", str(ROOT / ".devcloud" / "clouds.yaml"))
RESOURCE_CLASS = os.environ.get("DLBENCH_IRONIC_TEST_RESOURCE_CLASS", "dlbench-bm")
POLL = 0.2
SSH_KEY = os.environ.get("DLBENCH_IRONIC_TEST_SSH_KEY") or None
"""Only for an Ironic whose hosts do not install the config drive's key (the devcloud does)."""
IMAGE = Path(tempfile.gettempdir()) / "dlbench-ironic-test-image.raw"
"""A tiny image file: Ironic (on this machine) validates that a file:// image_source exists."""


def settings(**overrides: Any) -> Any:
    """IronicSettings for the test cloud with fast polling."""
    from dlbench.config import IronicSettings

    if not IMAGE.exists():
        IMAGE.write_bytes(b"\0" * 4096)
    base: dict[str, Any] = dict(image_source=f"file://{IMAGE}", cloud=CLOUD, clouds_file=CLOUDS_FILE,
                                resource_class=RESOURCE_CLASS,
                                poll_interval=POLL, allocate_timeout=60, deploy_timeout=120, ssh_timeout=60,
                                undeploy_timeout=120, expiry_hours=1, ssh_key_path=SSH_KEY)
    base.update(overrides)
    return IronicSettings(**base)


@pytest.fixture(scope="session")
def cloud_conn() -> Any:
    """An openstacksdk connection to the devcloud; skips (fails under CI) when it is not up."""
    from dlbench.hooks.openstack import CloudConfigError, connect

    require(Path(CLOUDS_FILE).exists(), f"no devcloud: {CLOUDS_FILE} missing (run `make devcloud-up`)")
    try:
        conn = connect(CLOUD, config_file=CLOUDS_FILE)
        nodes = list(conn.baremetal.nodes(resource_class=RESOURCE_CLASS))
    except (CloudConfigError, Exception) as exc:  # noqa: BLE001 - any failure = devcloud not usable
        require(False, f"devcloud not reachable ({type(exc).__name__}: {exc}); run `make devcloud-up`")
        raise
    require(len(nodes) >= 2, f"devcloud has {len(nodes)} node(s) in {RESOURCE_CLASS}; the tier needs 2")
    return conn


@pytest.fixture
def run_id() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def clean_cloud(cloud_conn: Any) -> Any:
    """Asserts before and after the test that nothing of ours is left on the devcloud."""
    wait_clean(cloud_conn, timeout=120)
    yield cloud_conn
    wait_clean(cloud_conn, timeout=5)
    assert_no_leaks(cloud_conn)


def leaks(conn: Any) -> list[str]:
    """Everything that shows a run still holds the devcloud: allocations, tags, non-available nodes."""
    found = [f"allocation {a.name or a.id} (node {a.node_id}, state {a.state})" for a in conn.baremetal.allocations()]
    for node in conn.baremetal.nodes(details=True, resource_class=RESOURCE_CLASS):
        if node.provision_state != "available":
            found.append(f"node {node.name} in {node.provision_state}")
        if node.allocation_id or node.instance_id:
            found.append(f"node {node.name} allocation={node.allocation_id} instance={node.instance_id}")
        ours = sorted(k for k in (node.extra or {}) if k.startswith("dlbench"))
        if ours:
            found.append(f"node {node.name} still tagged {ours}")
    return found


def wait_clean(conn: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while leaks(conn) and time.monotonic() < deadline:
        time.sleep(POLL)


def assert_no_leaks(conn: Any) -> None:
    left = leaks(conn)
    assert not left, f"leaked: {left}"


def api_pids(endpoint_port: int) -> list[int]:
    """The Ironic processes behind the API port: the listener, its ironic parent and children."""
    import subprocess

    out = subprocess.run(["ss", "-Htlnp", f"sport = :{endpoint_port}"], capture_output=True, text=True).stdout
    listeners = {int(p) for p in __import__("re").findall(r"pid=(\d+)", out)}

    def cmd(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return ""

    def parent(pid: int) -> int:
        try:
            return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return 0

    roots = set(listeners)
    for pid in listeners:
        ppid = parent(pid)
        if ppid > 1 and "ironic" in cmd(ppid):
            roots.add(ppid)
    every = set(roots)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and parent(int(entry.name)) in roots and "ironic" in cmd(int(entry.name)):
            every.add(int(entry.name))
    return sorted(every)


class frozen_api:  # noqa: N801 - used as a context manager, reads like one
    """Freeze the Ironic API and conductor (SIGSTOP) for the duration: requests hang and time
    out, exactly like an API host that stopped answering; SIGCONT brings it back."""

    def __init__(self, port: int) -> None:
        self.pids = api_pids(port)

    def __enter__(self) -> frozen_api:
        import signal

        require(bool(self.pids), "cannot find the Ironic API process to freeze")
        for pid in self.pids:
            os.kill(pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def api_port() -> int:
    from urllib.parse import urlparse

    from dlbench.hooks.openstack import resolve

    return urlparse(resolve(CLOUD, config_file=CLOUDS_FILE).endpoint or "http://127.0.0.1:6385").port or 6385
