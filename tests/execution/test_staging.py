"""Data staging onto a real node: copied as a tar stream and verified there; a second staging is
a no-op; a damaged copy is detected (and staged again); a user's data_dir is checked, not copied."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from dlbench.errors import StagingError
from dlbench.execution.staging import MANIFEST, check_remote_data, local_listing, stage_data, verify_stage


@pytest.fixture(scope="module")
def demo_set(tmp_path_factory):
    """The demo ImageNet TFRecords, made the way the pipeline makes them (make-tfrecords)."""
    out = tmp_path_factory.mktemp("demo-tfrecords")
    subprocess.run([sys.executable, "-m", "dlbench.workloads", "make-tfrecords", "--out", str(out), "--images", "256",
                    "--shards", "4", "--image-size", "160"], check=True, capture_output=True, timeout=300)
    (out / "nested").mkdir()
    (out / "nested" / "README").write_text("a file in a subdirectory travels too\n")
    return out


def test_stage_verify_noop_and_damage(fleet, demo_set, capsys):
    (machine,) = fleet.deploy(1)
    remote = f"/tmp/dlbench-data-{uuid.uuid4().hex[:8]}"
    expected = local_listing(demo_set)
    with machine.host() as host:
        try:
            first = stage_data(host, demo_set, remote)
            assert first.copied and first.files == len(expected) == 5
            assert first.bytes == sum(expected.values()) > 1_000_000
            assert verify_stage(host, remote, expected) == expected
            assert host.read_text(f"{remote}/{MANIFEST}") is not None
            with capsys.disabled():
                print(f"\nstaging: {first.files} files, {first.bytes / 1e6:.1f} MB in {first.seconds:.2f} s "
                      f"({first.mb_per_s} MB/s)")

            again = stage_data(host, demo_set, remote)
            assert not again.copied and (again.files, again.bytes) == (first.files, first.bytes)

            # damage on the node: one shard truncated, another removed
            shard = sorted(n for n in expected if n.startswith("train-"))[0]
            gone = sorted(n for n in expected if n.startswith("train-"))[1]
            host.check(["truncate", "-s", "100", f"{remote}/{shard}"], 30)
            host.check(["rm", f"{remote}/{gone}"], 30)
            with pytest.raises(StagingError) as err:
                verify_stage(host, remote, expected)
            message = str(err.value)
            assert f"node has {len(expected) - 1} files" in message
            assert f"controller has {len(expected)} files / {sum(expected.values())} bytes" in message
            assert shard in message and gone in message
            repaired = stage_data(host, demo_set, remote)  # not trusted: copied again and verified
            assert repaired.copied
            assert verify_stage(host, remote, expected) == expected

            # a user's data_dir: used as it is when present, a clear error otherwise
            assert check_remote_data(host, remote).files == len(expected)
            with pytest.raises(StagingError, match="does not exist on"):
                check_remote_data(host, f"{remote}-missing")
            host.check(["mkdir", f"{remote}-empty"], 30)
            with pytest.raises(StagingError, match="is empty"):
                check_remote_data(host, f"{remote}-empty")
            # someone's data without our manifest is never overwritten
            host.check(["sh", "-c", 'mkdir -p "$1" && echo theirs > "$1/x"', "sh", f"{remote}-theirs"], 30)
            with pytest.raises(StagingError, match="did not stage"):
                stage_data(host, demo_set, f"{remote}-theirs")
            assert host.read_text(f"{remote}-theirs/x") == "theirs\n"
        finally:
            host.run(["rm", "-rf", "--", remote, f"{remote}-empty", f"{remote}-theirs"], 60)
