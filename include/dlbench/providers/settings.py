"""Per-provider settings: one pydantic model per provider, one discriminated union in the request.

``name`` is the discriminator (``{"name": "ironic", "cloud": ...}``). :class:`MachineSettings`
holds what every provider that provisions machines shares (machines per platform, SSH, the
workload image, timeouts, expiry), so a new provider's model adds only its own fields. Models
hold no secrets: only cloud names, connection ids and paths. Checked here without calling any
cloud; the cloud itself is checked by the driver's ``preflight`` before anything is provisioned.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dlbench.grammar import AbsolutePath, GpuRequest, ImageReference, UserName
from dlbench.workloads.result import Platform

Runtime = Literal["host", "docker"]
DEFAULT_WORKLOAD_IMAGE = "dlbench-workload:latest"


class ProviderSettings(BaseModel):
    """Common to every provider."""

    model_config = ConfigDict(extra="forbid")

    name: str
    expiry_hours: float | None = Field(
        default=None, gt=0, le=24 * 14,
        description="hours before the janitor may release the run's resources (default: Variable dlbench_expiry_hours)")
    gpus: GpuRequest = Field(
        default="auto", description="GPUs per machine: auto (every GPU it has), none (CPU only), all (every GPU; a "
                                    "machine without one is skipped), or a count N (the first N): docs/gpus.md")

    platforms: ClassVar[dict[Platform, Runtime]] = {}
    """The platforms this provider hosts and the runtime each uses by default."""

    def location(self) -> str:
        """Which cloud or cluster these settings name, for logs and the janitor's report."""
        return ""

    def instances_for(self, platform: Platform) -> int | None:
        """Separate instances a platform gets, or None when every job shares one machine by design
        (the embedded provider: this host). A distributed job needs one instance per role."""
        return None


class MachineSettings(ProviderSettings):
    """Shared by every provider whose machines are provisioned and reached over SSH."""

    nodes: dict[Platform, int] = Field(default_factory=dict, description="machines per platform (default 1 each)")
    share_nodes: bool = Field(default=False, description="container platforms on the host platform's machines")
    runtime: dict[Platform, Runtime] = Field(default_factory=dict, description="runtime per platform")
    ssh_user: UserName = "root"
    ssh_key_path: AbsolutePath | None = Field(
        default=None, description="an existing private key (its .pub next to it); default: a fresh key per run")
    remote_python: AbsolutePath | None = Field(
        default=None, description="python on the machines (default: detected by the prepare stage)")
    docker_image: ImageReference = DEFAULT_WORKLOAD_IMAGE
    prepare: bool = Field(default=True, description="make stock machines ready (workload package, image, data)")
    poll_interval: float = Field(default=1.0, gt=0, le=60)
    ready_timeout: float = Field(default=1800, gt=0, le=6 * 3600, description="s until every machine is ready")
    ssh_timeout: float = Field(default=300, gt=0, le=3600, description="s until a ready machine answers SSH")
    prepare_timeout: float = Field(default=1800, gt=0, le=6 * 3600)
    release_timeout: float = Field(default=1800, gt=0, le=6 * 3600, description="s per release of the run")
    lease_minutes: float = Field(
        default=15, ge=0.05, le=24 * 60,
        description="a dead run's resources are released this long after its last live task stopped renewing")

    @model_validator(mode="after")
    def _known_platforms(self) -> MachineSettings:
        allowed = [p.value for p in self.platforms]
        for key in [*self.nodes, *self.runtime]:
            if key not in self.platforms:
                raise ValueError(f"platform {key.value!r} in nodes/runtime is not offered by provider {self.name} "
                                 f"(allowed: {', '.join(allowed)})")
        for platform, count in self.nodes.items():
            if not 1 <= count <= 1000:
                raise ValueError(f"nodes.{platform.value}: {count} is out of range (1..1000)")
        return self

    def node_count(self, platform: Platform) -> int:
        return self.nodes.get(platform, 1)

    def instances_for(self, platform: Platform) -> int | None:
        host = self.host_platform_of(platform)
        return self.node_count(host if self.share_nodes and host is not None else platform)

    def runtime_for(self, platform: Platform) -> Runtime:
        return self.runtime.get(platform, self.platforms[platform])

    @staticmethod
    def host_platform_of(platform: Platform) -> Platform | None:
        """The platform whose machines a container platform can share (``share_nodes``)."""
        return {Platform.CONTAINER_ON_BARE_METAL: Platform.BARE_METAL,
                Platform.CONTAINER_ON_VM: Platform.VIRTUAL_MACHINE}.get(platform)
