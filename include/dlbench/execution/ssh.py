"""Run a workload on a remote machine over SSH: the bare-metal (and VM) platforms.

:class:`RemoteHost` is the one SSH session type (paramiko): argv-only commands (quoted by
:mod:`dlbench.execution.shell`), files and directory trees over SFTP or tar streams, and a local
process's output streamed into a remote command (``docker save | docker load``).

:class:`SSHExecutor` starts a job on an :class:`~dlbench.execution.targets.SSHHost` (a process:
``<python> -m dlbench.workloads ...``) or an :class:`~dlbench.execution.targets.SSHDocker` (the
workload image on the node's engine, through the one launch builder of
:mod:`dlbench.execution.container`). The result document is written to a per-job directory on
the node, fetched back over SFTP, archived by :func:`dlbench.execution.base.finish`, and the
remote directory and the container are removed whatever happened (success, failure, timeout,
a stop, a broken SSH session).

A stop (``execute(..., stop=event)``) goes through a second channel of the same SSH connection:
``kill -TERM`` to the node's ``timeout`` process, whose PID the launch records in the job's
directory (GNU ``timeout`` forwards the TERM to the workload's process group and SIGKILLs that
group ``grace`` seconds later), or ``docker stop -t <grace>`` for a container. Afterwards the
executor checks that no process of the job's group is left on the node.

Host keys are trusted on first use into a per-run ``known_hosts`` next to the run's key: nodes
are freshly deployed, so there is no earlier key to compare with, but within a run a changed
host key is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dlbench.config import Job
from dlbench.execution.base import (
    DEFAULT_GRACE_S,
    TIMED_OUT,
    ExecutionError,
    Executor,
    StopWatch,
    finish,
    on_stop,
    read_document,
    timed_out,
)
from dlbench.execution.container import container_name, safe_name, workload_launch
from dlbench.execution.gpus import process_env
from dlbench.execution.machine_lock import ENSURE_REMOTE_BUSY, REMOTE_BUSY, REMOTE_HOLD
from dlbench.execution.shell import command_line
from dlbench.workloads.result import ResultDocument

if TYPE_CHECKING:
    from dlbench.execution.targets import SSHDocker, SSHHost, Target

log = logging.getLogger(__name__)

OUTPUT_LIMIT = 4 * 2**20
"""Bytes of a command's output kept in memory (the tail): enough for any error message."""
CHUNK = 2**20
WINDOW = 2**24
"""SSH channel window: paramiko's 2 MB default throttles image and data streams."""


def _ssh_errors() -> tuple[type[BaseException], ...]:
    import paramiko

    return (OSError, EOFError, paramiko.SSHException)


class RemoteHost:
    """One SSH connection to a machine, used as a context manager.

    ``run`` takes argv only; the command line is built by
    :func:`~dlbench.execution.shell.command_line`, so no value reaches the remote shell
    unquoted. A fixed script with values as positional parameters is written as
    ``["sh", "-c", SCRIPT, "sh", *values]``.
    """

    def __init__(self, address: str, *, port: int = 22, user: str = "root", key_path: str,
                 known_hosts: str | None = None, connect_timeout: float = 30.0) -> None:
        self.address = address
        self.port = port
        self.user = user
        self.key_path = key_path
        self.known_hosts = known_hosts
        self.connect_timeout = connect_timeout
        self._client: Any = None
        self._ids: str | None = None

    @classmethod
    def from_access(cls, access: SSHHost, connect_timeout: float = 30.0) -> RemoteHost:
        return cls(access.address, port=access.port, user=access.user, key_path=access.key_path,
                   known_hosts=access.known_hosts, connect_timeout=connect_timeout)

    def __repr__(self) -> str:
        return f"RemoteHost({self.name})"

    @property
    def name(self) -> str:
        return f"{self.user}@{self.address}" + (f":{self.port}" if self.port != 22 else "")

    # -- connection ---------------------------------------------------------------------------

    def connect(self) -> RemoteHost:
        if self._client is None:
            self._client = _connect(self.address, self.port, self.user, self.key_path, self.connect_timeout,
                                    self.known_hosts)
        return self

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> RemoteHost:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def client(self) -> Any:
        """The paramiko ``SSHClient`` (connected on first use)."""
        return self.connect()._client

    # -- commands -----------------------------------------------------------------------------

    def run(self, argv: Sequence[str], timeout: float, stdin: bytes | str | IO[bytes] | None = None
            ) -> tuple[int | None, str]:
        """Exit status (``None`` when ``timeout`` passed first) and combined stdout+stderr (tail).

        ``stdin``: bytes/str sent then closed, or a binary stream (e.g. a local process's
        stdout) copied in chunks while the output is read, so neither side blocks the other.
        """
        return self._run_line(command_line(argv), timeout, stdin)

    def check(self, argv: Sequence[str], timeout: float, stdin: bytes | str | IO[bytes] | None = None) -> str:
        """Output of a command that must succeed; :class:`ExecutionError` naming it otherwise."""
        status, output = self.run(argv, timeout, stdin)
        if status != 0:
            what = "timed out" if status is None else f"exited with status {status}"
            raise ExecutionError(f"{self.name}: {command_line(argv)[:300]} {what}: {output.strip()[-800:]}")
        return output

    def _run_line(self, line: str, timeout: float, stdin: bytes | str | IO[bytes] | None = None
                  ) -> tuple[int | None, str]:
        channel = self.client.get_transport().open_session(window_size=WINDOW)
        try:
            channel.set_combine_stderr(True)
            channel.exec_command(line)
            writer, failure = self._feed(channel, stdin)
            chunks: list[bytes] = []
            kept = 0
            deadline = time.monotonic() + timeout
            channel.settimeout(0.2)
            while True:
                try:
                    data = channel.recv(65536)
                except TimeoutError:
                    data = None
                if data == b"":
                    break
                if data:
                    chunks.append(data)
                    kept += len(data)
                    while kept > OUTPUT_LIMIT and len(chunks) > 1:
                        kept -= len(chunks.pop(0))
                if time.monotonic() > deadline:
                    return None, b"".join(chunks).decode(errors="replace")
            if not channel.status_event.wait(max(0.1, deadline - time.monotonic())):
                return None, b"".join(chunks).decode(errors="replace")
            if writer is not None:
                writer.join(timeout=5)
            output = b"".join(chunks).decode(errors="replace")
            if failure:
                output += f"\n(sending input failed: {failure[0]})"
            return channel.recv_exit_status(), output
        finally:
            channel.close()

    @staticmethod
    def _feed(channel: Any, stdin: bytes | str | IO[bytes] | None) -> tuple[threading.Thread | None, list[str]]:
        failure: list[str] = []
        if stdin is None:
            channel.shutdown_write()
            return None, failure

        def pump() -> None:
            try:
                if isinstance(stdin, (bytes, str)):
                    data = stdin.encode() if isinstance(stdin, str) else stdin
                    for start in range(0, len(data), CHUNK):
                        _send_all(channel, data[start:start + CHUNK])
                else:
                    while chunk := stdin.read(CHUNK):
                        _send_all(channel, chunk)
            except (OSError, EOFError) as exc:  # the remote side ended early: its output says why
                failure.append(f"{type(exc).__name__}: {exc}")
            finally:
                with contextlib.suppress(OSError, EOFError):
                    channel.shutdown_write()

        thread = threading.Thread(target=pump, name=f"ssh-stdin-{channel.get_id()}", daemon=True)
        thread.start()
        return thread, failure

    def stream_from(self, local_argv: Sequence[str], remote_argv: Sequence[str], timeout: float
                    ) -> tuple[int | None, str]:
        """``local_argv | ssh host remote_argv``: a local process's stdout into a remote command's
        stdin (``docker save`` into ``docker load``, ``tar -c`` into ``tar -x``). Raises
        :class:`ExecutionError` when the local side fails; returns the remote side's status."""
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(list(local_argv), stdout=subprocess.PIPE, stderr=errors)
            status: int | None = None
            try:
                status, output = self.run(remote_argv, timeout, stdin=proc.stdout)
            finally:
                # The remote side may finish before the local one has exited: ``docker load`` and
                # ``tar -x`` stop reading at the archive's end marker while ``docker save`` still
                # writes its trailing padding. Then drain and let it exit by itself; kill only
                # when the remote side failed or timed out, or the local side does not end.
                if status == 0 and proc.poll() is None:
                    _drain_in_background(proc.stdout)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=_LOCAL_EXIT_GRACE_S)
                if proc.poll() is None:
                    proc.kill()
                local_status = proc.wait()
                assert proc.stdout is not None
                proc.stdout.close()
            errors.seek(0)
            local_errors = errors.read().decode(errors="replace")[-800:]
            if status != 0:
                # The remote side failed or timed out first; the local side was stopped because of
                # it: the remote output is the cause (reporting the local SIGKILL would hide it).
                return status, (f"{output}\n(remote side {'timed out' if status is None else f'status {status}'}; "
                                f"local {command_line(local_argv)[:120]} ended with status {local_status}"
                                f"{': ' + local_errors.strip() if local_errors.strip() else ''})")
            if local_status != 0:
                raise ExecutionError(f"{command_line(local_argv)[:200]} exited with status {local_status}: "
                                     f"{local_errors}")
        return status, output

    def put_tree(self, local_dir: str | Path, remote_dir: str, timeout: float = 3600) -> None:
        """Copy a local directory's contents into ``remote_dir`` (created) as one tar stream;
        far faster than SFTP file by file for many files."""
        local = Path(local_dir)
        if not local.is_dir():
            raise ExecutionError(f"{local} is not a directory")
        script = 'mkdir -p -- "$1" && exec tar -x -f - -C "$1" --no-same-owner'
        status, output = self.stream_from(["tar", "-c", "-f", "-", "-C", str(local), "."],
                                          ["sh", "-c", script, "sh", remote_dir], timeout)
        if status != 0:
            raise ExecutionError(f"{self.name}: unpacking into {remote_dir} failed "
                                 f"({'timed out' if status is None else f'status {status}'}): {output[-800:]}")

    # -- files --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def sftp(self) -> Iterator[Any]:
        session = self.client.open_sftp()
        try:
            yield session
        finally:
            session.close()

    def put_file(self, local: str | Path, remote: str, mode: int | None = None) -> None:
        with self.sftp() as sftp:
            sftp.put(str(local), remote)
            if mode is not None:
                sftp.chmod(remote, mode)

    def put_bytes(self, data: bytes, remote: str, mode: int | None = None) -> None:
        with self.sftp() as sftp:
            with sftp.open(remote, "wb") as handle:
                handle.write(data)
            if mode is not None:
                sftp.chmod(remote, mode)

    def get_file(self, remote: str, local: str | Path) -> None:
        with self.sftp() as sftp:
            sftp.get(remote, str(local))

    def read_text(self, remote: str) -> str | None:
        """A small remote file's text, or ``None`` when it does not exist."""
        try:
            with self.sftp() as sftp, sftp.open(remote, "rb") as handle:
                return handle.read().decode(errors="replace")
        except FileNotFoundError:
            return None

    def ids(self) -> str:
        """``uid:gid`` of the SSH user on the machine: who owns the job's directories there, so
        the workload's container runs as that user (never root-owned results, no root needed)."""
        if self._ids is None:
            out = self.check(["sh", "-c", 'echo "$(id -u):$(id -g)"'], 30).strip()
            if not out.replace(":", "").isdigit():
                raise ExecutionError(f"{self.name}: unexpected output of id: {out[:200]!r}")
            self._ids = out
        return self._ids


def _send_all(channel: Any, data: bytes) -> None:
    """``channel.sendall`` that survives a slow reader. The channel's timeout (0.2 s, set for the
    output loop) also bounds each send: a remote ``docker load`` busy for longer than that (another
    load finishing on the same disk) made ``sendall`` raise a timeout, which ended the input early,
    and the remote side failed with "unexpected EOF". Wait for window space instead, as long as the
    remote command runs."""
    view = memoryview(data)
    while view:
        try:
            sent = channel.send(view.tobytes()[:CHUNK])
        except TimeoutError:
            if channel.closed or channel.exit_status_ready():
                raise EOFError("the remote command ended before reading all its input") from None
            continue
        if sent == 0:
            raise EOFError("the channel was closed while sending input")
        view = view[sent:]


#: How long a local producer may take to exit after its remote consumer succeeded.
_LOCAL_EXIT_GRACE_S = 60.0


def _drain_in_background(stream: IO[bytes] | None) -> None:
    """Read and discard what a producer still writes, so it can reach its own exit."""
    if stream is None:
        return

    def drain() -> None:
        with contextlib.suppress(OSError, ValueError):
            while stream.read(CHUNK):
                pass

    threading.Thread(target=drain, name="drain-local-producer", daemon=True).start()


_KNOWN_HOSTS_LOCK = threading.Lock()


def _connect(address: str, port: int, user: str, key_path: str, timeout: float, known_hosts: str | None) -> Any:
    """A connected paramiko client; the host key is checked against ``known_hosts`` and, when
    new, added to it (trust on first use), under a lock shared by threads and processes."""
    import paramiko

    client = paramiko.SSHClient()
    if known_hosts and Path(known_hosts).exists():
        client.load_host_keys(known_hosts)
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    try:
        client.connect(address, port=port, username=user, key_filename=key_path, timeout=timeout,
                       banner_timeout=timeout, auth_timeout=timeout, allow_agent=False, look_for_keys=False)
        if known_hosts:
            _remember_host_key(known_hosts, address, port, client.get_transport().get_remote_server_key())
    except BaseException:
        client.close()
        raise
    return client


def _remember_host_key(known_hosts: str, address: str, port: int, key: Any) -> None:
    """Merge one host key into the file: parallel connections of a run (prepare threads, mapped
    tasks) must not overwrite each other's entries."""
    import paramiko

    entry = address if port == 22 else f"[{address}]:{port}"
    path = Path(known_hosts)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _KNOWN_HOSTS_LOCK, open(f"{known_hosts}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        keys = paramiko.HostKeys()
        if path.exists():
            keys.load(str(path))
        known = keys.lookup(entry)
        if known is not None and known.get(key.get_name()) == key:
            return
        keys.add(entry, key.get_name(), key)
        keys.save(str(path))


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.partition(":") if address.count(":") == 1 else (address, "", "")
    return host, int(port or 22)


def _client(address: str, user: str, key_path: str, timeout: float, known_hosts: str | None = None) -> Any:
    """A connected paramiko client for ``host[:port]`` (kept for callers of the old API)."""
    host, port = _split_address(address)
    return _connect(host, port, user, key_path, timeout, known_hosts)


def wait_reachable(address: str, user: str, key_path: str, timeout: float, interval: float = 1.0,
                   known_hosts: str | None = None) -> float:
    """Seconds until an SSH login with the run's key succeeds and runs ``true``; raises
    :class:`ExecutionError` with the last failure after ``timeout``. ``address`` may carry a
    port (``host:2222``)."""
    started = time.monotonic()
    last = "never tried"
    host, port = _split_address(address)
    while True:
        remaining = timeout - (time.monotonic() - started)
        if remaining <= 0:
            raise ExecutionError(f"{user}@{address} not reachable over SSH within {timeout:.0f} s: {last}")
        attempt = min(10.0, max(remaining, 0.5))
        try:
            with RemoteHost(host, port=port, user=user, key_path=key_path, known_hosts=known_hosts,
                            connect_timeout=attempt) as remote:
                status, _ = remote.run(["true"], attempt)
                if status == 0:
                    return time.monotonic() - started
                last = "'true' failed" if status is not None else "'true' timed out"
        except _ssh_errors() as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(min(interval, max(0.0, timeout - (time.monotonic() - started))))


class SSHExecutor(Executor):
    """Start one job on the machine of ``target.access`` over SSH and fetch its document back.

    Everything (address, user, key, interpreter, image, engine) comes from the target's access,
    so one executor serves every SSH target of a run.
    """

    def __init__(self, connect_timeout: float = 30.0, grace: float = DEFAULT_GRACE_S) -> None:
        self.connect_timeout = connect_timeout
        self.grace = grace
        """Seconds between the SIGTERM (timeout or stop) and the SIGKILL; also the slack of the
        SSH wait limit."""

    def __repr__(self) -> str:
        return "SSHExecutor()"

    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float, *,
                stop: threading.Event | None = None) -> ResultDocument:
        access = target.access
        if access.kind not in ("ssh", "ssh_docker"):
            raise ExecutionError(f"SSHExecutor cannot reach a {access.kind!r} target ({target.name})")
        archive_path.parent.mkdir(parents=True, exist_ok=True)
        remote_dir = f"/tmp/dlbench-job-{safe_name(job.job_id, 80)}"
        launched = time.monotonic()
        host = RemoteHost.from_access(access, self.connect_timeout)
        try:
            host.connect()
        except Exception as exc:  # noqa: BLE001 - becomes the failed document of the job
            return finish(job, None, archive_path, launched,
                          error=f"SSH to {host.name} failed: {type(exc).__name__}: {exc}")
        output, error, doc = "", "", None
        watch = StopWatch()
        exited: list[float] = []  # when the workload's exit reached the controller (its monotonic clock)
        try:
            host.check(["sh", "-c", 'rm -rf -- "$1" && mkdir -m 0700 -- "$1"', "sh", remote_dir], 60)
            if access.kind == "ssh_docker":
                output, error = self._run_container(host, job, target, remote_dir, timeout, stop, watch, exited)
            else:
                output, error = self._run_process(host, job, target, remote_dir, timeout, stop, watch, exited)
            doc, why = self._fetch(host, f"{remote_dir}/result.json")
            if doc is None and not error:
                error = why
        except (*_ssh_errors(), ExecutionError) as exc:
            error = error or f"SSH session to {host.name} failed: {type(exc).__name__}: {exc}"
        finally:
            try:
                host.run(["rm", "-rf", "--", remote_dir], 60)
            except _ssh_errors() as exc:
                log.warning("could not remove %s on %s: %s", remote_dir, host.name, exc)
            host.close()
        # Launch-to-end: from before the SSH connection to the exit status (process) or the return
        # of ``docker wait`` (container) arriving here, on this side's clock (the node's clock is
        # another one). Fetching the document, removing the container and the job directory are
        # teardown_time.
        return finish(job, doc, archive_path, launched, error=error, output=output, stopped=watch,
                      ended=exited[0] if exited else None)

    def _run_process(self, host: RemoteHost, job: Job, target: Target, remote_dir: str, timeout: float,
                     stop: threading.Event | None = None, watch: StopWatch | None = None,
                     exited: list[float] | None = None) -> tuple[str, str]:
        """``timeout`` on the node too: it signals the workload's whole process group, so a lost
        SSH session cannot leave a workload (or its iperf3/fio children) running. Its PID (also
        the group's id: ``timeout`` leads its own process group) is written to ``<remote_dir>/pid``
        before it starts, for a stop."""
        access = target.access
        pidfile = f"{remote_dir}/pid"
        env = ["TF_CPP_MIN_LOG_LEVEL=2"] + ([f"PYTHONPATH={access.pythonpath}"] if access.pythonpath else [])
        env += [f"{key}={value}" for key, value in process_env(access.gpus).items()]
        # With a shared lock on the machine's busy file (machine_lock.REMOTE_HOLD): the machine
        # is busy while the workload lives, even if this SSH session or its worker is gone.
        argv = ["sh", "-c", "mkdir -p /run/lock 2>/dev/null; " + _RECORD_PID, "sh", pidfile,
                "timeout", f"--kill-after={max(1, round(self.grace))}", str(max(1, int(timeout))), *REMOTE_HOLD,
                "env", *env,
                access.python, "-m", "dlbench.workloads",
                *job.workload_argv(f"{remote_dir}/result.json", target.data_dir)]
        pid: list[str] = []

        def stop_action(seen: StopWatch) -> None:
            self._stop_process(host, pidfile, pid, seen)

        with on_stop(stop, stop_action, name=f"stop-{job.job_id[:12]}") as seen:
            status, output = host.run(argv, timeout + 2 * self.grace)
        if exited is not None:
            exited.append(time.monotonic())
        if watch is not None:
            watch.fired, watch.error = seen.fired, seen.error
        if seen.fired:
            leftover = _end_group(host, pid[0]) if pid else ""
            if leftover:
                return output, leftover
            if status is None:
                return output, f"the workload did not end within {timeout + 2 * self.grace:.0f} s of its start"
            return output, f"workload exited with status {status}" if status else ""
        if status is None or status == 124 or status == 137:
            return output, timed_out(timeout)
        if status != 0:
            return output, f"workload exited with status {status}: {_last_line(output)}"
        return output, ""

    def _stop_process(self, host: RemoteHost, pidfile: str, pid: list[str], watch: StopWatch) -> None:
        """SIGTERM to the node's ``timeout`` (it forwards it to the workload's group and SIGKILLs
        the group after ``--kill-after``); SIGKILL to the group ourselves if the workload has not
        ended ``grace`` + 5 s later. ``pid`` receives the PID for the check after the end."""
        while not pid:
            status, out = host.run(["cat", "--", pidfile], 30)
            if status == 0 and out.strip().isdigit():
                pid.append(out.strip())
            elif watch.ended.wait(0.2):
                return  # the workload ended before its PID could be read: nothing to stop
        host.run(["sh", "-c", 'kill -s TERM "$1" 2>/dev/null; true', "sh", pid[0]], 30)
        if not watch.ended.wait(self.grace + 5):
            host.run(["sh", "-c", _KILL_GROUP, "sh", pid[0]], 30)

    def _run_container(self, host: RemoteHost, job: Job, target: Target, remote_dir: str, timeout: float,
                       stop: threading.Event | None = None, watch: StopWatch | None = None,
                       exited: list[float] | None = None) -> tuple[str, str]:
        """``docker run -d`` with the one launch, ``docker wait`` bounded by the timeout, the logs,
        and ``docker rm -f`` whatever happened (a fresh connection if this one broke). A stop is
        ``docker stop -t <grace>`` (SIGTERM, the grace, SIGKILL: done by the engine)."""
        access: SSHDocker = target.access  # type: ignore[assignment]
        engine = access.engine
        launch = workload_launch(job, target, remote_dir, target.data_dir, host.ids()).holding(
            REMOTE_BUSY, timeout, self.grace)
        _remove_leftover(host, engine, job)
        output, error = "", ""
        started = False
        try:
            status, out = host.run([*ENSURE_REMOTE_BUSY, *launch.cli_argv(engine)], 300)
            if status != 0:
                # Not started, or a hung client: remove only a container our labels prove is ours
                # (a name conflict with someone else's container must not delete theirs).
                _remove_leftover(host, engine, job)
                return out, f"{engine} could not start the workload container: {_last_line(out)}"
            started = True
            wait_limit = max(1, int(timeout))

            def stop_action(_: StopWatch) -> None:
                grace = max(0, round(self.grace))
                host.check([engine, "stop", "-t", str(grace), launch.name], grace + 120)

            with on_stop(stop, stop_action, name=f"stop-{launch.name}") as seen:
                status, out = host.run(["timeout", str(wait_limit), engine, "wait", launch.name],
                                       wait_limit + self.grace)
            if exited is not None:
                exited.append(time.monotonic())
            if watch is not None:
                watch.fired, watch.error = seen.fired, seen.error
            code = out.strip().splitlines()[-1] if status == 0 and out.strip() else ""
            if seen.fired and (status != 0 or not code.lstrip("-").isdigit()):
                error = f"{engine} wait after the stop failed ({status}): {_last_line(out)}"
            elif status != 0 or not code.lstrip("-").isdigit():
                error = timed_out(timeout, "container removed")
            elif int(code) != 0:
                error = f"workload container exited with status {code}"
            _, output = host.run([engine, "logs", launch.name], 120)
            if error and not error.startswith(TIMED_OUT):
                error = f"{error}: {_last_line(output)}"
        finally:
            if started:
                removal = _remove_container(host, engine, launch.name)
                if removal:
                    error = f"{error}; {removal}" if error else removal
        return output, error

    @staticmethod
    def _fetch(host: RemoteHost, remote: str) -> tuple[ResultDocument | None, str]:
        with tempfile.TemporaryDirectory(prefix="dlbench-ssh-") as tmp:
            local = Path(tmp) / "result.json"
            try:
                host.get_file(remote, local)
            except OSError as exc:
                return None, f"no result document on the node ({remote}): {exc}"
            return read_document(local)


_RECORD_PID = 'echo "$$" > "$1"; shift; exec "$@"'
"""Write this shell's PID to ``$1``, then become the command (so the PID is the command's)."""
_KILL_GROUP = 'kill -s KILL -- -"$1" 2>/dev/null; kill -s KILL "$1" 2>/dev/null; true'
_GROUP_ALIVE = ('g=$1; for f in /proc/[0-9]*/stat; do read -r s 2>/dev/null < "$f" || continue; s=${s##*) }; '
                'set -- $s; [ "$3" = "$g" ] && [ "$1" != Z ] && exit 0; done; exit 1')
"""Exit 0 while a live (not zombie) process is in process group ``$1`` (field 5 of
/proc/<pid>/stat, after the command name in parentheses)."""


def _end_group(host: RemoteHost, pgid: str, wait: float = 5.0) -> str:
    """After a stop: nothing of the job's process group may be left on the node. SIGKILL what
    is (children that ignored the TERM), verify; '' when the group is empty, else why not."""
    if host.run(["sh", "-c", _GROUP_ALIVE, "sh", pgid], 30)[0] != 0:
        return ""
    host.run(["sh", "-c", _KILL_GROUP, "sh", pgid], 30)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if host.run(["sh", "-c", _GROUP_ALIVE, "sh", pgid], 30)[0] != 0:
            return ""
        time.sleep(0.2)
    return f"process group {pgid} of the workload still alive on {host.address} after SIGKILL"


def _remove_leftover(host: RemoteHost, engine: str, job: Job) -> None:
    """A retry finds the container of its dead attempt holding the name: remove it when its labels
    say it is ours (same run and job); a foreign container is left alone (the run fails visibly)."""
    name = container_name(job)
    fmt = '{{index .Config.Labels "dlbench.run_id"}}|{{index .Config.Labels "dlbench.job_id"}}'
    status, out = host.run([engine, "inspect", "--type", "container", "--format", fmt, name], 60)
    if status == 0 and out.strip() == f"{job.run_id}|{job.job_id}":
        host.run([engine, "rm", "-f", name], 120)


def _remove_container(host: RemoteHost, engine: str, name: str) -> str:
    """``<engine> rm -f name``; '' when it is gone, else why not (teardown sweeps it by label)."""
    for attempt in range(2):
        try:
            remote = host if attempt == 0 else RemoteHost(host.address, port=host.port, user=host.user,
                                                          key_path=host.key_path, known_hosts=host.known_hosts)
            with contextlib.ExitStack() as stack:
                if remote is not host:
                    stack.enter_context(remote)
                status, out = remote.run([engine, "rm", "-f", name], 120)
                if status == 0 or "No such container" in out:
                    return ""
                last = f"status {status}: {out.strip()[-300:]}"
        except _ssh_errors() as exc:
            last = f"{type(exc).__name__}: {exc}"
    log.error("container %s on %s not removed (%s); the run's teardown sweeps it by label", name, host.name, last)
    return f"container {name} could not be removed ({last})"


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else "(no output)"


__all__ = ["RemoteHost", "SSHExecutor", "wait_reachable"]
