"""The one result schema shared by every workload, executor and the warehouse loader.

A result document is what crosses the boundary between the benchmarked machine and the
controller, so it is versioned: ``schema_version`` is bumped on any incompatible change and
the loader refuses versions it does not know. TensorFlow training, micro-benchmarks and
provisioning timings all use the same shape: run metadata plus a flat list of samples, each
``metric, value, unit, labels`` (the PerfKit Benchmarker convention, which planners already
know how to pivot).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA_VERSION: Final = 1
SCHEMA_ID: Final = "dlbench.result"


class Platform(StrEnum):
    """Hosting option being compared (the four orchestration options of the core study)."""

    BARE_METAL = "bare_metal"
    VIRTUAL_MACHINE = "virtual_machine"
    CONTAINER_ON_BARE_METAL = "container_on_bare_metal"
    CONTAINER_ON_VM = "container_on_vm"

    @property
    def in_container(self) -> bool:
        return self in (Platform.CONTAINER_ON_BARE_METAL, Platform.CONTAINER_ON_VM)


class Status(StrEnum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


class Sample(BaseModel):
    """One measured value. ``labels`` carry what distinguishes samples of the same metric."""

    model_config = ConfigDict(extra="forbid")

    metric: str = Field(min_length=1)
    value: float
    unit: str
    labels: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @field_validator("value")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("sample value must be a finite number")
        return value


class Benchmark(BaseModel):
    """What was run: ``suite`` (tf_cnn, cpu, disk...), ``name`` and every parameter that matters."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    name: str
    parameters: dict[str, Any] = Field(default_factory=dict)


class ContainerInfo(BaseModel):
    inside: bool = False
    runtime: str | None = None
    cgroup_version: int | None = None
    cpu_limit_cores: float | None = None
    memory_limit_bytes: int | None = None


class GpuInfo(BaseModel):
    index: int
    name: str
    memory_bytes: int | None = None
    driver: str | None = None
    pci_bus_id: str | None = None
    numa_node: int | None = None


class Environment(BaseModel):
    """Where it ran: the facts needed to compare like with like across platforms."""

    hostname: str
    platform: Platform | None = None
    kernel: str | None = None
    os: str | None = None
    python: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    memory_bytes: int | None = None
    cpu_affinity: list[int] = Field(default_factory=list)
    numa_nodes: list[int] = Field(default_factory=list)
    gpus: list[GpuInfo] = Field(default_factory=list)
    container: ContainerInfo = Field(default_factory=ContainerInfo)
    versions: dict[str, str] = Field(default_factory=dict)


class RequestRecord(BaseModel):
    """One request a load generator sent (the ``serving`` suite): what a percentile is computed
    from, kept in the document and so in the archive; the warehouse stores the percentiles."""

    model_config = ConfigDict(extra="forbid")

    load: str
    """Which sweep: ``concurrency`` or ``poisson``."""
    level: float
    """Its point: requests in flight, or requests per second."""
    request: int
    input_tokens: int
    output_tokens: int
    ttft_s: float
    e2e_s: float
    tpot_s: float | None = None
    itl_s: list[float] = Field(default_factory=list)
    start_s: float
    error: str | None = None
    server: int | None = None
    """Which of the servers sharing the machine answered it (tenants: 0, 1, ...); None for one server."""


class ResultDocument(BaseModel):
    """One execution of one benchmark on one target: the unit the warehouse loads."""

    model_config = ConfigDict(extra="forbid")

    schema_id: Literal["dlbench.result"] = SCHEMA_ID
    schema_version: Literal[1] = SCHEMA_VERSION
    job_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    run_id: str = "adhoc"
    repetition: int = 0
    benchmark: Benchmark
    environment: Environment
    status: Status = Status.OK
    error: str | None = None
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    samples: list[Sample] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    requests: list[RequestRecord] = Field(default_factory=list)
    """Per-request records of a load generator (empty, and left out of the file, for every other suite)."""

    def add(self, metric: str, value: float, unit: str, **labels: str | int | float | bool) -> Sample:
        sample = Sample(metric=metric, value=value, unit=unit, labels=labels)
        self.samples.append(sample)
        return sample

    def sample(self, metric: str, **labels: Any) -> Sample:
        """The one sample named ``metric`` whose labels include ``labels`` (KeyError if none)."""
        for candidate in self.samples:
            if candidate.metric == metric and all(candidate.labels.get(k) == v for k, v in labels.items()):
                return candidate
        raise KeyError(f"no sample {metric!r} with labels {labels!r}")

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically, so a reader never sees half a document (the file is the hand-off)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            handle.write(self.model_dump_json(indent=2, exclude=None if self.requests else {"requests"}))
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ResultDocument:
        return cls.parse(Path(path).read_text())

    @classmethod
    def parse(cls, text: str) -> ResultDocument:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("schema_id") != SCHEMA_ID:
            raise ValueError(f"not a {SCHEMA_ID} document")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"unsupported {SCHEMA_ID} schema_version {version!r}; this build reads {SCHEMA_VERSION}"
            )
        return cls.model_validate(data)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a result document, for consumers outside Python."""
    schema = ResultDocument.model_json_schema()
    schema["$id"] = f"https://dlbench.invalid/schemas/{SCHEMA_ID}/{SCHEMA_VERSION}.json"
    return schema
