"""The embedded ``local`` provider: this host as bare metal, its Docker engine for containers.

No cloud is needed. ``bare_metal`` jobs run as processes on this host; ``container_on_bare_metal``
jobs run in the workload image on the local Docker engine. When no engine is reachable the
container target is still returned, marked with the reason, so its jobs are recorded as
skipped (visible in the run log, the warehouse and the report) instead of silently missing.
"""

from __future__ import annotations

from pathlib import Path

from dlbench.config import BenchmarkRequest
from dlbench.execution.base import SKIP_REASON, Executor, Target
from dlbench.execution.image import DEFAULT_TAG as WORKLOAD_IMAGE
from dlbench.execution.local import LocalProcessExecutor
from dlbench.pipeline.providers import ProviderBackend, register
from dlbench.provisioning.base import Tags
from dlbench.workloads.result import Platform


@register
class LocalBackend(ProviderBackend):
    name = "local"

    def acquire(self, request: BenchmarkRequest, tags: Tags, workdir: Path) -> list[Target]:
        targets: list[Target] = []
        for platform in request.platforms:
            if platform is Platform.BARE_METAL:
                targets.append(Target(name="localhost", platform=platform.value, runtime="host"))
            elif platform is Platform.CONTAINER_ON_BARE_METAL:
                targets.append(self._container_target(tags))
            else:
                raise ValueError(
                    f"platforms: {platform.value!r} needs a cloud; the local provider offers "
                    f"{Platform.BARE_METAL.value}, {Platform.CONTAINER_ON_BARE_METAL.value}"
                )
        return targets

    def _container_target(self, tags: Tags) -> Target:
        from dlbench.execution.image import docker_available, ensure_image

        ok, reason = docker_available()
        extra = {"image": WORKLOAD_IMAGE, "run_id": tags.run_id}
        if not ok:
            extra[SKIP_REASON] = f"container platform skipped: {reason}"
        else:
            try:
                extra["image"] = ensure_image(WORKLOAD_IMAGE)
            except Exception as exc:  # noqa: BLE001 - reported as a visible skip, never hidden
                extra[SKIP_REASON] = f"container platform skipped: workload image unavailable: {exc}"
        return Target(name="local-docker", platform=Platform.CONTAINER_ON_BARE_METAL.value, runtime="docker",
                      extra=extra)

    def release(self, targets: list[Target], tags: Tags, workdir: Path) -> None:
        from dlbench.execution.image import docker_available

        if docker_available()[0]:
            from dlbench.execution.docker import remove_run_containers

            remove_run_containers(tags.run_id)

    def executor_for(self, target: Target) -> Executor:
        if target.runtime == "docker":
            from dlbench.execution.docker import DockerExecutor

            return DockerExecutor(image=target.extra.get("image", WORKLOAD_IMAGE))
        return LocalProcessExecutor()
