"""The SSH transport: one session type for every remote machine (paramiko).

:class:`RemoteHost` runs argv-only commands (quoted by :mod:`dlbench.execution.shell`), moves
files and directory trees over SFTP or tar streams, and streams a local process's output into a
remote command (``docker save | docker load``). :func:`wait_reachable` waits for a fresh machine.
Host keys are trusted on first use into a per-run ``known_hosts`` next to the run's key: nodes
are freshly deployed, so there is no earlier key to compare with, but within a run a changed
host key is refused. The SSH executor (:mod:`dlbench.execution.ssh`), the machine lock, staging,
preparation and the network peer all talk through this module.
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
from typing import IO, Any, Protocol

from dlbench.errors import ExecutionError
from dlbench.execution.shell import command_line
from dlbench.polling import Deadline, poll

log = logging.getLogger(__name__)


class SSHEndpoint(Protocol):
    """What a session needs of an access (:class:`dlbench.execution.targets.SSHHost` has it): a
    protocol, so this module, which the access types use, imports none of them."""

    @property
    def address(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def user(self) -> str: ...
    @property
    def key_path(self) -> str: ...
    @property
    def known_hosts(self) -> str | None: ...

OUTPUT_LIMIT = 4 * 2**20
"""Bytes of a command's output kept in memory (the tail): enough for any error message."""
CHUNK = 2**20
WINDOW = 2**24
"""SSH channel window: paramiko's 2 MB default throttles image and data streams."""


def ssh_errors() -> tuple[type[BaseException], ...]:
    import paramiko  # heavy: paramiko (and cryptography) take a tenth of a second; only SSH callers need it

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
    def from_access(cls, access: SSHEndpoint, connect_timeout: float = 30.0) -> RemoteHost:
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
    import paramiko  # heavy: paramiko (and cryptography) take a tenth of a second; only SSH callers need it

    client = paramiko.SSHClient()
    if known_hosts and Path(known_hosts).exists():
        client.load_host_keys(known_hosts)
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    try:
        client.connect(address, port=port, username=user, key_filename=key_path, timeout=timeout,
                       banner_timeout=timeout, auth_timeout=timeout, allow_agent=False, look_for_keys=False)
        if known_hosts:
            transport = client.get_transport()
            assert transport is not None  # connect() returned: the client has its transport
            _remember_host_key(known_hosts, address, port, transport.get_remote_server_key())
    except BaseException:
        client.close()
        raise
    return client


def _remember_host_key(known_hosts: str, address: str, port: int, key: Any) -> None:
    """Merge one host key into the file: parallel connections of a run (prepare threads, mapped
    tasks) must not overwrite each other's entries."""
    import paramiko  # heavy: paramiko (and cryptography) take a tenth of a second; only SSH callers need it

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
    deadline = Deadline(timeout, f"{user}@{address} over SSH", may_be_spent=True)
    last = "never tried"
    host, port = _split_address(address)

    def logged_in() -> bool:
        nonlocal last
        if deadline.expired():  # no try at the deadline: one may take up to 10 s more
            return False
        attempt = min(10.0, max(deadline.remaining(), 0.5))
        try:
            with RemoteHost(host, port=port, user=user, key_path=key_path, known_hosts=known_hosts,
                            connect_timeout=attempt) as remote:
                status, _ = remote.run(["true"], attempt)
                if status == 0:
                    return True
                last = "'true' failed" if status is not None else "'true' timed out"
        except ssh_errors() as exc:
            last = f"{type(exc).__name__}: {exc}"
        return False

    poll(logged_in, bool, deadline, interval, retry=False, give_up=lambda _: ExecutionError(
        f"{user}@{address} not reachable over SSH within {timeout:.0f} s: {last}"))
    return time.monotonic() - started


