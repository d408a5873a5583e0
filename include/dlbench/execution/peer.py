"""Servers on another instance of the run: the network suite's far end, and the serving suite's
server for a load generator on another instance.

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
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from dlbench.errors import PeerError
from dlbench.execution.container import ContainerLaunch, server_launch, serving_server_launch
from dlbench.execution.targets import SSHDocker, SSHHost, Target
from dlbench.execution.transport import RemoteHost
from dlbench.polling import Deadline, poll, until
from dlbench.workloads.profiles import Framework
from dlbench.workloads.serving.command import SERVER_ENVIRONMENT as ENVIRONMENT
from dlbench.workloads.serving.command import SERVER_READY as SERVING_READY

log = logging.getLogger(__name__)

READY = "serving iperf3"
"""What ``net-serve`` prints once iperf3 listens (dlbench.workloads.micro.network.serve)."""



@contextlib.contextmanager
def network_peer(peer: Target, port: int = 5201, *, run_id: str | None = None,
                 ready_timeout: float = 30.0) -> Iterator[str]:
    """Serve the network endpoints on ``peer`` for the duration of the block; yields the address
    clients use (the peer machine's address). ``run_id`` labels the docker-runtime container
    (default: ``peer.labels["run_id"]``)."""
    if not 1 <= port <= 65534:
        raise ValueError(f"port must leave room for the echo port (port + 1): {port}")
    argv = ("python", "-m", "dlbench.workloads", "net-serve", "--bind", "0.0.0.0", "--port", str(port))
    with _background_server(peer, "net-serve", argv, READY, run_id=run_id, ready_timeout=ready_timeout,
                            launch=lambda user, run: server_launch(peer, run, port, user)) as (address, _, _):
        yield address


@dataclass(frozen=True)
class ServingPeer:
    """A serving suite's server started on the machine under test for a client on another one."""

    url: str
    """What the client drives: ``http://<machine's address>:<port>``."""
    startup_time: float
    """Seconds from the server's process start to its first healthy answer (measured on its machine)."""
    environment: str
    """The server machine's environment, as the workload recorded it there (a JSON object)."""
    output: Callable[[], str] = field(compare=False)
    """What the server has printed so far (a failure's cause: the server's log tail)."""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.output().strip().splitlines()[-lines:])


SERVING_PORT = 8100
"""The serving peer's port on its machine (a run holds its machines: one server at a time)."""


@contextlib.contextmanager
def serving_peer(server: Target, profile_args: Sequence[str], *, run_id: str, port: int = SERVING_PORT,
                 ready_timeout: float = 600.0) -> Iterator[ServingPeer]:
    """The serving suite's server alone (``python -m dlbench.workloads serving-server``) on
    ``server``, as a process of its host or a container of its engine (vLLM's image, the suite's
    shared memory, the port published), for the duration of the block; stopped and verified gone
    after. ``profile_args``: the job's ``--profile`` (and ``--profile-spec``) arguments, so the
    server serves the job's shape. A server that fails to come up raises :class:`PeerError` with
    its log's tail."""
    argv = ("python", "-m", "dlbench.workloads", "serving-server", "--bind", "0.0.0.0", "--port", str(port),
            *profile_args)

    def launch(user: str | None, run: str) -> ContainerLaunch:
        return serving_server_launch(server, run, port, argv, user)

    with _background_server(server, "serving-server", argv, SERVING_READY, run_id=run_id, ready_timeout=ready_timeout,
                            launch=launch, framework=Framework.VLLM) as (address, said, output):
        ready = next(line for line in said.splitlines() if line.startswith(SERVING_READY))
        startup = re.search(r"startup_time=([0-9.]+)", ready)
        environment = next((line.removeprefix(ENVIRONMENT) for line in said.splitlines()
                            if line.startswith(ENVIRONMENT)), "{}")
        yield ServingPeer(url=f"http://{address}:{port}", startup_time=float(startup.group(1)) if startup else 0.0,
                          environment=environment, output=output)


@contextlib.contextmanager
def _background_server(peer: Target, what: str, argv: Sequence[str], ready: str, *, run_id: str | None,
                       ready_timeout: float, launch: Callable[[str | None, str], ContainerLaunch],
                       framework: Framework | None = None) -> Iterator[tuple[str, str, Callable[[], str]]]:
    """``argv`` (``python -m dlbench.workloads ...``) in the background on ``peer`` until the block
    ends; yields (the machine's address, what the server had printed once ``ready`` appeared, a
    reader of what it has printed since)."""
    access = peer.access
    if not isinstance(access, SSHHost):
        raise ValueError(f"a {what} peer runs on another instance over SSH, not on a {access.kind!r} target")
    address = peer.address or access.address
    with RemoteHost.from_access(access) as host:
        if access.runs_in_container:
            run = run_id or peer.labels.get("run_id")
            if not run:
                raise ValueError("run_id is needed to label the peer's container (teardown finds it by label)")
            with _container_peer(host, peer, launch(host.ids(), run), run, what, ready, ready_timeout) as (said, out):
                yield address, said, out
        else:
            python = access.python_for(framework) if framework is not None else access.python
            with _process_peer(host, access, [python, *argv[1:]], what, ready, ready_timeout) as (said, out):
                yield address, said, out


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
def _process_peer(host: RemoteHost, access: SSHHost, argv: Sequence[str], what: str, ready: str,
                  ready_timeout: float) -> Iterator[tuple[str, Callable[[], str]]]:
    logfile = f"/tmp/dlbench-{what}-{uuid.uuid4().hex[:8]}.log"
    env = [f"PYTHONPATH={access.pythonpath}"] if access.pythonpath else []
    out = host.check(["sh", "-c", _START, "sh", logfile, "env", *env, *argv], 30).strip()
    if not out.isdigit():
        raise PeerError(f"{what} did not start on {host.address}: {out[-300:]}")
    pid = out
    pgid = host.check(["sh", "-c", _PGID, "sh", pid], 30).strip() or pid
    if pgid != pid:  # setsid forked: the server leads its own group, whose id we must signal
        log.info("%s on %s: pid %s in process group %s", what, host.address, pid, pgid)
    try:
        said = _wait_ready(host, ["cat", logfile], ["sh", "-c", _ALIVE, "sh", pgid], ready_timeout, what, ready)
        yield said, lambda: host.run(["cat", logfile], 30)[1]
    finally:
        _stop_group(host, pgid, what)
        host.run(["rm", "-f", "--", logfile], 30)


def _stop_group(host: RemoteHost, pgid: str, what: str) -> None:
    """SIGTERM to the whole process group (server and its iperf3), then SIGKILL; verified gone.

    Not SIGINT: a command started with ``&`` by a non-interactive shell ignores SIGINT, and
    Python keeps an ignored SIGINT ignored, so it would never reach ``KeyboardInterrupt``.
    """
    for signal, wait in (("TERM", 10.0), ("KILL", 5.0)):
        host.run(["sh", "-c", 'kill -s "$1" -- -"$2" 2>/dev/null; true', "sh", signal, pgid], 30)
        if until(lambda: host.run(["sh", "-c", _ALIVE, "sh", pgid], 30)[0] != 0,
                 Deadline(wait, f"{what} process group {pgid} after SIG{signal}"), 0.2):
            return
    raise PeerError(f"{what} process group {pgid} on {host.address} still alive after SIGKILL")


# -- docker runtime ------------------------------------------------------------------------------


@contextlib.contextmanager
def _container_peer(host: RemoteHost, peer: Target, launch: ContainerLaunch, run_id: str, what: str, ready: str,
                    ready_timeout: float) -> Iterator[tuple[str, Callable[[], str]]]:
    access = peer.access
    assert isinstance(access, SSHDocker)  # a container peer is an SSHDocker machine (its runtime is docker)
    engine = access.engine
    _remove_if_ours(host, engine, launch.name, run_id)
    status, out = host.run(launch.cli_argv(engine), 300)
    try:
        if status != 0:
            raise PeerError(f"{engine} could not start the {what} peer on {host.address}: {out.strip()[-400:]}")
        running = ["sh", "-c", '[ "$("$1" inspect --format "{{.State.Running}}" "$2")" = true ]', "sh", engine,
                   launch.name]
        said = _wait_ready(host, [engine, "logs", launch.name], running, ready_timeout, f"{what} container", ready)
        yield said, lambda: host.run([engine, "logs", launch.name], 60)[1]
    finally:
        _remove_if_ours(host, engine, launch.name, run_id)
        status, out = host.run([engine, "ps", "-a", "-q", "--filter", f"name=^/{launch.name}$"], 60)
        if status != 0 or out.strip():
            raise PeerError(f"{what} peer container {launch.name} still on {host.address}: {out.strip()[-200:]}")


def _remove_if_ours(host: RemoteHost, engine: str, name: str, run_id: str) -> None:
    fmt = '{{index .Config.Labels "dlbench.run_id"}}'
    status, out = host.run([engine, "inspect", "--type", "container", "--format", fmt, name], 60)
    if status == 0 and out.strip() == run_id:
        host.check([engine, "rm", "-f", name], 120)


def _wait_ready(host: RemoteHost, read_log: list[str], alive: list[str], timeout: float, what: str,
                ready: str = READY) -> str:
    """Until the server's log says ``ready``; what it said then. PeerError when it exits first or
    the timeout passes."""

    def serving(text: str) -> bool:
        if ready in text:
            return True
        if host.run(alive, 30)[0] != 0:
            raise PeerError(f"{what} on {host.address} exited before serving: {text.strip()[-1500:]}")
        return False

    said: str = poll(lambda: host.run(read_log, 30)[1], serving,
                     Deadline(timeout, f"{what} on {host.address}", may_be_spent=True), 0.3, retry=False,
                     give_up=lambda text: PeerError(
                         f"{what} on {host.address} not serving within {timeout:.0f} s: {text.strip()[-1500:]}"))
    return said
