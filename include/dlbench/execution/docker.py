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
from dlbench.execution.base import Executor, Target, finish, read_document
from dlbench.provisioning.base import DEFAULT_EXPIRY
from dlbench.workloads.result import ResultDocument

LABEL = "dlbench"
RESULTS_MOUNT = "/results"
DATA_MOUNT = "/data"


def _client() -> Any:
    import docker

    return docker.from_env(timeout=120)


def container_name(job: Job) -> str:
    safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in job.run_id)[:60]
    return f"dlbench-{safe}-{job.job_id[:12]}"


def labels_for(run_id: str, job_id: str = "", expires_at: datetime | None = None) -> dict[str, str]:
    expires = expires_at or datetime.now(UTC) + DEFAULT_EXPIRY
    return {LABEL: "1", "dlbench.run_id": run_id, "dlbench.job_id": job_id, "dlbench.expires_at": expires.isoformat()}


class DockerExecutor(Executor):
    """``docker run <image> python -m dlbench.workloads ...`` with results on a bind mount.

    ``target.extra`` may set ``cpus`` (e.g. "2"), ``memory`` (e.g. "8g"), ``gpus`` ("all" or a
    count) and ``network`` (e.g. "host" for network benchmarks).
    """

    def __init__(self, image: str, client: Any = None, user: str | None = None) -> None:
        self.image = image
        self.client = client
        # The controller's uid:gid by default, so the bind-mounted results are never root-owned
        # on a user's machine (and the workload is known to run without root in the image).
        self.user = user or f"{os.getuid()}:{os.getgid()}"

    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float) -> ResultDocument:
        import docker
        from requests.exceptions import ConnectionError as RequestsConnectionError
        from requests.exceptions import ReadTimeout

        client = self.client or _client()
        with tempfile.TemporaryDirectory(prefix="dlbench-docker-") as tmp:
            os.chmod(tmp, 0o777)  # the container's user must be able to write its document
            data_dir = target.data_dir
            argv = job.workload_argv(f"{RESULTS_MOUNT}/result.json", DATA_MOUNT if data_dir else None)
            volumes = {tmp: {"bind": RESULTS_MOUNT, "mode": "rw"}}
            if data_dir:
                # Read-only for training data; the disk suite writes (and removes) its scratch files there.
                mode = "rw" if job.suite == "disk" else "ro"
                volumes[str(Path(data_dir).resolve())] = {"bind": DATA_MOUNT, "mode": mode}
            options = self._resources(target)
            _remove_leftover(client, job)
            launched = time.monotonic()
            container = None
            output, error = "", ""
            try:
                container = client.containers.run(
                    self.image, ["python", "-m", "dlbench.workloads", *argv], name=container_name(job),
                    labels=labels_for(job.run_id, job.job_id), volumes=volumes, detach=True,
                    user=self.user, environment={"TF_CPP_MIN_LOG_LEVEL": "2", "HOME": "/tmp"},
                    **options,
                )
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

    @staticmethod
    def _resources(target: Target) -> dict[str, Any]:
        import docker

        extra, options = target.extra, {}
        if extra.get("cpus"):
            options["nano_cpus"] = int(float(extra["cpus"]) * 1e9)
        if extra.get("memory"):
            options["mem_limit"] = extra["memory"]
        if extra.get("network"):
            options["network_mode"] = extra["network"]
        if extra.get("gpus"):
            count = -1 if extra["gpus"] == "all" else int(extra["gpus"])
            options["device_requests"] = [docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])]
        return options


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
