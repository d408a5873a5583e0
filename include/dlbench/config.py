"""The one config model of a benchmark run: what the Airflow trigger form and the CLI fill in.

Validation happens here, before anything is provisioned: a bad value fails with the field's
name and the allowed values. :func:`plan_jobs` expands a validated request into the job matrix
that the DAG maps over.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dlbench.grammar import (
    AbsolutePath,
    Checksum,
    Host,
    ImageReference,
    ImageSource,
    Name,
    ResourceClass,
    Trait,
    UserName,
)
from dlbench.workloads.profiles import DataKind, ModelName, get_profile, profile_names
from dlbench.workloads.result import Platform


class Provider(StrEnum):
    """Who supplies the targets: this host (no cloud) or an OpenStack cloud."""

    LOCAL = "local"
    IRONIC = "ironic"


class Suite(StrEnum):
    """Benchmark suites: ``tf_cnn`` is the core study's training benchmark; the others are the
    micro-benchmarks that explain it (study 001's CPU/GPU/disk, study 003's DeepBench kernels)."""

    TF_CNN = "tf_cnn"
    CPU = "cpu"
    GPU = "gpu"
    DEEPBENCH = "deepbench"
    DISK = "disk"
    NETWORK = "network"


SUITE_COMMANDS: dict[str, str] = {
    Suite.TF_CNN.value: "tf-cnn", Suite.CPU.value: "cpu", Suite.GPU.value: "gpu",
    Suite.DEEPBENCH.value: "deepbench", Suite.DISK.value: "disk", Suite.NETWORK.value: "network",
}
"""Suite -> the workload CLI subcommand that runs it."""


class ConfigError(ValueError):
    """A request that cannot run, with a message naming the field and the allowed values."""


class IronicSettings(BaseModel):
    """Where and how bare-metal nodes come from when ``provider`` is ``ironic``.

    Checked here without calling the cloud (timeouts, address source); the cloud itself (known
    cloud, credentials, nodes in the resource class) is checked by the Ironic backend's preflight
    before anything is provisioned. Holds no secrets: only a cloud name or a connection id.
    """

    model_config = ConfigDict(extra="forbid")

    cloud: Name | None = Field(default="devcloud", description="clouds.yaml cloud name")
    conn_id: Name | None = Field(default=None, description="Airflow connection (conn_type openstack); wins over cloud")
    clouds_file: AbsolutePath | None = Field(default=None, description="clouds.yaml path (default: standard places)")
    resource_class: ResourceClass = "dlbench-bm"
    traits: list[Trait] = Field(default_factory=list)
    nodes: dict[str, int] = Field(default_factory=dict, description="nodes per platform (default 1 each)")
    share_nodes: bool = Field(default=False, description="container_on_bare_metal on the bare_metal nodes")
    runtime: dict[str, Literal["host", "docker"]] = Field(default_factory=dict, description="runtime per platform")
    image_source: ImageSource = "dlbench-bare-metal-image"
    image_checksum: Checksum | None = None
    root_gb: int = Field(default=10, ge=1)
    ssh_user: UserName = "root"
    ssh_key_path: AbsolutePath | None = None
    remote_python: AbsolutePath | None = Field(default=None, description="python on the nodes (default: this venv's)")
    docker_image: ImageReference = "dlbench-workload:latest"
    address_source: Literal["extra", "port", "inventory"] = "extra"
    address_extra_key: Name = "test_host_address"
    inventory: dict[Name, Host] = Field(default_factory=dict, description="node name or uuid -> address")
    poll_interval: float = Field(default=1.0, gt=0, le=60)
    allocate_timeout: float = Field(default=120, gt=0)
    deploy_timeout: float = Field(default=1800, gt=0)
    ssh_timeout: float = Field(default=300, gt=0)
    undeploy_timeout: float = Field(default=1800, gt=0)
    expiry_hours: float = Field(default=6, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> IronicSettings:
        if not self.cloud and not self.conn_id:
            raise ValueError("set cloud (a clouds.yaml name) or conn_id (an Airflow connection id)")
        allowed = [Platform.BARE_METAL.value, Platform.CONTAINER_ON_BARE_METAL.value]
        for key in [*self.nodes, *self.runtime]:
            if key not in allowed:
                raise ValueError(f"unknown platform {key!r} in nodes/runtime (allowed: {', '.join(allowed)})")
        if any(count < 1 for count in self.nodes.values()):
            raise ValueError("nodes: every count must be >= 1")
        if self.address_source == "inventory" and not self.inventory:
            raise ValueError("address_source inventory needs an inventory map (node name or uuid -> address)")
        return self

    def node_count(self, platform: str) -> int:
        return self.nodes.get(platform, 1)

    def runtime_for(self, platform: str) -> str:
        default = "docker" if platform == Platform.CONTAINER_ON_BARE_METAL.value else "host"
        return self.runtime.get(platform, default)


class BenchmarkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)

    provider: Provider = Provider.LOCAL
    platforms: list[Platform] = Field(
        default_factory=lambda: [Platform.BARE_METAL, Platform.CONTAINER_ON_BARE_METAL], min_length=1
    )
    suites: list[Suite] = Field(default_factory=lambda: list(Suite), min_length=1)
    models: list[ModelName] = Field(default_factory=lambda: list(ModelName), min_length=1)
    data: list[DataKind] = Field(default_factory=lambda: [DataKind.SYNTHETIC, DataKind.REAL], min_length=1)
    profile: str = "smoke"
    repetitions: int | None = Field(default=None, ge=1, le=100)
    data_dir: AbsolutePath | None = None
    ironic: IronicSettings | None = None

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str) -> str:
        get_profile(value)  # raises with the allowed names
        return value

    @field_validator("platforms", "suites", "models", "data")
    @classmethod
    def _unique(cls, value: list[Any]) -> list[Any]:
        return list(dict.fromkeys(value))

    @property
    def effective_repetitions(self) -> int:
        """Repetitions of the training cells (the request's, else the profile's)."""
        return self.repetitions_for(Suite.TF_CNN)

    def repetitions_for(self, suite: Suite) -> int:
        return self.repetitions or get_profile(self.profile).repetitions_for(suite.value)


def parse_request(params: dict[str, Any]) -> BenchmarkRequest:
    """Validate raw params (trigger form, CLI) into a request, or raise :class:`ConfigError`."""
    cleaned = {k: v for k, v in params.items() if v is not None and v != ""}
    try:
        return BenchmarkRequest.model_validate(cleaned)
    except ValidationError as exc:
        raise ConfigError(explain(exc)) from None


def explain(exc: ValidationError) -> str:
    """One line per bad field: ``field: message (allowed: a, b, c)``."""
    allowed = {
        "provider": [p.value for p in Provider],
        "platforms": [p.value for p in Platform],
        "suites": [s.value for s in Suite],
        "models": [m.value for m in ModelName],
        "data": [d.value for d in DataKind],
        "profile": profile_names(),
        "ironic.address_source": ["extra", "port", "inventory"],
    }
    lines = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else "request"
        where = ".".join(str(p) for p in error["loc"])
        key = field if field in allowed else ".".join(str(p) for p in error["loc"][:2])
        hint = f" (allowed: {', '.join(allowed[key])})" if key in allowed else ""
        lines.append(f"{where}: {error['msg']}{hint}")
    return "invalid benchmark request:\n  " + "\n  ".join(lines)


class Job(BaseModel):
    """One cell of the matrix: one workload execution on one platform."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    run_id: str
    platform: Platform
    suite: str
    command: str
    args: dict[str, str | int | float] = Field(default_factory=dict)
    profile: str
    repetition: int = 0

    @property
    def label(self) -> str:
        parts = [self.platform.value, self.suite, *(str(v) for v in self.args.values()), f"r{self.repetition}"]
        return "/".join(parts)

    def workload_argv(self, out: str, data_dir: str | None = None) -> list[str]:
        """Arguments after ``python -m dlbench.workloads`` for this job."""
        argv = [
            self.command, "--out", out, "--run-id", self.run_id, "--job-id", self.job_id,
            "--repetition", str(self.repetition), "--platform", self.platform.value, "--profile", self.profile,
        ]
        for key, value in self.args.items():
            argv += [f"--{key.replace('_', '-')}", str(value)]
        if data_dir and (self.args.get("data") == DataKind.REAL.value or self.suite == Suite.DISK.value):
            argv += ["--data-dir", data_dir]  # the disk suite tests the directory real data is read from
        return argv


def job_id_for(run_id: str, platform: str, suite: str, args: dict[str, Any], repetition: int) -> str:
    """Deterministic id: re-running a task for the same cell overwrites, never duplicates."""
    key = "|".join([run_id, platform, suite, repr(sorted(args.items())), str(repetition)])
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def suite_cells(request: BenchmarkRequest, suite: Suite) -> list[dict[str, Any]]:
    """The argument sets one suite runs for a request."""
    if suite is Suite.TF_CNN:
        return [{"model": m.value, "data": d.value} for m in request.models for d in request.data]
    return [{}]


def plan_jobs(request: BenchmarkRequest, run_id: str) -> list[Job]:
    """Expand a request into jobs. Repetitions are the outer loop, so a run cut short still has
    a complete first pass over the matrix rather than many repetitions of its first cell."""
    jobs = []
    for repetition in range(max(request.repetitions_for(suite) for suite in request.suites)):
        for platform in request.platforms:
            for suite in request.suites:
                if repetition >= request.repetitions_for(suite):
                    continue
                for args in suite_cells(request, suite):
                    jobs.append(Job(
                        job_id=job_id_for(run_id, platform.value, suite.value, args, repetition),
                        run_id=run_id, platform=platform, suite=suite.value, command=SUITE_COMMANDS[suite.value],
                        args=args, profile=request.profile, repetition=repetition,
                    ))
    return jobs
