"""The network suite's far end on another instance of the run.

Between instances the network benchmark measures a real path (NIC, switch, and for containers
the engine's network stack), so its endpoints (``python -m dlbench.workloads net-serve``: iperf3
on ``port``, the latency echo on ``port + 1``) run on a *different* machine than the client.
:func:`network_peer` starts them there and yields the address clients pass as ``--server``:

- host runtime (:class:`~dlbench.execution.targets.SSHHost`): a background process in its own
  session over SSH, stopped with SIGTERM to its process group (the server and its iperf3) and
  verified gone, SIGKILL if anything lingers;
- docker runtime (:class:`~dlbench.execution.targets.SSHDocker`): a detached container from the
  one launch builder (:func:`dlbench.execution.container.server_launch`) with both ports
  published, labelled with the run so the teardown and the janitor find it, removed at exit.

Which instance serves is the pipeline's choice; this module only runs it.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator

from dlbench.errors import PeerError
from dlbench.execution.container import server_launch
from dlbench.execution.targets import SSHDocker, SSHHost, Target
from dlbench.execution.transport import RemoteHost
from dlbench.polling import Deadline, poll, until

log = logging.getLogger(__name__)

READY = "serving iperf3"
"""What ``net-serve`` prints once iperf3 listens (dlbench.workloads.micro.network.serve)."""



@contextlib.contextmanager
def network_peer(peer: Target, port: int = 5201, *, run_id: str | None = None,
                 ready_timeout: float = 30.0) -> Iterator[str]:
    """Serve the network endpoints on ``peer`` for the duration of the block; yields the address
    clients use (the peer machine's address). ``run_id`` labels the docker-runtime container
    (default: ``peer.labels["run_id"]``)."""
    access = peer.access
    if not isinstance(access, SSHHost):
        raise ValueError(f"a network peer runs on another instance over SSH, not on a {access.kind!r} target")
    if not 1 <= port <= 65534:
        raise ValueError(f"port must leave room for the echo port (port + 1): {port}")
    address = peer.address or access.address
    with RemoteHost.from_access(access) as host:
        if access.runs_in_container:
            run = run_id or peer.labels.get("run_id")
            if not run:
                raise ValueError("run_id is needed to label the peer's container (teardown finds it by label)")
            with _container_peer(host, peer, port, run, ready_timeout):
                yield address
        else:
            with _process_peer(host, access, port, ready_timeout):
                yield address


# -- host runtime --------------------------------------------------------------------------------

_START = 'log=$1; shift; setsid "$@" > "$log" 2>&1 < /dev/null & echo "$!"'
_PGID = ('read -r stat 2>/dev/null < "/proc/$1/stat" || { echo "$1"; exit 0; }; '
         'stat=${stat##*) }; set -- $stat; echo "$3"')
"""Field 5 of /proc/<pid>/stat (after the command name in parentheses) is the process group; a
process already gone is its own group (the readiness check then reports its log)."""
_ALIVE = ('g=$1; for f in /proc/[0-9]*/stat; do read -r s 2>/dev/null < "$f" || continue; s=${s##*) }; '
          'set -- $s; [ "$3" = "$g" ] && [ "$1" != Z ] && exit 0; done; exit 1')
"""Exit 0 while a live (not zombie) process is in the group: ``kill -0`` also counts zombies,
which linger until the machine's init reaps them."""


@contextlib.contextmanager
def _process_peer(host: RemoteHost, access: SSHHost, port: int, ready_timeout: float) -> Iterator[None]:
    logfile = f"/tmp/dlbench-netserve-{port}-{uuid.uuid4().hex[:8]}.log"
    env = [f"PYTHONPATH={access.pythonpath}"] if access.pythonpath else []
    argv = ["env", *env, access.python, "-m", "dlbench.workloads", "net-serve", "--bind", "0.0.0.0",
            "--port", str(port)]
    out = host.check(["sh", "-c", _START, "sh", logfile, *argv], 30).strip()
    if not out.isdigit():
        raise PeerError(f"net-serve did not start on {host.address}: {out[-300:]}")
    pid = out
    pgid = host.check(["sh", "-c", _PGID, "sh", pid], 30).strip() or pid
    if pgid != pid:  # setsid forked: the server leads its own group, whose id we must signal
        log.info("net-serve on %s: pid %s in process group %s", host.address, pid, pgid)
    try:
        _wait_ready(host, ["cat", logfile], ["sh", "-c", _ALIVE, "sh", pgid], ready_timeout, "net-serve")
        yield
    finally:
        _stop_group(host, pgid)
        host.run(["rm", "-f", "--", logfile], 30)


def _stop_group(host: RemoteHost, pgid: str) -> None:
    """SIGTERM to the whole process group (server and its iperf3), then SIGKILL; verified gone.

    Not SIGINT: a command started with ``&`` by a non-interactive shell ignores SIGINT, and
    Python keeps an ignored SIGINT ignored, so it would never reach ``KeyboardInterrupt``.
    """
    for signal, wait in (("TERM", 10.0), ("KILL", 5.0)):
        host.run(["sh", "-c", 'kill -s "$1" -- -"$2" 2>/dev/null; true', "sh", signal, pgid], 30)
        if until(lambda: host.run(["sh", "-c", _ALIVE, "sh", pgid], 30)[0] != 0,
                 Deadline(wait, f"net-serve process group {pgid} after SIG{signal}"), 0.2):
            return
    raise PeerError(f"net-serve process group {pgid} on {host.address} still alive after SIGKILL")


# -- docker runtime ------------------------------------------------------------------------------


@contextlib.contextmanager
def _container_peer(host: RemoteHost, peer: Target, port: int, run_id: str, ready_timeout: float) -> Iterator[None]:
    access = peer.access
    assert isinstance(access, SSHDocker)  # a container peer is an SSHDocker machine (its runtime is docker)
    engine = access.engine
    launch = server_launch(peer, run_id, port, host.ids())
    _remove_if_ours(host, engine, launch.name, run_id)
    status, out = host.run(launch.cli_argv(engine), 300)
    try:
        if status != 0:
            raise PeerError(f"{engine} could not start the network peer on {host.address}: {out.strip()[-400:]}")
        running = ["sh", "-c", '[ "$("$1" inspect --format "{{.State.Running}}" "$2")" = true ]', "sh", engine,
                   launch.name]
        _wait_ready(host, [engine, "logs", launch.name], running, ready_timeout, "net-serve container")
        yield
    finally:
        _remove_if_ours(host, engine, launch.name, run_id)
        status, out = host.run([engine, "ps", "-a", "-q", "--filter", f"name=^/{launch.name}$"], 60)
        if status != 0 or out.strip():
            raise PeerError(f"network peer container {launch.name} still on {host.address}: {out.strip()[-200:]}")


def _remove_if_ours(host: RemoteHost, engine: str, name: str, run_id: str) -> None:
    fmt = '{{index .Config.Labels "dlbench.run_id"}}'
    status, out = host.run([engine, "inspect", "--type", "container", "--format", fmt, name], 60)
    if status == 0 and out.strip() == run_id:
        host.check([engine, "rm", "-f", name], 120)


def _wait_ready(host: RemoteHost, read_log: list[str], alive: list[str], timeout: float, what: str) -> None:
    """Until the server's log says it serves; PeerError when it exits first or the timeout passes."""

    def serving(text: str) -> bool:
        if READY in text:
            return True
        if host.run(alive, 30)[0] != 0:
            raise PeerError(f"{what} on {host.address} exited before serving: {text.strip()[-600:]}")
        return False

    poll(lambda: host.run(read_log, 30)[1], serving, Deadline(timeout, f"{what} on {host.address}", may_be_spent=True),
         0.3, retry=False, give_up=lambda text: PeerError(
             f"{what} on {host.address} not serving within {timeout:.0f} s: {text.strip()[-600:]}"))
