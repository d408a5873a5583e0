"""RemoteHost on a real deployed node: argv is never interpreted by the remote shell, streams and
files arrive intact, timeouts return, and host keys are trusted on first use only."""

from __future__ import annotations

import os
import uuid

import pytest

from dlbench.errors import ExecutionError
from dlbench.execution.transport import RemoteHost, wait_reachable

HOSTILE = [
    "$(touch {canary})", "`touch {canary}`", "; touch {canary}", "&& touch {canary}", "| touch {canary}",
    "\ntouch {canary}\n", "' ; touch {canary} ; '", '" ; touch {canary} ; "', "$HOME", "*", "~", "a b\tc",
    "-n", "--", "\\", "${IFS}touch${IFS}{canary}", "> {canary}", "ünïcødé",
]


def test_hostile_argv_reaches_the_command_verbatim_and_runs_nothing(fleet, tmp_path):
    (machine,) = fleet.deploy(1)
    canary = f"/tmp/dlbench-canary-{uuid.uuid4().hex[:8]}"
    words = [w.replace("{canary}", canary) for w in HOSTILE]
    with machine.host() as host:
        status, out = host.run(["printf", "%s\\0", *words], 30)
        assert status == 0, out
        assert out.split("\0")[:-1] == words
        # the same words as positional values of a fixed script, and as a file name
        status, out = host.run(["sh", "-c", 'printf "%s\\0" "$@"', "sh", *words], 30)
        assert status == 0 and out.split("\0")[:-1] == words
        odd = "/tmp/dlbench odd $(touch canary) `id`; 'name' && \"x\""
        host.put_bytes(b"payload", odd)
        assert host.read_text(odd) == "payload"
        assert host.run(["rm", "-f", "--", odd], 30)[0] == 0
        assert host.run(["test", "-e", canary], 30)[0] == 1, "a hostile word was executed on the node"
    assert not os.path.exists(canary)


def test_streams_files_trees_and_timeouts(fleet, tmp_path):
    (machine,) = fleet.deploy(1)
    remote = f"/tmp/dlbench-rh-{uuid.uuid4().hex[:8]}"
    payload = os.urandom(5 * 2**20 + 17)
    tree = tmp_path / "tree"
    (tree / "sub dir").mkdir(parents=True)
    (tree / "a.bin").write_bytes(payload[:1000])
    (tree / "sub dir" / "b c.txt").write_text("hello")
    with machine.host() as host:
        try:
            assert host.run(["mkdir", "-p", remote], 30)[0] == 0
            # stdin as bytes (5 MiB) into a remote command, checked by its digest on the node
            status, out = host.run(["sh", "-c", 'cat > "$1" && sha256sum "$1"', "sh", f"{remote}/blob"], 60,
                                   stdin=payload)
            import hashlib

            assert status == 0 and out.split()[0] == hashlib.sha256(payload).hexdigest(), out
            # a local process's stdout streamed into a remote command
            status, out = host.stream_from(["head", "-c", "3000000", "/dev/zero"], ["wc", "-c"], 60)
            assert status == 0 and out.strip() == "3000000"
            # the remote consumer may end before the local producer exits (docker load stops at the
            # archive's end marker while docker save writes padding): that is success, not a kill
            status, out = host.stream_from(["sh", "-c", "printf abc; sleep 2; printf padding"],
                                           ["head", "-c", "3"], 60)
            assert status == 0 and out == "abc"
            # a producer that fails is reported with its status
            with pytest.raises(ExecutionError, match="exited with status 4"):
                host.stream_from(["sh", "-c", "printf abc; exit 4"], ["cat"], 60)
            host.put_tree(tree, f"{remote}/tree")
            assert host.read_text(f"{remote}/tree/sub dir/b c.txt") == "hello"
            host.get_file(f"{remote}/tree/a.bin", tmp_path / "back.bin")
            assert (tmp_path / "back.bin").read_bytes() == payload[:1000]
            assert host.read_text(f"{remote}/missing") is None
            # a command that outlives its timeout returns None instead of hanging
            status, _ = host.run(["sleep", "30"], 1.5)
            assert status is None
            with pytest.raises(ExecutionError, match="exited with status 3"):
                host.check(["sh", "-c", "echo boom; exit 3"], 30)
            assert host.ids() == "0:0"  # root on the devcloud
        finally:
            host.run(["rm", "-rf", "--", remote], 30)


def test_host_keys_trust_on_first_use_then_refuse_a_change(fleet, tmp_path):
    import paramiko

    (machine,) = fleet.deploy(1)
    known = tmp_path / "kh"
    assert wait_reachable(machine.address, "root", machine.key_path, 30, 0.2, str(known)) >= 0
    assert machine.address in known.read_text()
    # a second host of the same run is merged into the file, the first one is kept
    keys = paramiko.HostKeys(str(known))
    assert keys.lookup(machine.address) is not None
    # a different key for the same address (as after a rebuild by someone else): refused
    bogus = paramiko.Ed25519Key.from_private_key_file(machine.key_path)
    keys = paramiko.HostKeys()
    keys.add(machine.address, "ssh-ed25519", bogus)
    keys.save(str(known))
    host = RemoteHost(machine.address, key_path=machine.key_path, known_hosts=str(known), connect_timeout=10)
    with pytest.raises(paramiko.BadHostKeyException):
        host.connect()
    # and a wrong key is not let in
    other = tmp_path / "other"
    import subprocess

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    with pytest.raises(paramiko.AuthenticationException):
        RemoteHost(machine.address, key_path=str(other), connect_timeout=10).connect()
