"""Run a workload on a remote machine over SSH: the bare-metal (and VM) platforms.

``runtime`` host: ``<remote python> -m dlbench.workloads ...`` on the node (the runner installed
on the image). ``runtime`` docker: the workload image through the node's own Docker engine
(``container_on_bare_metal`` without Kubernetes). Either way the result document is written to
a per-job directory on the node, fetched back over SFTP, archived by
:func:`dlbench.execution.base.finish`, and the remote directory (and container) removed.

Host keys are trusted on first use into a per-run ``known_hosts`` next to the run's key: nodes
are freshly deployed, so there is no earlier key to compare with, but within a run a changed
host key is refused.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from dlbench.config import Job
from dlbench.execution.base import ExecutionError, Executor, Target, finish, read_document
from dlbench.execution.shell import command_line, pipeline
from dlbench.workloads.result import ResultDocument

DEFAULT_IMAGE = "dlbench-workload:latest"


def container_name(job: Job) -> str:
    return f"dlbench-{job.run_id[:60]}-{job.job_id[:12]}"


def _client(address: str, user: str, key_path: str, timeout: float, known_hosts: str | None = None) -> Any:
    import paramiko

    client = paramiko.SSHClient()
    if known_hosts and Path(known_hosts).exists():
        client.load_host_keys(known_hosts)
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    host, _, port = address.partition(":") if address.count(":") == 1 else (address, "", "")
    client.connect(host, port=int(port or 22), username=user, key_filename=key_path, timeout=timeout,
                   banner_timeout=timeout, auth_timeout=timeout, allow_agent=False, look_for_keys=False)
    if known_hosts:
        client.save_host_keys(known_hosts)
    return client


def wait_reachable(address: str, user: str, key_path: str, timeout: float, interval: float = 1.0,
                   known_hosts: str | None = None) -> float:
    """Seconds until an SSH login with the run's key succeeds and runs ``true``; raises
    :class:`ExecutionError` with the last failure after ``timeout``."""
    import paramiko

    started = time.monotonic()
    last = "never tried"
    while True:
        remaining = timeout - (time.monotonic() - started)
        if remaining <= 0:
            raise ExecutionError(f"{user}@{address} not reachable over SSH within {timeout:.0f} s: {last}")
        try:
            client = _client(address, user, key_path, min(10.0, max(remaining, 0.5)), known_hosts)
            try:
                _, stdout, _ = client.exec_command("true", timeout=min(10.0, max(remaining, 0.5)))
                if stdout.channel.recv_exit_status() == 0:
                    return time.monotonic() - started
                last = "'true' failed"
            finally:
                client.close()
        except (OSError, paramiko.SSHException, EOFError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(min(interval, max(0.0, timeout - (time.monotonic() - started))))


class SSHExecutor(Executor):
    """Start one job on ``target.address`` over SSH and fetch its document back over SFTP."""

    def __init__(self, key_path: str, user: str = "root", python: str = "python3", image: str = DEFAULT_IMAGE,
                 known_hosts: str | None = None, connect_timeout: float = 30.0) -> None:
        self.key_path = key_path
        self.user = user
        self.python = python
        self.image = image
        self.known_hosts = known_hosts
        self.connect_timeout = connect_timeout

    def __repr__(self) -> str:
        return f"SSHExecutor(user={self.user!r}, python={self.python!r})"

    def command(self, job: Job, target: Target, remote_dir: str) -> str:
        """The shell command run on the node (``timeout`` there too, so a lost SSH session
        cannot leave a workload running)."""
        if target.runtime == "docker":
            data = ["-v", f"{target.data_dir}:/data:{'rw' if job.suite == 'disk' else 'ro'}"] if target.data_dir else []
            argv = ["docker", "run", "--rm", "--name", container_name(job),
                    "--label", "dlbench=1", "--label", f"dlbench.run_id={job.run_id}",
                    "--label", f"dlbench.job_id={job.job_id}", "-e", "TF_CPP_MIN_LOG_LEVEL=2", "-e", "HOME=/tmp",
                    "-v", f"{remote_dir}:/results", *data, self.image, "python", "-m", "dlbench.workloads",
                    *job.workload_argv("/results/result.json", "/data" if target.data_dir else None)]
        else:
            argv = ["env", "TF_CPP_MIN_LOG_LEVEL=2", self.python, "-m", "dlbench.workloads",
                    *job.workload_argv(f"{remote_dir}/result.json", target.data_dir)]
        return command_line(argv)

    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float) -> ResultDocument:
        if not target.address:
            raise ExecutionError(f"target {target.name} has no address")
        archive_path.parent.mkdir(parents=True, exist_ok=True)
        remote_dir = f"/tmp/dlbench-{job.job_id}"
        launched = time.monotonic()
        output, error, doc = "", "", None
        try:
            client = _client(target.address, self.user, self.key_path, self.connect_timeout, self.known_hosts)
        except Exception as exc:  # noqa: BLE001 - becomes the failed document of the job
            return finish(job, None, archive_path, launched,
                          error=f"SSH to {self.user}@{target.address} failed: {type(exc).__name__}: {exc}")
        try:
            inner = self.command(job, target, remote_dir)
            script = (pipeline(["rm", "-rf", remote_dir], ["mkdir", "-p", "-m", "0777", remote_dir])
                      + f" && timeout --kill-after=10 {max(1, int(timeout))} {inner}")
            status, output = self._run(client, script, timeout + 20)
            if status is None:
                error = f"workload timed out after {timeout:.0f} s"
                if target.runtime == "docker":
                    self._run(client, command_line(["docker", "rm", "-f", container_name(job)]), 30)
            elif status != 0:
                tail = [line for line in output.strip().splitlines() if line.strip()]
                error = f"workload exited with status {status}: {tail[-1][:500] if tail else '(no output)'}"
            doc, why = self._fetch(client, f"{remote_dir}/result.json")
            if doc is None and not error:
                error = why
        finally:
            try:
                self._run(client, command_line(["rm", "-rf", remote_dir]), 30)
            finally:
                client.close()
        return finish(job, doc, archive_path, launched, error=error, output=output)

    @staticmethod
    def _run(client: Any, command: str, timeout: float) -> tuple[int | None, str]:
        """Exit status (None on timeout) and combined output."""
        channel = client.get_transport().open_session()
        channel.set_combine_stderr(True)
        channel.exec_command(command)
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout
        while not channel.exit_status_ready() or channel.recv_ready():
            if channel.recv_ready():
                chunks.append(channel.recv(65536))
            elif time.monotonic() > deadline:
                channel.close()
                return None, b"".join(chunks).decode(errors="replace")
            else:
                time.sleep(0.05)
        return channel.recv_exit_status(), b"".join(chunks).decode(errors="replace")

    @staticmethod
    def _fetch(client: Any, remote: str) -> tuple[ResultDocument | None, str]:
        with tempfile.TemporaryDirectory(prefix="dlbench-ssh-") as tmp:
            local = Path(tmp) / "result.json"
            try:
                sftp = client.open_sftp()
                try:
                    sftp.get(remote, str(local))
                finally:
                    sftp.close()
            except OSError as exc:
                return None, f"no result document on the node ({remote}): {exc}"
            return read_document(local)
