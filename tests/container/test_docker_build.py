"""Our image builds copy no wheel into an image and leave nothing behind on the engine
(execution/docker_build.py). Stop 53's landing CI ran out of disk 651 s in: the engine held 19 GB
of our earlier builds' untagged images (build stages and replaced images), and every workload
image's venv was stored twice (its stage's copy and the image's)."""

from __future__ import annotations

import subprocess
import uuid
import zipfile
from pathlib import Path

import pytest

from dlbench.execution import docker_build
from tests.support.prereqs import require

TINY = "dlbenchtinywheel"


@pytest.fixture
def base_image(docker_client):
    """The project's local base, what offline builds start from (make base-image)."""
    present = _docker("image", "inspect", docker_build.LOCAL_BASE).returncode == 0
    require(present, f"no {docker_build.LOCAL_BASE} on this engine: run `make base-image`")
    return docker_build.LOCAL_BASE


@pytest.fixture
def wheelhouse(tmp_path) -> Path:
    """A wheelhouse holding one tiny pure-Python wheel, made by hand (no index, no build backend)."""
    house = tmp_path / "wheelhouse"
    house.mkdir()
    info = f"{TINY}-1.0.dist-info"
    with zipfile.ZipFile(house / f"{TINY}-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{TINY}/__init__.py", "VALUE = 'served, not copied'\n")
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {TINY}\nVersion: 1.0\n")
        wheel.writestr(f"{info}/WHEEL",
                       "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", f"{TINY}/__init__.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return house


def _docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=300, check=False)


def _image_id(ref: str) -> str:
    return _docker("image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()


def _layers(ref: str) -> list[str]:
    return _docker("image", "inspect", "--format", "{{range .RootFS.Layers}}{{.}} {{end}}", ref).stdout.split()


@pytest.fixture
def tag():
    name = f"dlbench-test-build:{uuid.uuid4().hex[:8]}"
    yield name
    _docker("image", "rm", "-f", name)


def test_a_build_is_served_its_wheels_keeps_none_and_leaves_nothing_behind(base_image, wheelhouse, tag, tmp_path):
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {base_image}\nLABEL dlbench.test=docker-build\nARG WHEELHOUSE=\"\"\n"
        f"RUN python3 -m venv /v && /v/bin/pip install -q --no-index --find-links \"$WHEELHOUSE\" {TINY}\n"
        "COPY code /code\n")
    (context / "code").write_text("first\n")
    with docker_build.build_lock():
        first = docker_build.build(["-q", "-t", tag, str(context)], wheelhouse)
    assert first.returncode == 0, first.stderr[-2000:]
    run = _docker("run", "--rm", tag, "sh", "-c",
                  f"/v/bin/python -c 'import {TINY}; print({TINY}.VALUE)'; find / -xdev -name '{TINY}-*.whl' | wc -l")
    assert run.stdout.split("\n")[:2] == ["served, not copied", "0"], run.stdout + run.stderr
    first_id, first_layers = _image_id(tag), _layers(tag)

    (context / "code").write_text("second\n")  # a code change: the replaced image must not stay behind
    with docker_build.build_lock():
        second = docker_build.build(["-q", "-t", tag, str(context)], wheelhouse)
    assert second.returncode == 0, second.stderr[-2000:]
    assert _image_id(tag) != first_id
    assert _docker("image", "inspect", first_id).returncode != 0, "the replaced image was left on the engine"
    # The served wheelhouse's URL is a build argument, part of the cache key: the same URL each
    # build (a fixed port) keeps the installed layer cached; only the code's layer is new.
    assert _layers(tag)[:-1] == first_layers[:-1] and _layers(tag)[-1] != first_layers[-1]
    assert first_id.split(":")[-1] not in " ".join(docker_build.leftovers())


def _build_twice(context: Path, dockerfile: str, tag: str) -> str:
    """A plain ``docker build`` twice under one tag (as an older build did): returns the first
    image's id, now untagged."""
    (context / "Dockerfile").write_text(dockerfile)
    ids = []
    for content in ("one", "two"):
        (context / "f").write_text(content)
        proc = subprocess.run(["docker", "build", "-q", "-t", tag, str(context)], capture_output=True, text=True,
                              timeout=300, env={"DOCKER_BUILDKIT": "0", "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"})
        assert proc.returncode == 0, proc.stderr
        ids.append(_image_id(tag))
    return ids[0]


def test_the_sweep_takes_our_untagged_images_only(base_image, tmp_path):
    ours_ctx, theirs_ctx = tmp_path / "ours", tmp_path / "theirs"
    ours_ctx.mkdir()
    theirs_ctx.mkdir()
    ours_tag = f"dlbench-test-old:{uuid.uuid4().hex[:8]}"
    theirs_tag = f"someone-else:{uuid.uuid4().hex[:8]}"
    theirs = ""
    try:
        with docker_build.build_lock():
            # An unlabelled image on the project's base (the Airflow image's stages had no label)...
            ours = _build_twice(ours_ctx, f"FROM {base_image}\nCOPY f /f\n", ours_tag)
            # ...and someone else's untagged image, built on no base of ours.
            theirs = _build_twice(theirs_ctx, "FROM scratch\nCOPY f /f\n", theirs_tag)
            found = docker_build.leftovers()
            assert ours in found and theirs not in found
            removed = docker_build.drop_leftovers()
        assert ours in removed and _docker("image", "inspect", ours).returncode != 0
        assert _docker("image", "inspect", theirs).returncode == 0, "an image not ours was removed"
    finally:
        _docker("image", "rm", "-f", ours_tag, theirs_tag, *([theirs] if theirs else []))


def test_the_wheelhouse_is_served_on_the_loopback_at_the_fixed_port(wheelhouse):
    import urllib.request

    taken = _port_taken()
    with docker_build.serve(wheelhouse) as url:
        assert url.startswith("http://127.0.0.1:")
        listing = urllib.request.urlopen(url, timeout=10).read().decode()
    assert f"{TINY}-1.0-py3-none-any.whl" in listing
    assert url == f"http://127.0.0.1:{docker_build.PORT}/" or taken


def _port_taken() -> bool:
    import socket

    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", docker_build.PORT)) == 0
