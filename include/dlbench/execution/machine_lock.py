"""A benchmark's exclusive claim on the machines it measures, taken on the machines themselves.

Why: two jobs on one machine measure each other, whichever DAG run, Airflow deployment or worker
they come from. A pool (``dlbench_benchmark``) caps how many jobs run at once, but it cannot say
*which machine* a mapped job lands on: machines are acquired at run time. So every job claims
its machines before its workload starts, and holds the claims until it has ended:

- **this host** (the local provider's processes, containers and QEMU guests): ``flock`` on
  :func:`local_lock_path` (``/run/lock/dlbench-machine.lock``; ``DLBENCH_MACHINE_LOCK`` moves
  it). The kernel drops the lock when the holding process dies, SIGKILL included.
- **a machine reached over SSH** (Ironic nodes, Nova and local VMs): ``flock`` on the machine's
  ``/run/lock/dlbench-machine.lock``, held by a remote ``flock ... cat`` whose stdin is this
  process's SSH channel: closing the channel, the connection dropping or this worker dying all
  end ``cat`` and release the claim. Nothing on the controller's disk, no stale lock to sweep.
- **Kubernetes** pods: no claim; the cluster's scheduler places them (dedicate nodes to
  benchmarks with the settings' ``node_selector``; docs/scaling.md).

A workload can outlive its job's claim: its worker SIGKILLed, the SSH session lost. So the
workloads themselves hold a **shared** lock on the machine's ``dlbench-machine.busy`` for their
whole life (a host process gets it as an inherited descriptor, :func:`workload_hold_fd`; a
process over SSH inherits a descriptor locked with ``flock -s``, :data:`REMOTE_HOLD`; a container,
which runs under its engine and not under our process, gets the machine's busy file bind-mounted
and takes the same lock inside, :func:`hold_prefix`, bounded by a ``timeout`` of its own), and a
claim, once it has the machine, also waits until no workload holds ``busy``: a retry, or another
job, never starts next to the orphan of a killed first try.

The claim is taken before the executor starts its clock (waiting is not measured) and waits up
to ``wait_s``; the holder (run, job, since) is written next to the lock, logged while waiting,
and named in the error when the wait runs out. A VM's hypervisor cannot be claimed through a
cloud's API (Nova hides hosts): the ``host_id`` label records which VMs shared one.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench import settings
from dlbench.errors import MachineBusy
from dlbench.execution.shell import command_line
from dlbench.execution.targets import SSHHost, Target
from dlbench.execution.transport import RemoteHost
from dlbench.polling import Deadline, poll

if TYPE_CHECKING:
    from paramiko import Channel  # heavy at run time (paramiko, cryptography): a type only

log = logging.getLogger(__name__)

REMOTE_LOCK = "/run/lock/dlbench-machine.lock"
REMOTE_HOLDER = "/run/lock/dlbench-machine.holder"
REMOTE_BUSY = "/run/lock/dlbench-machine.busy"
CONTAINER_BUSY = "/run/dlbench-machine.busy"
"""Where a workload container sees its machine's busy file (bind-mounted read-only)."""
_CREATE = '[ -e "$1" ] || : >> "$1"'
"""Shell: create the busy file ``$1`` if missing."""
_HOLD = _CREATE + '; exec 9< "$1"; flock -s 9 || exit 125; shift; exec "$@"'


def hold_prefix(busy: str) -> tuple[str, ...]:
    """Prefix of a workload's command: a shared lock on ``busy`` through descriptor 9, which the
    shell keeps across ``exec``, so the workload itself holds it for its whole life (and stays
    the direct child of the ``timeout`` in front of it, which signals and waits for it)."""
    return ("sh", "-c", _HOLD, "sh", busy)


REMOTE_HOLD = hold_prefix(REMOTE_BUSY)
"""The prefix over SSH, on the node's busy file."""
ENSURE_REMOTE_BUSY = ("sh", "-c", "mkdir -p /run/lock 2>/dev/null; " + _CREATE + '; shift; exec "$@"',
                      "sh", REMOTE_BUSY)
"""Prefix of a ``docker run`` over SSH: the node's busy file exists before it is bind-mounted (an
engine would create a missing source as a directory)."""
LOCKED = "DLBENCH-LOCKED"
CLAIMED = "DLBENCH-CLAIMED"
ORPHAN = 3
"""Exit status of the remote claim when a workload (of a job whose claim ended) still runs."""
LOG_EVERY_S = 60.0
THIS_HOST = "this host"



def local_lock_path() -> Path:
    """This host's lock file: ``DLBENCH_MACHINE_LOCK``, else ``/run/lock/dlbench-machine.lock``
    where writable (every user and deployment on the host agrees on it), else the temp dir."""
    configured = settings.machine_lock()
    if configured:
        return configured
    run_lock = Path("/run/lock")
    if run_lock.is_dir() and os.access(run_lock, os.W_OK):
        return run_lock / "dlbench-machine.lock"
    return Path(tempfile.gettempdir()) / "dlbench-machine.lock"


def local_busy_path() -> Path:
    """Held (shared) by every workload process on this host while it lives."""
    return local_lock_path().with_suffix(".busy")


def _open_local_busy() -> int:
    """A read-only descriptor of this host's busy file, created (0644) if missing."""
    path = local_busy_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)


def ensure_local_busy() -> str:
    """This host's busy file, created if missing (to bind-mount into a local workload container)."""
    os.close(_open_local_busy())
    return str(local_busy_path())


def workload_hold_fd() -> int:
    """A descriptor holding a shared lock on this host's busy file, to hand to a workload process
    (``pass_fds``) and close in the executor: the lock lives as long as the workload, whatever
    happens to the executor."""
    fd = _open_local_busy()
    fcntl.flock(fd, fcntl.LOCK_SH)  # only a claim's instant exclusive check competes: no wait
    return fd


@dataclass(frozen=True)
class MachineKey:
    """One physical (or virtual) machine a job measures on: this host, or an SSH machine."""

    name: str
    ssh: SSHHost | None = None


def machines_of(targets: list[Target]) -> list[MachineKey]:
    """The machines ``targets`` run on, each once, in a fixed order (claims taken in one order
    never deadlock). A QEMU guest of this host claims the guest and this host."""
    keys: dict[str, MachineKey] = {}
    for target in targets:
        access = target.access
        if access.runs_on_this_host:
            keys[THIS_HOST] = MachineKey(THIS_HOST)
        elif isinstance(access, SSHHost):
            name = f"{access.user}@{access.address}:{access.port}"
            keys[name] = MachineKey(name, access)
            if target.labels.get("provider") == "local":  # a guest of this host shares its CPUs
                keys[THIS_HOST] = MachineKey(THIS_HOST)
    return [keys[k] for k in sorted(keys)]


def holder_text(run_id: str, job_label: str) -> str:
    return f"run {run_id} job {job_label} since {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} (pid {os.getpid()})"


@contextlib.contextmanager
def claim_machines(targets: list[Target], holder: str, wait_s: float) -> Iterator[float]:
    """Hold every machine of ``targets`` for the block; yields the seconds spent waiting.
    Raises :class:`MachineBusy` (nothing held) when a machine stays claimed past ``wait_s``."""
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        for key in machines_of(targets):
            left = max(0.0, wait_s - (time.monotonic() - started))
            if key.ssh is None:
                stack.enter_context(_claim_local(holder, left))
            else:
                stack.enter_context(_claim_ssh(key, holder, left))
        waited = time.monotonic() - started
        if waited >= 1.0:
            log.info("machines claimed after waiting %.0f s: %s", waited,
                     ", ".join(k.name for k in machines_of(targets)))
        yield waited


@contextlib.contextmanager
def _claim_local(holder: str, wait_s: float) -> Iterator[None]:
    path = local_lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = Deadline(wait_s, f"claim of {THIS_HOST}", may_be_spent=True)
        _lock_within(fd, deadline, lambda: f"claimed by {_read_holder(path)}", lambda: MachineBusy(
            f"{THIS_HOST} is busy: claimed by {_read_holder(path)} ({path}); waited {wait_s:.0f} s"))
        _await_no_workload(deadline)
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _await_no_workload(deadline: Deadline) -> None:
    """With the machine held: wait until no workload process holds this host's busy file (one
    left running by a job whose worker died), up to ``deadline``."""
    fd = _open_local_busy()
    try:
        _lock_within(fd, deadline, lambda: _ORPHAN_TEXT, lambda: MachineBusy(f"{THIS_HOST} is busy: {_ORPHAN_TEXT}"))
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _lock_within(fd: int, deadline: Deadline, holder: Callable[[], str], busy: Callable[[], MachineBusy]) -> None:
    """Lock ``fd`` exclusively, trying every 0.2 s: a blocking ``flock`` could not give up at the
    deadline (then ``busy()`` is raised) nor say who holds the machine while it waits (logged
    from 2 s on, then every LOG_EVERY_S: "waiting for this host: ``holder()``")."""
    next_log = time.monotonic() + 2.0

    def locked() -> bool:
        nonlocal next_log
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            now = time.monotonic()
            if now >= next_log and not deadline.expired():  # at the deadline the error says it
                log.info("waiting for %s: %s", THIS_HOST, holder())
                next_log = now + LOG_EVERY_S
            return False

    poll(locked, bool, deadline, 0.2, retry=False, give_up=lambda _: busy())


_ORPHAN_TEXT = "a workload still runs on it whose job's claim has ended (its worker died?)"


def _read_holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "another job (no holder recorded)"
    except OSError as exc:
        return f"another job (holder unreadable: {exc})"


# The remote holder: flock waits up to $2 seconds for the machine (LOCKED), then until no workload
# holds the busy file $5 (else exit ORPHAN), writes the holder $3 to $4, says CLAIMED, and holds
# the machine until its stdin (our channel) closes; the holder file is emptied on the way out.
_REMOTE_SCRIPT = (
    'mkdir -p /run/lock && exec flock -w "$2" "$1" sh -c '
    f'\'echo {LOCKED}; flock -w "$2" "$5" true || exit {ORPHAN}; '
    f'printf "%s\\n" "$3" > "$4"; echo {CLAIMED}; cat > /dev/null; : > "$4"\' sh "$1" "$2" "$3" "$4" "$5"'
)


@contextlib.contextmanager
def _claim_ssh(key: MachineKey, holder: str, wait_s: float) -> Iterator[None]:
    assert key.ssh is not None
    host = RemoteHost.from_access(key.ssh)
    try:
        try:
            channel = host.client.get_transport().open_session()
        except Exception as exc:  # noqa: BLE001 - unreachable, refused, a bad key or host key
            # The executor needs this same connection and reports why it failed, in the words
            # the user knows (SSH unreachable, host key mismatch): nothing can run unclaimed.
            log.warning("%s: cannot connect to claim it (%s: %s); the job's executor will report it", key.name,
                        type(exc).__name__, exc)
            yield
            return
        channel.set_combine_stderr(True)
        channel.exec_command(command_line(["sh", "-c", _REMOTE_SCRIPT, "sh", REMOTE_LOCK, str(int(wait_s) + 1),
                                           holder, REMOTE_HOLDER, REMOTE_BUSY]))
        _await_claim(channel, host, key, wait_s)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, EOFError):
                channel.shutdown_write()  # cat ends: flock releases
                channel.status_event.wait(10)
            channel.close()
    finally:
        host.close()


def _await_claim(channel: Channel, host: RemoteHost, key: MachineKey, wait_s: float) -> None:
    """Read the remote holder's output until it says CLAIMED; MachineBusy when flock gives up."""
    output = b""
    deadline, next_log = time.monotonic() + wait_s + 15, time.monotonic() + 2.0
    channel.settimeout(0.2)
    # Not a poll: it reads the holder's output as it comes; recv's timeout paces it, no sleep.
    while CLAIMED.encode() not in output:
        try:
            data = channel.recv(4096)
        except TimeoutError:
            data = None
        if data == b"" or time.monotonic() > deadline:
            status = channel.recv_exit_status() if data == b"" else None
            text = output.decode(errors="replace").replace(LOCKED, "").strip()
            if status == 1 and not text:  # flock -w ran out
                raise MachineBusy(f"{key.name} is busy: claimed by {_remote_holder(host)}; waited {wait_s:.0f} s")
            if status == ORPHAN:
                raise MachineBusy(f"{key.name} is busy: {_ORPHAN_TEXT}; waited {wait_s:.0f} s")
            raise MachineBusy(f"{key.name}: could not claim the machine (flock {REMOTE_LOCK}): "
                              f"{text[-300:] or f'exit status {status}'}")
        if data:
            output += data
        elif time.monotonic() >= next_log:
            if LOCKED.encode() in output:
                log.info("waiting for %s: %s", key.name, _ORPHAN_TEXT)
            else:
                log.info("waiting for %s: claimed by %s", key.name, _remote_holder(host))
            next_log = time.monotonic() + LOG_EVERY_S


def _remote_holder(host: RemoteHost) -> str:
    try:
        status, out = host.run(["cat", REMOTE_HOLDER], 15)
    except Exception as exc:  # noqa: BLE001 - only informative
        return f"another job (holder unreadable: {type(exc).__name__})"
    return out.strip() if status == 0 and out.strip() else "another job (no holder recorded)"
