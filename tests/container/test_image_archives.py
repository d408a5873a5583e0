"""The controller's image archives (``docker save``, streamed to every machine of a prepare stage)
leave its disk when the stage ends: a long-lived process used to keep every one it ever sent
(2 GB for TensorFlow's image, 1.4 GB for PyTorch's), and CI ran out of disk."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from dlbench.execution import prepare


@pytest.fixture
def tiny_image(docker_client, tmp_path):
    """A two-file image built from scratch (no registry needed), removed afterwards."""
    (tmp_path / "payload").write_bytes(b"x" * 4096)
    (tmp_path / "Dockerfile").write_text("FROM scratch\nCOPY payload /payload\n")
    tag = f"dlbench-test-archive:{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "build", "-q", "-t", tag, str(tmp_path)], check=True, capture_output=True)
    yield tag
    subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)


def test_an_archive_lives_until_the_last_scope_around_it_ends(tiny_image):
    with prepare.image_archives():
        with prepare.image_archives():
            archive = prepare.saved_image(tiny_image, "ctx")
            assert archive.stat().st_size > 4096
            assert prepare.saved_image(tiny_image, "ctx") == archive, "one save per image version"
            with open(archive, "rb") as reading:  # a load still reading when the stage ends
                head = reading.read(512)
        assert archive.exists(), "an enclosing stage still needs it"
        reading = open(archive, "rb")  # noqa: SIM115 - held open across the scope's end on purpose
    assert not archive.exists()
    try:
        assert reading.read(512) == head, "an unlinked archive stays readable to a load that has it open"
    finally:
        reading.close()
    fresh = prepare.saved_image(tiny_image, "ctx")  # outside any scope: a new save, kept until exit
    try:
        assert fresh.exists()
    finally:
        fresh.unlink()
