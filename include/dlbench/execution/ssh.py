"""Run a workload on a remote machine over SSH: the bare-metal (and VM) platforms.

The SSH session itself (:class:`~dlbench.execution.transport.RemoteHost`) is the transport's.

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
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
import time
from pathlib import Path

from dlbench.errors import ExecutionError
from dlbench.execution.base import (
    DEFAULT_GRACE_S,
    TIMED_OUT,
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
from dlbench.execution.targets import SSHDocker, SSHHost, Target
from dlbench.execution.transport import RemoteHost, ssh_errors
from dlbench.jobs import Job
from dlbench.polling import Deadline, until
from dlbench.suites import framework_of
from dlbench.workloads.result import ResultDocument

log = logging.getLogger(__name__)

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
        if not isinstance(access, SSHHost):
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
            if access.runs_in_container:
                output, error = self._run_container(host, job, target, remote_dir, timeout, stop, watch, exited)
            else:
                output, error = self._run_process(host, job, target, remote_dir, timeout, stop, watch, exited)
            doc, why = self._fetch(host, f"{remote_dir}/result.json")
            if doc is None and not error:
                error = why
        except ssh_errors() + (ExecutionError,) as exc:
            error = error or f"SSH session to {host.name} failed: {type(exc).__name__}: {exc}"
        finally:
            try:
                host.run(["rm", "-rf", "--", remote_dir], 60)
            except ssh_errors() as exc:
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
        assert isinstance(access, SSHHost)  # execute() refused every other access
        pidfile = f"{remote_dir}/pid"
        env = ["TF_CPP_MIN_LOG_LEVEL=2"] + ([f"PYTHONPATH={access.pythonpath}"] if access.pythonpath else [])
        env += [f"{key}={value}" for key, value in process_env(access.gpus).items()]
        # With a shared lock on the machine's busy file (machine_lock.REMOTE_HOLD): the machine
        # is busy while the workload lives, even if this SSH session or its worker is gone.
        argv = ["sh", "-c", "mkdir -p /run/lock 2>/dev/null; " + _RECORD_PID, "sh", pidfile,
                "timeout", f"--kill-after={max(1, round(self.grace))}", str(max(1, int(timeout))), *REMOTE_HOLD,
                "env", *env,
                access.python_for(framework_of(job.args)), "-m", "dlbench.workloads",
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
        access = target.access
        assert isinstance(access, SSHDocker)  # execute() runs a container only for an SSHDocker access
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
    if until(lambda: host.run(["sh", "-c", _GROUP_ALIVE, "sh", pgid], 30)[0] != 0,
             Deadline(wait, f"process group {pgid} after SIGKILL"), 0.2):
        return ""
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
        except ssh_errors() as exc:
            last = f"{type(exc).__name__}: {exc}"
    log.error("container %s on %s not removed (%s); the run's teardown sweeps it by label", name, host.name, last)
    return f"container {name} could not be removed ({last})"


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else "(no output)"


__all__ = ["SSHExecutor"]
