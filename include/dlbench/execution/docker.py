"""Run a workload in the workload image on a Docker engine: the "container" platforms.

Every container is named ``dlbench-<run>-<job>`` and labelled with the run id, job id and an
expiry, is always removed when the job ends (even on timeout, stop or error), and can be swept by
label by the run's teardown or the janitor. The jobs of a group may share a user-defined network
(:func:`job_network`, labelled the same way and swept the same way). Results come back through a bind-mounted directory
and are archived on the controller by :func:`dlbench.execution.base.finish`.

The sweeps, the job networks and the bridge's gateway live in :mod:`dlbench.execution.engine`:
what needs them does not load this executor (nor ``requests``).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from requests.exceptions import ConnectionError as RequestsConnectionError
from requests.exceptions import ReadTimeout

from dlbench.execution import workload_env
from dlbench.execution.base import (
    DEFAULT_GRACE_S,
    Executor,
    StopWatch,
    finish,
    on_stop,
    read_document,
    timed_out,
)
from dlbench.execution.container import container_name, workload_launch
from dlbench.execution.engine import engine_client
from dlbench.execution.machine_lock import ensure_local_busy
from dlbench.execution.targets import LocalDocker, Target
from dlbench.jobs import Job
from dlbench.polling import Deadline, until
from dlbench.workloads.result import ResultDocument

__all__ = ["DockerExecutor"]


class DockerExecutor(Executor):
    """The workload image on this host's Docker engine, results on a bind mount.

    The launch (name, labels with the run's expiry, user, mounts, limits) comes from
    :func:`dlbench.execution.container.workload_launch`, the same builder the SSH executor uses.
    """

    def __init__(self, image: str | None = None, client: Any = None, user: str | None = None,
                 grace: float = DEFAULT_GRACE_S) -> None:
        self.image = image
        self.client = client
        # The controller's uid:gid by default: it owns the job's directories here, so the
        # bind-mounted results are never root-owned on a user's machine (and the workload is known
        # to run without root in the image).
        self.user = user or f"{os.getuid()}:{os.getgid()}"
        self.grace = grace
        """Seconds ``docker stop`` waits between SIGTERM and SIGKILL when the job is stopped."""

    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float, *,
                stop: threading.Event | None = None) -> ResultDocument:
        import docker  # optional: the docker SDK (its errors), loaded only when a container runs

        client = self.client or engine_client()
        if self.image and isinstance(target.access, LocalDocker) and target.access.image != self.image:
            target = target.model_copy(update={"access": target.access.model_copy(update={"image": self.image})})
        with tempfile.TemporaryDirectory(prefix="dlbench-docker-") as tmp:
            os.chmod(tmp, 0o777)  # an explicitly chosen user (not ours) must be able to write its document
            data_dir = str(Path(target.data_dir).resolve()) if target.data_dir else None
            launch = workload_launch(job, target, tmp, data_dir, self.user).holding(ensure_local_busy(), timeout,
                                                                                    self.grace)
            _remove_leftover(client, job)
            launched = time.monotonic()
            container = None
            output, error = "", ""
            ended: float | None = None
            watch = StopWatch()

            def stop_action(_: StopWatch) -> None:
                # The engine does SIGTERM, the grace and SIGKILL itself; container.wait() below
                # then returns with the exit status.
                assert container is not None
                container.stop(timeout=max(0, round(self.grace)))

            try:
                container = client.containers.run(**launch.sdk_kwargs())
                try:
                    with on_stop(stop, stop_action, name=f"stop-{launch.name}") as watch:
                        status = container.wait(timeout=timeout)
                    ended = _exit_moment(container, launched, time.monotonic())
                    if status.get("StatusCode", 1) != 0:
                        error = f"workload container exited with status {status.get('StatusCode')}"
                except (ReadTimeout, RequestsConnectionError):
                    container.kill()
                    ended = time.monotonic()
                    error = timed_out(timeout, "container killed")
                output = container.logs(stdout=True, stderr=True).decode(errors="replace")
            except docker.errors.DockerException as exc:
                error = f"docker could not run the workload: {exc}"
            finally:
                if container is not None:
                    _remove_container(client, container)
            doc, why = read_document(Path(tmp) / "result.json")
            if error and output:
                error = f"{error}: {output.strip().splitlines()[-1][:400]}"
            return finish(job, doc, archive_path, launched, error=error or (why if doc is None else ""), output=output,
                          stopped=watch, ended=ended, labels={workload_env.LABEL: f"image {launch.image}"})


def _exit_moment(container: Any, launched: float, waited: float) -> float:
    """When the container's process exited, on this process's monotonic clock.

    ``waited`` (when ``container.wait()`` returned) is late by the engine's own bookkeeping and the
    HTTP answer (tens of ms on a busy machine). The engine's ``State.FinishedAt`` is when it saw the
    exit, on the engine's realtime clock, which is this host's when the engine is local: converted
    through this host's realtime clock. Used only when it falls between the launch and ``waited``
    (an engine elsewhere, with another clock, is caught there); otherwise ``waited``. Why it
    matters: everything after the exit (logs, removal) is teardown, not the workload's time.
    """
    try:
        container.reload()
        finished = _engine_time(container.attrs["State"]["FinishedAt"])
    except Exception:  # noqa: BLE001 - the wait's return is the fallback, never a failure
        return waited
    ended = time.monotonic() - (time.time() - finished)
    return ended if launched <= ended <= waited else waited


def _engine_time(text: str) -> float:
    """Docker's RFC 3339 UTC time with nanoseconds (``2026-11-23T01:39:21.123456789Z``) as epoch
    seconds; ``datetime`` alone keeps only microseconds and rejects nine digits."""
    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}+00:00").timestamp() + float(f"0.{frac or '0'}")


def _remove_container(client: Any, container: Any, wait: float = 60.0) -> None:
    """Remove the job's container. Someone else may be removing it at the same moment (a group's
    teardown sweeping the run while a role ends): the engine then answers 409 "removal already
    in progress", which is not a failure of the job; wait until it is gone."""
    import docker  # optional: the docker SDK (its errors), loaded only when a container runs

    try:
        container.remove(force=True)
        return
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise

    def gone() -> bool:
        try:
            client.containers.get(container.id)
        except docker.errors.NotFound:
            return True
        return False

    if not until(gone, Deadline(wait, f"removal of container {container.id}"), 0.2):
        container.remove(force=True)


def _remove_leftover(client: Any, job: Job) -> None:
    """A retry of a job whose worker died mid-run finds that attempt's container still holding the
    name: remove it (it is ours, same run and job, per its labels) instead of failing on a name
    conflict. A foreign container with that name is left alone, and the run then fails visibly."""
    import docker  # optional: the docker SDK (its errors), loaded only when a container runs

    try:
        stale = client.containers.get(container_name(job))
    except docker.errors.NotFound:
        return
    if stale.labels.get("dlbench.run_id") == job.run_id and stale.labels.get("dlbench.job_id") == job.job_id:
        stale.remove(force=True)
