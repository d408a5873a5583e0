"""Run a workload as a process on this host: the embedded ``bare_metal`` platform.

The workload leads its own session (and so its own process group): a stop or a timeout signals
the whole group, so its children (iperf3, fio) end with it, and a signal meant for the worker
(Ctrl-C in a terminal) does not reach the workload by accident.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from dlbench import settings
from dlbench.execution import workload_env
from dlbench.execution.base import (
    DEFAULT_GRACE_S,
    TIMED_OUT,
    Executor,
    StopWatch,
    finish,
    on_stop,
    read_document,
    terminate_then_kill,
    timed_out,
)
from dlbench.execution.gpus import process_env
from dlbench.execution.machine_lock import workload_hold_fd
from dlbench.execution.targets import Target
from dlbench.jobs import Job
from dlbench.suites import framework_of
from dlbench.workloads.result import ResultDocument

WORKLOAD_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "PYTHONPATH",
                "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "OMP_NUM_THREADS")
WORKLOAD_ENV_PREFIXES = ("LC_", "TF_", "XLA_", "NCCL_")
"""What a workload may inherit from the worker: locale, paths, GPU and TensorFlow knobs. Never the
worker's wholesale environment (Airflow connections in AIRFLOW_CONN_*, cloud credentials in OS_*,
the warehouse URL...): a benchmark process has no business with them. What it needs of dlbench's
settings (``DLBENCH_TRACE_SYSCALLS``) is handed over explicitly: :func:`dlbench.settings.workload_env`."""


OUTPUT_TAIL = 256 * 1024
"""Bytes of the workload's output kept (the tail: where the error is)."""


def workload_environment(source: dict[str, str] | None = None) -> dict[str, str]:
    source = dict(os.environ if source is None else source)
    return {k: v for k, v in source.items() if k in WORKLOAD_ENV or k.startswith(WORKLOAD_ENV_PREFIXES)}


def wait_for_exit(proc: subprocess.Popen, timeout: float | None) -> int:
    """``proc.wait(timeout)``, woken by the kernel at the exit: the caller's clock then reads the
    exit, not the end of a sleep.

    Why: ``Popen.wait`` with a timeout polls, sleeping up to 50 ms between looks, so the end of
    ``launch_to_end_time`` was taken 0-50 ms after the exit (more on a busy host: a 52 ms error was
    seen in CI). A pidfd (Linux 5.3+) becomes readable when the process exits; without one, the
    polling wait remains.
    Raises ``subprocess.TimeoutExpired`` like ``Popen.wait``."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here (old kernel, not Linux): Popen's polling wait
        return proc.wait(timeout=timeout)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(None if timeout is None else max(0.0, timeout) * 1000):
            raise subprocess.TimeoutExpired(proc.args, timeout or 0)
    finally:
        os.close(pidfd)
    return proc.wait()  # exited: reaps it at once


class LocalProcessExecutor(Executor):
    """``python -m dlbench.workloads ...`` in a fresh process, so elapsed time includes start-up."""

    def __init__(self, python: str | None = None, env: dict[str, str] | None = None,
                 grace: float = DEFAULT_GRACE_S) -> None:
        # None: the host's workload environment of each job's framework (build/workload-env, as
        # the images and the node image install the training frameworks; build/workload-env-vllm
        # for serving), else the worker's own interpreter; the job's document says which
        # (workload_env.LABEL).
        self.given = workload_env.Environment(python, f"given {python}") if python else None
        self.env = env
        self.grace = grace
        """Seconds between SIGTERM and SIGKILL when the job is stopped."""

    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float, *,
                stop: threading.Event | None = None) -> ResultDocument:
        archive_path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="dlbench-job-") as tmp:
            out = Path(tmp) / "result.json"
            host = self.given or workload_env.local(framework_of(job.args))
            argv = [host.python, "-m", "dlbench.workloads", *job.workload_argv(str(out), target.data_dir)]
            env = {**workload_environment(), **settings.workload_env(), "TF_CPP_MIN_LOG_LEVEL": "2",
                   **process_env(target.access.gpus), **(self.env or {})}
            # Output to a file, not pipes: a child that outlives the workload (and holds the pipe)
            # cannot keep the executor waiting, and a stop never races a pipe reader.
            with open(Path(tmp) / "output.log", "w+b") as output_file:
                # The workload holds this host busy for its whole life (machine_lock), and dies
                # with its executor: a SIGKILLed worker leaves no workload measuring next to the
                # retry of its job.
                hold = workload_hold_fd()
                try:
                    launched = time.monotonic()
                    proc = subprocess.Popen(argv, stdout=output_file, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                            pass_fds=(hold,), preexec_fn=die_with_parent(os.getpid()))
                finally:
                    os.close(hold)
                error = ""
                ended: float | None = None

                def stop_action(watch: StopWatch) -> None:
                    terminate_then_kill(lambda: _signal_group(proc, signal.SIGTERM),
                                        lambda: _signal_group(proc, signal.SIGKILL), watch.ended, self.grace)

                watch = StopWatch()
                try:
                    with on_stop(stop, stop_action, name=f"stop-{job.job_id[:12]}") as watch:
                        try:
                            status = wait_for_exit(proc, timeout)
                            ended = time.monotonic()  # the exit: what follows is teardown
                            if status != 0:
                                error = f"workload exited with status {status}"
                        except subprocess.TimeoutExpired:
                            error = timed_out(timeout)
                            _signal_group(proc, signal.SIGKILL)
                            proc.wait()
                            ended = time.monotonic()
                finally:
                    if proc.poll() is None:  # an exception in between: never leave the workload behind
                        _signal_group(proc, signal.SIGKILL)
                        proc.wait()
                    if ended is None:
                        ended = time.monotonic()
                    if watch.fired or error.startswith(TIMED_OUT):
                        _signal_group(proc, signal.SIGKILL)  # children that outlived or ignored the TERM
                output_file.seek(max(0, output_file.seek(0, os.SEEK_END) - OUTPUT_TAIL))
                output = output_file.read().decode(errors="replace")
            if error.startswith("workload exited"):
                error = f"{error}: {_last_line(output)}"
            doc, why = read_document(out)
            return finish(job, doc, archive_path, launched, error=error or (why if doc is None else ""), output=output,
                          stopped=watch, ended=ended, labels={workload_env.LABEL: host.label})


def die_with_parent(parent: int) -> Callable[[], None]:
    """A ``preexec_fn``: in the forked child, before exec, ask for SIGTERM when the thread that
    started it dies (Linux ``PR_SET_PDEATHSIG``), so the workload writes its document and ends
    instead of running on, unowned, after its worker was killed; exit at once if ``parent`` (the
    executor's pid) is already gone."""

    def arm() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)

    return arm


def _signal_group(proc: subprocess.Popen, sig: signal.Signals) -> None:
    """``sig`` to the workload's process group (its id is the workload's pid: it leads its own
    session). Nothing when the group is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else "(no output)"
