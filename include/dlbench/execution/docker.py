"""Run a workload in the workload image on a Docker engine: the "container" platforms.

Every container is named ``dlbench-<run>-<job>`` and labelled with the run id, job id and an
expiry, is always removed when the job ends (even on timeout or error), and can be swept by
label by the run's teardown or the janitor. Results come back through a bind-mounted directory
and are archived on the controller by :func:`dlbench.execution.base.finish`.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dlbench.config import Job
from dlbench.execution.base import Executor, finish, read_document
from dlbench.execution.container import DATA_MOUNT, LABEL, RESULTS_MOUNT, container_name, labels_for, workload_launch
from dlbench.execution.targets import Target
from dlbench.workloads.result import ResultDocument

__all__ = ["DATA_MOUNT", "LABEL", "RESULTS_MOUNT", "DockerExecutor", "bridge_gateway", "container_name",
           "labels_for", "remove_run_containers", "sweep_containers"]


def _client() -> Any:
    import docker

    return docker.from_env(timeout=120)


class DockerExecutor(Executor):
    """The workload image on this host's Docker engine, results on a bind mount.

    The launch (name, labels with the run's expiry, user, mounts, limits) comes from
    :func:`dlbench.execution.container.workload_launch`, the same builder the SSH executor uses.
    """

    def __init__(self, image: str | None = None, client: Any = None, user: str | None = None) -> None:
        self.image = image
        self.client = client
        # The controller's uid:gid by default: it owns the job's directories here, so the
        # bind-mounted results are never root-owned on a user's machine (and the workload is known
        # to run without root in the image).
        self.user = user or f"{os.getuid()}:{os.getgid()}"

    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float) -> ResultDocument:
        import docker
        from requests.exceptions import ConnectionError as RequestsConnectionError
        from requests.exceptions import ReadTimeout

        client = self.client or _client()
        if self.image and target.access.kind == "docker" and target.access.image != self.image:
            target = target.model_copy(update={"access": target.access.model_copy(update={"image": self.image})})
        with tempfile.TemporaryDirectory(prefix="dlbench-docker-") as tmp:
            os.chmod(tmp, 0o777)  # an explicitly chosen user (not ours) must be able to write its document
            data_dir = str(Path(target.data_dir).resolve()) if target.data_dir else None
            launch = workload_launch(job, target, tmp, data_dir, self.user)
            _remove_leftover(client, job)
            launched = time.monotonic()
            container = None
            output, error = "", ""
            try:
                container = client.containers.run(**launch.sdk_kwargs())
                try:
                    status = container.wait(timeout=timeout)
                    if status.get("StatusCode", 1) != 0:
                        error = f"workload container exited with status {status.get('StatusCode')}"
                except (ReadTimeout, RequestsConnectionError):
                    container.kill()
                    error = f"workload timed out after {timeout:.0f} s (container killed)"
                output = container.logs(stdout=True, stderr=True).decode(errors="replace")
            except docker.errors.DockerException as exc:
                error = f"docker could not run the workload: {exc}"
            finally:
                if container is not None:
                    try:
                        container.remove(force=True)
                    except docker.errors.NotFound:
                        pass
            doc, why = read_document(Path(tmp) / "result.json")
            if error and output:
                error = f"{error}: {output.strip().splitlines()[-1][:400]}"
            return finish(job, doc, archive_path, launched, error=error or (why if doc is None else ""), output=output)


def _remove_leftover(client: Any, job: Job) -> None:
    """A retry of a job whose worker died mid-run finds that attempt's container still holding the
    name: remove it (it is ours, same run and job, per its labels) instead of failing on a name
    conflict. A foreign container with that name is left alone, and the run then fails visibly."""
    import docker

    try:
        stale = client.containers.get(container_name(job))
    except docker.errors.NotFound:
        return
    if stale.labels.get("dlbench.run_id") == job.run_id and stale.labels.get("dlbench.job_id") == job.job_id:
        stale.remove(force=True)


def remove_run_containers(run_id: str, client: Any = None) -> list[str]:
    """Teardown: remove every container of ``run_id`` (only ours, found by label)."""
    client = client or _client()
    removed = []
    for container in client.containers.list(all=True, filters={"label": [f"{LABEL}=1", f"dlbench.run_id={run_id}"]}):
        container.remove(force=True)
        removed.append(container.name)
    return removed


def sweep_containers(now: datetime | None = None, client: Any = None, dry_run: bool = False) -> list[str]:
    """Janitor: remove our containers whose expiry has passed; never touches unlabelled ones."""
    client = client or _client()
    now = now or datetime.now(UTC)
    swept = []
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}=1"}):
        try:
            expires = datetime.fromisoformat(container.labels.get("dlbench.expires_at", ""))
        except ValueError:
            expires = datetime.fromtimestamp(0, UTC)  # unreadable expiry: ours, and treated as expired
        if expires <= now:
            if not dry_run:
                container.remove(force=True)
            swept.append(container.name)
    return swept


def bridge_gateway(client: Any = None, network: str = "bridge") -> str:
    """The host's address on a Docker network (where a container reaches the host)."""
    client = client or _client()
    config = client.networks.get(network).attrs["IPAM"]["Config"]
    if not config or "Gateway" not in config[0]:
        raise RuntimeError(f"docker network {network!r} has no gateway address")
    return config[0]["Gateway"]
