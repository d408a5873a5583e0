"""Benchmark profiles: the parameters of every study, as validated data.

The numbers live in ``profiles.yaml`` beside this module; this module is the one config
model that validates them, so a typo in a profile fails at load time with the field's name.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

PROFILES_FILE = Path(__file__).with_name("profiles.yaml")


class ModelName(StrEnum):
    """Image-classification models of the core study (names as in tf_cnn_benchmarks)."""

    INCEPTION3 = "inception3"
    RESNET50 = "resnet50"
    ALEXNET = "alexnet"


class DataKind(StrEnum):
    SYNTHETIC = "synthetic"
    REAL = "real"


class Scenario(StrEnum):
    """The core study's three scenarios (004 section 3.3): one instance; one job across instances
    (1 parameter server + 2 workers); a job next to a background job on the same machine."""

    SINGLE = "single"
    DISTRIBUTED = "distributed"
    SHARED = "shared"


class DistributedMode(StrEnum):
    """How the roles of a distributed job synchronise. ``distributed_replicated`` is the study's
    (TF1 tf_cnn_benchmarks, synchronous through the parameter server); ``multi_worker_mirrored``
    is TF 2's synchronous all-reduce between workers (no parameter server): a different experiment,
    labelled as such."""

    DISTRIBUTED_REPLICATED = "distributed_replicated"
    MULTI_WORKER_MIRRORED = "multi_worker_mirrored"


class DistributedSpec(BaseModel):
    """Table 1's distributed column: 3 instances, 1 parameter server + 2 workers, variables on the
    workers' devices, synchronous replicated updates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    parameter_servers: int = Field(default=1, ge=1, le=8)
    workers: int = Field(default=2, ge=1, le=64)
    mode: DistributedMode = DistributedMode.DISTRIBUTED_REPLICATED
    port: int = Field(default=22222, ge=1024, le=65000,
                      description="the port every role listens on (open it in the cloud's security rules)")

    def roles(self, mode: DistributedMode | None = None) -> list[tuple[str, int]]:
        """(role, task index) of every process; the all-reduce mode has no parameter server."""
        mode = mode or self.mode
        ps = [] if mode is DistributedMode.MULTI_WORKER_MIRRORED else [("ps", i) for i in range(self.parameter_servers)]
        return ps + [("worker", i) for i in range(self.workers)]


class SharedSpec(BaseModel):
    """The shared-resource scenario: the foreground job alone, then with a background job on the same
    machine (AlexNet batch 512 in the study, looped so it outlasts the foreground), plus AlexNet
    batch 32 as the small-batch control; and N co-located tenants (study 002)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    background_model: ModelName = ModelName.ALEXNET
    background_batch_size: int = Field(default=512, gt=0)
    control_model: ModelName = ModelName.ALEXNET
    control_batch_size: int = Field(default=32, gt=0)
    tenants: list[PositiveInt] = Field(default_factory=lambda: [2, 4])
    lead_seconds: float = Field(default=60, ge=0, le=3600,
                                description="the background starts this long before the foreground (set-up, warm-up)")


class ScenarioSpecs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    distributed: DistributedSpec = Field(default_factory=DistributedSpec)
    shared: SharedSpec = Field(default_factory=SharedSpec)


class TrainingSpec(BaseModel):
    """How one model trains in one profile (Table 1 of the core study for ``paper``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_size_per_device: int = Field(gt=0)
    image_size: int = Field(gt=0)
    num_classes: int = Field(gt=1)
    warmup_steps: int = Field(ge=0)
    measured_steps: int = Field(gt=0)
    data_format: Literal["NHWC"] = "NHWC"
    optimizer: Literal["sgd"] = "sgd"
    learning_rate: float = Field(gt=0)
    variable_update: Literal["parameter_server", "mirrored"] = "parameter_server"
    local_parameter_device: Literal["cpu", "gpu"] = "cpu"


class CpuSpec(BaseModel):
    """HPL (via hpcc) problem sizes, capped by memory; HPCG dimension and duration (study 001)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hpl_sizes: list[int] = Field(min_length=1)
    hpl_block: int = Field(gt=0)
    hpl_memory_fraction: float = Field(gt=0, le=0.9)
    hpcg_dimension: int = Field(ge=16)
    hpcg_seconds: float = Field(gt=0)


class DiskSpec(BaseModel):
    """dd sequential writes, ioping latency/random reads, fio (study 001 + the modern standard)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dd_block: str = "64k"
    dd_counts: list[int] = Field(min_length=1)
    ioping_count: int = Field(gt=1)
    ioping_seconds: int = Field(gt=0)
    fio_size_mb: int = Field(gt=0)
    fio_runtime_s: int = Field(gt=0)


class NetworkSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seconds: int = Field(gt=0)
    latency_samples: int = Field(gt=0)


class GpuSpec(BaseModel):
    """Sizes of the CUDA programs (study 001); scaled down to the device's memory at run time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bandwidth_mb: int = Field(gt=0)
    conv_size: int = Field(gt=0)
    gemm: tuple[int, int, int] = Field(description="(m, k, n): A is m x k, B is k x n")
    histogram_values: int = Field(gt=0)
    transpose_size: int = Field(gt=0)
    iterations: int = Field(gt=0)


class DeepBenchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    shapes: Literal["paper", "smoke"]
    iterations: int = Field(gt=0)


MicroSuite = Literal["cpu", "gpu", "deepbench", "disk", "network"]


class MicroSpec(BaseModel):
    """The micro-benchmark suites' parameters; ``repetitions`` for all of them unless a suite has its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repetitions: int = Field(gt=0)
    suite_repetitions: dict[MicroSuite, PositiveInt] = Field(
        default_factory=dict, description="per-suite repetitions overriding `repetitions` (e.g. a long HPCG)")
    cpu: CpuSpec
    disk: DiskSpec
    network: NetworkSpec
    gpu: GpuSpec
    deepbench: DeepBenchSpec


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    repetitions: int = Field(gt=0)
    tf_cnn: dict[ModelName, TrainingSpec]
    micro: MicroSpec
    scenarios: ScenarioSpecs = Field(default_factory=ScenarioSpecs)

    def repetitions_for(self, suite: str) -> int:
        """TF training repeats ``repetitions`` times; micro-benchmarks ``micro.repetitions`` (20 in study 001)."""
        if suite == "tf_cnn":
            return self.repetitions
        return self.micro.suite_repetitions.get(suite, self.micro.repetitions)  # type: ignore[call-overload]

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("tf_cnn"), dict):
            tf_cnn = dict(data["tf_cnn"])
            defaults = tf_cnn.pop("defaults", {}) or {}
            data = {**data, "tf_cnn": {k: {**defaults, **v} for k, v in tf_cnn.items()}}
        return data

    @model_validator(mode="after")
    def _every_model(self) -> Profile:
        missing = set(ModelName) - set(self.tf_cnn)
        if missing:
            raise ValueError(f"profile {self.name!r} lacks tf_cnn specs for {sorted(m.value for m in missing)}")
        return self

    def training(self, model: ModelName | str) -> TrainingSpec:
        return self.tf_cnn[ModelName(model)]


@cache
def load_profiles(path: Path = PROFILES_FILE) -> dict[str, Profile]:
    raw = yaml.safe_load(path.read_text())
    return {name: Profile.model_validate({"name": name, **body}) for name, body in raw.items()}


def profile_names() -> list[str]:
    return list(load_profiles())


def get_profile(name: str) -> Profile:
    profiles = load_profiles()
    if name not in profiles:
        raise ValueError(f"unknown profile {name!r}; allowed: {', '.join(profiles)}")
    return profiles[name]
