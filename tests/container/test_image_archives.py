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


def test_a_stage_of_one_machine_streams_and_makes_no_archive(tiny_image):
    """One machine alone: its images are streamed (``docker save | load``), so this disk never holds
    an archive beside the machine's copy (run OO's lowest point: the vLLM image's 3.8 GB archive);
    several machines, or a stage inside another, keep the archive (parallel streams failed)."""
    with prepare.image_archives(machines=1):
        assert prepare._STREAMING
        status, out = prepare._stream_image(_LocalEngine(), tiny_image, "docker")
        assert status == 0 and "Loaded image" in out, out
        assert not [key for key in prepare._SAVED if key[0] == tiny_image], "a streamed load made an archive"
    assert not prepare._STREAMING
    with prepare.image_archives(machines=3):
        assert not prepare._STREAMING
    with prepare.image_archives(machines=1), prepare.image_archives(machines=1):
        assert not prepare._STREAMING, "a stage inside another shares its archives"


class _LocalEngine:
    """This host's engine in a machine's place (RemoteHost.run's contract: argv, timeout, stdin stream)."""

    def run(self, argv, timeout, stdin=None):
        proc = subprocess.run(argv, stdin=stdin, capture_output=True, timeout=timeout, check=False)
        return proc.returncode, (proc.stdout + proc.stderr).decode()
