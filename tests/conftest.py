"""The session's set-up (a private Airflow home and DLBENCH_HOME, set before anything imports
Airflow), the stream rule and the fixtures every tier uses. What tests share as code is in
:mod:`tests.support` (the prerequisite rule: :func:`tests.support.prereqs.require`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.streams import LAST, SECOND_POOL, STREAMS
from tests.support.prereqs import REQUIRE_ALL, ROOT, require
from tests.turns import settle, turn

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# XLA compiles the tests' JAX programs without LLVM's backend optimizations: the same programs,
# the same results the tests assert, 40 % less CPU per job (InceptionV3 smoke: 49 -> 29 s of CPU,
# stop 47), and nothing a test asserts is a speed. Host processes only (a container's environment
# is the executor's); docs/testing.md.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")

# Tests never touch the user's Airflow metadata DB or data dir: both live in a session temp dir.
# Set before anything imports Airflow (its configuration is read at import time).
_SESSION_DIR = Path(tempfile.mkdtemp(prefix="dlbench-tests-"))
os.environ["AIRFLOW_HOME"] = os.environ.get("DLBENCH_TEST_AIRFLOW_HOME", str(_SESSION_DIR / "airflow"))
os.environ["DLBENCH_HOME"] = os.environ.get("DLBENCH_TEST_HOME", str(_SESSION_DIR / "dlbench"))
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
# One Fernet key for the session's processes (this one, `airflow db migrate`, the settings loader,
# dag.test's task runner): without it, whichever imports Airflow first decides the key (the one
# airflow.cfg gets, or none), and Variables written by one are unreadable ciphertext to another.
if "AIRFLOW__CORE__FERNET_KEY" not in os.environ:
    from cryptography.fernet import Fernet

    os.environ["AIRFLOW__CORE__FERNET_KEY"] = Fernet.generate_key().decode()
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(ROOT / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(ROOT / "plugins")
if str(ROOT / "include") not in sys.path:
    sys.path.insert(0, str(ROOT / "include"))

from dlbench.settings import RETRY_DELAY  # noqa: E402 - this checkout's (the path above); imports no Airflow

# A task's retry waits 1 s, not the product's 30 (docs/settings.md: a blip's allowance): a test's
# retries are of failures it made on purpose, which no wait cures (stop 37: 120 s of the local stream).
os.environ.setdefault(RETRY_DELAY.env, "1")


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


RUN_ID_PREFIX = {"kubernetes": "k", "execution": "x"}
"""A test run id's first letter by tier (``t`` elsewhere): a run id is a Kubernetes namespace's name
there (a letter first), and a glance at a leftover tells which tier made it."""


@pytest.fixture
def run_id(request: pytest.FixtureRequest) -> str:
    """A fresh run id of this test (what the product's ``safe_run_id`` of a DAG run looks like)."""
    tier = request.path.relative_to(ROOT / "tests").parts[0]
    return f"{RUN_ID_PREFIX.get(tier, 't')}{uuid.uuid4().hex[:10]}"


# -- streams (tests/streams.py: `make test` runs them side by side) ---------------------------------
DEVCLOUD_TIERS = frozenset({"ironic", "nova", "magnum", "kubernetes", "devcloud_infra"})
"""Tiers (tests/<tier>) that are about the devcloud's clouds as a whole."""
SECOND_POOL_TIERS = frozenset({"kubernetes"})
"""Devcloud tiers that need only Ironic nodes (and their own control planes): they deploy on the
devcloud's second node pool, in their own stream (``tests.streams.SECOND_POOL``)."""
DEVCLOUD_FIXTURES = {"execution": frozenset({"conn", "fleet", "module_fleet", "engine_node"})}
"""Fixtures that deploy devcloud machines, per tier whose conftest defines them: a test elsewhere
that uses one is a devcloud test too."""


def stream_of(item: pytest.Item) -> str:
    """``devcloud``, ``local``, ``kubernetes`` or ``alone``: the one rule that puts each test in
    exactly one stream.

    A test marked ``alone`` (its bound is a share of all the machine's CPU) or ``quiet`` (a timing
    bound of the product) runs after the streams have ended, with nothing else running. A test of
    a tier that needs only Ironic nodes (:data:`SECOND_POOL_TIERS`) deploys on the devcloud's
    second node pool, in its own stream. Other devcloud tests share the devcloud's three nodes,
    hypervisors and Magnum API, so they run in one ordered stream: a test of a devcloud tier, one
    marked ``devcloud``, or one that uses a fixture that deploys devcloud machines."""
    if item.get_closest_marker("alone") is not None or item.get_closest_marker("quiet") is not None:
        return LAST
    rel = Path(str(item.path)).resolve().relative_to(ROOT / "tests").parts
    if rel[0] in SECOND_POOL_TIERS:
        return SECOND_POOL
    if rel[0] in DEVCLOUD_TIERS or item.get_closest_marker("devcloud") is not None:
        return "devcloud"
    for name, defs in item._fixtureinfo.name2fixturedefs.items():  # noqa: SLF001 (pytest has no public API for it)
        for fixturedef in defs:
            tier = (fixturedef.baseid or "").split("/")
            if len(tier) > 1 and tier[0] == "tests" and name in DEVCLOUD_FIXTURES.get(tier[1], ()):
                return "devcloud"
    return "local"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--stream", choices=("all", *STREAMS, LAST), default="all",
                     help="run only this stream's tests (tests/streams.py runs devcloud, local and kubernetes "
                          "side by side, then alone)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "quiet: checks a timing bound of the product; runs in the last step, "
                                       "after every stream has ended (tests/streams.py)")
    config.addinivalue_line("markers", "alone: a bound on a share of the whole machine's CPU; runs in the last "
                                       "step, after every stream has ended (tests/streams.py)")
    config.addinivalue_line("markers", "ironic_wide: stops or restarts the devcloud's Ironic (every deploy in "
                                       "flight fails); runs while the second pool's stream runs no test "
                                       "(tests/turns.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    stream = config.getoption("--stream")
    if stream == "all":
        return
    keep, other = [], []
    for item in items:
        (keep if stream_of(item) == stream else other).append(item)
    if other:
        config.hook.pytest_deselected(items=other)
    items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test that stops or restarts Ironic (``ironic_wide``) holds its turn on Ironic exclusively,
    the second pool's tests hold it shared (tests/turns.py): no deploy of theirs is in flight when
    Ironic goes down. Other tests take no turn."""
    ironic_wide = item.get_closest_marker("ironic_wide") is not None
    on_ironic = turn(ironic_wide) if ironic_wide or stream_of(item) == SECOND_POOL else contextlib.nullcontext(0.0)
    with on_ironic as waited:
        if waited > 0.5:  # into the JUnit file: tests/streams.py sums what waiting cost each stream
            item.user_properties.append(("turn_wait_s", f"{waited:.1f}"))
        yield


@pytest.fixture(autouse=True)
def _settled_ironic(request: pytest.FixtureRequest) -> None:
    """An ``ironic_wide`` test starts, in its turn, once no node deploys or cleans (tests/turns.py)."""
    if request.node.get_closest_marker("ironic_wide") is not None:
        settle()


def pytest_report_header(config: pytest.Config) -> str:
    mode = "fail" if REQUIRE_ALL else "skip"
    return f"dlbench: missing prerequisites will {mode} (DLBENCH_REQUIRE_ALL={'1' if REQUIRE_ALL else '0'})"


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated Airflow metadata DB with airflow_settings.yaml loaded (pools, variables...)."""
    home = Path(os.environ["AIRFLOW_HOME"])
    marker = home / ".dlbench-initialised"
    if not marker.exists():
        home.mkdir(parents=True, exist_ok=True)
        airflow = str(Path(sys.executable).with_name("airflow"))
        subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True, text=True)
        subprocess.run([sys.executable, "-m", "dlbench.airflow_settings", "--overwrite"],
                       check=True, capture_output=True, text=True)
        marker.write_text("ok")
    return home


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if "DLBENCH_TEST_AIRFLOW_HOME" not in os.environ and "DLBENCH_TEST_HOME" not in os.environ:
        shutil.rmtree(_SESSION_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def docker_client():
    from dlbench.execution.image import docker_available

    ok, reason = docker_available()
    require(ok, reason)
    import docker

    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(scope="session")
def workload_image(docker_client):
    """The real workload image, built from docker/Dockerfile when missing (minutes the first time)."""
    from dlbench.execution.image import DEFAULT_TAG, ensure_image

    return ensure_image(DEFAULT_TAG)


@pytest.fixture(scope="session")
def framework_images(workload_image):
    """Every framework's workload image (TensorFlow's is ``workload_image``), built when missing:
    {framework value: tag}. A build that fails fails the test that needs it (no silent skip)."""
    from dlbench.execution.image import ensure_image
    from dlbench.execution.image import workload_image as image_of
    from dlbench.workloads.profiles import TRAINING_FRAMEWORKS

    return {f.value: ensure_image(image_of(workload_image, f), framework=f) for f in TRAINING_FRAMEWORKS}


@pytest.fixture(scope="session")
def serving_image(docker_client):
    """The serving suite's image (vLLM), built when missing; its tag (a serving run needs no other image)."""
    from dlbench.execution.image import DEFAULT_TAG, ensure_image
    from dlbench.execution.image import workload_image as image_of
    from dlbench.workloads.profiles import Framework

    return ensure_image(image_of(DEFAULT_TAG, Framework.VLLM), framework=Framework.VLLM)
