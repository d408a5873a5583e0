"""Per-provider settings: one pydantic model per provider, one discriminated union in the request.

``name`` is the discriminator (``{"name": "ironic", "cloud": ...}``). :class:`MachineSettings`
holds what every provider that provisions machines shares (machines per platform, SSH, the
workload image, timeouts, expiry), so a new provider's model adds only its own fields. Models
hold no secrets: only cloud names, connection ids and paths. Checked here without calling any
cloud; the cloud itself is checked by the driver's ``preflight`` before anything is provisioned.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dlbench.grammar import AbsolutePath, GpuRequest, ImageReference, Name, UserName
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

    def instances_for(self, platform: Platform) -> int | None:
        """Separate instances a platform gets, or None when every job shares one machine by design
        (the embedded provider: this host). A distributed job needs one instance per role."""
        return None


class LocalSettings(ProviderSettings):
    """The embedded provider: this host as bare metal, its Docker engine for containers, and QEMU
    guests on this host for the VM platforms (opt-in: the default request has none)."""

    name: Literal["local"] = "local"
    platforms: ClassVar[dict[Platform, Runtime]] = {
        Platform.BARE_METAL: "host", Platform.CONTAINER_ON_BARE_METAL: "docker",
        Platform.VIRTUAL_MACHINE: "host", Platform.CONTAINER_ON_VM: "docker"}
    vm: LocalVMSettings = Field(default_factory=lambda: LocalVMSettings(),
                                description="the local VMs (virtual_machine, container_on_vm): QEMU guests")

    def instances_for(self, platform: Platform) -> int | None:
        """This host is shared by design; the VM platforms get their guests (``vm.nodes``)."""
        return self.vm.instances_for(platform) if platform in LocalVMSettings.platforms else None


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


Accel = Literal["auto", "kvm", "tcg"]
DEFAULT_VM_IMAGE_DIR = Path(__file__).resolve().parents[3] / "build" / "vm-image"
"""Where ``make vm-image`` writes the VM image in a checkout (docs/vm-image.md)."""


class LocalVMSettings(MachineSettings):
    """The local provider's guests: one QEMU VM per machine, on this host.

    VM rows are opt-in: ``make run``'s default platforms do not include them (emulated guests are
    10-70x slower than this host). ``container_on_vm`` shares the ``virtual_machine`` guest when
    both are requested (one boot)."""

    name: Literal["local-vm"] = "local-vm"
    platforms: ClassVar[dict[Platform, Runtime]] = {
        Platform.VIRTUAL_MACHINE: "host", Platform.CONTAINER_ON_VM: "docker"}
    enabled: bool = Field(default=True, description="false: the VM platforms are reported skipped, nothing boots")
    share_nodes: bool = Field(default=True, description="container_on_vm on the virtual_machine guest")
    image_dir: AbsolutePath | None = Field(
        default=None, description="the VM image's directory (manifest.json, qcow2, kernel, initrd); "
                                  "default: build/vm-image of this checkout")
    vcpus: int = Field(default=2, ge=1, le=256)
    memory_mb: int = Field(default=4096, ge=512, le=1024 * 1024)
    accel: Accel = Field(default="auto", description="auto: KVM where it really works, else TCG (emulated)")
    ready_timeout: float = Field(default=600, gt=0, le=6 * 3600, description="s until every guest answers SSH")
    ssh_timeout: float = Field(default=300, gt=0, le=3600)
    lease_minutes: float = Field(default=15, ge=0.05, le=24 * 60)

    def image_path(self) -> Path:
        return Path(self.image_dir) if self.image_dir else DEFAULT_VM_IMAGE_DIR


class OpenStackSettings(MachineSettings):
    """Machines from an OpenStack cloud: a clouds.yaml cloud or an Airflow connection."""

    cloud: Name | None = Field(default=None, description="clouds.yaml cloud name")
    conn_id: Name | None = Field(default=None, description="Airflow connection (conn_type openstack); wins over cloud")
    clouds_file: AbsolutePath | None = Field(default=None, description="clouds.yaml path (default: standard places)")
    api_retry_seconds: float = Field(default=120, gt=0, le=3600,
                                     description="s to retry an API call that fails transiently (5xx, refused)")

    @model_validator(mode="after")
    def _cloud_named(self) -> OpenStackSettings:
        if not self.cloud and not self.conn_id:
            raise ValueError("set cloud (a clouds.yaml cloud name) or conn_id (an Airflow connection id)")
        return self

    def connect(self) -> object:
        """An openstacksdk Connection (raises CloudConfigError for an unknown cloud or missing
        credentials, before any API call)."""
        from dlbench.hooks.openstack import resolve

        spec = resolve(None if self.conn_id else self.cloud, conn_id=self.conn_id, config_file=self.clouds_file)
        return spec.connect()


LocalSettings.model_rebuild()  # its vm field names LocalVMSettings, defined after it
