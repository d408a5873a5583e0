"""The embedded ``local`` provider: this host as bare metal, its Docker engine for containers.

No cloud is needed and nothing is provisioned. ``bare_metal`` jobs run as processes on this
host; ``container_on_bare_metal`` jobs run in the workload image on the local Docker engine.
When no engine is reachable the container target is still returned, with its skip reason, so
its jobs are recorded as skipped (run log, warehouse, report) instead of silently missing.
"""

from __future__ import annotations

from dlbench.config import BenchmarkRequest
from dlbench.execution.image import DEFAULT_TAG as WORKLOAD_IMAGE
from dlbench.execution.targets import LocalDocker, LocalProcess, Target
from dlbench.pipeline.datasets import ensure_dataset
from dlbench.pipeline.providers import ProviderBackend
from dlbench.provisioning.base import Tags
from dlbench.workloads.result import Platform


class LocalBackend(ProviderBackend):
    def preflight(self, request: BenchmarkRequest) -> None:
        """Nothing to check beyond the request model (it refuses platforms this host cannot offer)."""

    def acquire(self, request: BenchmarkRequest, tags: Tags, budget_s: float | None = None) -> list[Target]:
        data_dir = ensure_dataset(request)
        targets: list[Target] = []
        for platform in request.platforms:
            if platform is Platform.BARE_METAL:
                targets.append(Target(name="localhost", platform=platform, access=LocalProcess(), data_dir=data_dir,
                                      expires_at=tags.expires_at, labels={"provider": "local"}))
            elif platform is Platform.CONTAINER_ON_BARE_METAL:
                targets.append(self._container_target(tags, data_dir))
        return targets

    @staticmethod
    def _container_target(tags: Tags, data_dir: str | None) -> Target:
        from dlbench.execution.image import docker_available, ensure_image

        image, skip = WORKLOAD_IMAGE, None
        ok, reason = docker_available()
        if not ok:
            skip = f"container platform skipped: {reason}"
        else:
            try:
                image = ensure_image(WORKLOAD_IMAGE)
            except Exception as exc:  # noqa: BLE001 - reported as a visible skip, never hidden
                skip = f"container platform skipped: workload image unavailable: {exc}"
        return Target(name="local-docker", platform=Platform.CONTAINER_ON_BARE_METAL, access=LocalDocker(image=image),
                      data_dir=data_dir, skip_reason=skip, expires_at=tags.expires_at, labels={"provider": "local"})

    def release(self, request: BenchmarkRequest, tags: Tags, targets: list[Target]) -> None:
        from dlbench.execution.image import docker_available

        if docker_available()[0]:
            from dlbench.execution.docker import remove_run_containers

            remove_run_containers(tags.run_id)
