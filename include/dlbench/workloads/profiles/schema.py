"""The profile schema: the one config model that validates every study's parameters.

A profile is data (the built-ins in ``profiles.yaml``, user profiles from a file or the Airflow
Variable, one shipped on a workload's command line); this module says what a valid one is, so a
typo fails at load time naming its field (``profiles.<name>.<field>``, :func:`field_errors`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, model_validator

from dlbench.workloads.profiles.enums import DistributedMode, DLToolModel, ModelName, Precision
from dlbench.workloads.profiles.fathom import FathomSpec
from dlbench.workloads.profiles.serving import ServingSpec
from dlbench.workloads.profiles.transformer import TransformerSpec


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
        ps = [("ps", i) for i in range(self.parameter_servers)] if mode.has_parameter_servers else []
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
    precision: Precision = Field(default=Precision.FP32, description="fp32 (the study's), tf32 (GPUs that have it) or "
                                 "bf16 mixed precision, for every framework")


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


DLTOOLS_TRAIN_EXAMPLES: dict[DLToolModel, int] = {
    DLToolModel.FCN5: 60000,  # MNIST training images
    DLToolModel.ALEXNET: 50000,  # CIFAR-10 training images
    DLToolModel.RESNET50: 50000,
    DLToolModel.LSTM: 929589,  # PTB ptb.train.txt words, one <eos> per line included
}
"""Training-set sizes: an epoch is one pass over them (PTB: tokens, batched as the PTB reader does)."""
LSTM_SEQUENCE_LENGTH = 32
"""Study 001: input texts pre-processed into sequences of length 32 (the LSTM's unrolled steps)."""


def batches_per_full_epoch(model: DLToolModel | str, batch_size: int, examples: int | None = None) -> int:
    """Batches of one pass over the training set. Images: ceil(examples / batch) full batches (the
    last one wraps into the next pass, as the tools' readers do); PTB: the reader's
    ``(examples // batch - 1) // sequence_length`` windows."""
    model = DLToolModel(model)
    examples = DLTOOLS_TRAIN_EXAMPLES[model] if examples is None else examples
    if model is DLToolModel.LSTM:
        return max(1, (examples // batch_size - 1) // LSTM_SEQUENCE_LENGTH)
    return max(1, -(-examples // batch_size))


class DLToolSpec(BaseModel):
    """One network of study 001's DL-tool set: Table VII's batch sizes and its optimizer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_sizes: list[PositiveInt] = Field(min_length=1, description="one job per batch size (Table VII)")
    learning_rate: float = Field(gt=0)
    momentum: float = Field(default=0.0, ge=0, lt=1)


class DLToolsSpec(BaseModel):
    """Study 001's DL-tool training (Table VII): seconds per batch, first epoch vs second epoch.

    The defaults are the paper's, so a user profile written before this suite existed still validates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    epochs: int = Field(default=2, ge=2, le=1000, description="epoch 1 (first-pass overheads) vs the later ones")
    batches_per_epoch: PositiveInt | None = Field(
        default=None, description="null: a full pass over the training set (the paper); a number: a shorter epoch"
    )
    repetitions: PositiveInt = Field(default=20, description="study 001: every result is the average of 20 runs")
    fcn5: DLToolSpec = DLToolSpec(batch_sizes=[512, 1024, 2048], learning_rate=0.05, momentum=0.9)
    alexnet: DLToolSpec = DLToolSpec(batch_sizes=[256, 512, 1024], learning_rate=0.001, momentum=0.9)
    resnet50: DLToolSpec = DLToolSpec(batch_sizes=[16, 32, 64], learning_rate=0.01, momentum=0.9)
    lstm: DLToolSpec = DLToolSpec(batch_sizes=[128, 256, 512], learning_rate=0.1, momentum=0.0)

    def model(self, name: DLToolModel | str) -> DLToolSpec:
        return getattr(self, DLToolModel(name).value)

    def batches(self, model: DLToolModel | str, batch_size: int, examples: int | None = None) -> int:
        """Batches per epoch for ``model`` at ``batch_size`` (a full pass unless ``batches_per_epoch``)."""
        return self.batches_per_epoch or batches_per_full_epoch(model, batch_size, examples)


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    repetitions: int = Field(gt=0)
    equivalence_margin_pct: float = Field(
        default=3.0, gt=0, le=50, description="two platforms within this many per cent of each other (the whole "
        "95 % interval of their ratio) are equivalent; the report's verdicts read every interval against it")
    tf_cnn: dict[ModelName, TrainingSpec]
    micro: MicroSpec
    scenarios: ScenarioSpecs = Field(default_factory=ScenarioSpecs)
    dltools: DLToolsSpec = Field(default_factory=DLToolsSpec)
    fathom: FathomSpec = Field(default_factory=FathomSpec)
    transformer: TransformerSpec = Field(default_factory=TransformerSpec)
    serving: ServingSpec = Field(default_factory=ServingSpec)

    def repetitions_for(self, suite: str) -> int:
        """TF training repeats ``repetitions`` times; micro-benchmarks ``micro.repetitions`` (20 in study 001);
        the DL-tool set ``dltools.repetitions``, Fathom ``fathom.repetitions``, the transformer
        ``transformer.repetitions``, serving ``serving.repetitions``."""
        if suite == "tf_cnn":
            return self.repetitions
        if suite == "dltools":
            return self.dltools.repetitions
        if suite == "fathom":
            return self.fathom.repetitions
        if suite == "transformer":
            return self.transformer.repetitions
        if suite == "serving":
            return self.serving.repetitions
        return self.micro.suite_repetitions.get(suite, self.micro.repetitions)  # type: ignore[call-overload]  # any suite name: a str, not a MicroSuite

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


class ProfileError(ValueError):
    """A user profile that cannot be used; the message names ``profiles.<name>.<field>``."""


def field_errors(name: str, exc: ValidationError) -> str:
    """``profiles.<name>.<field>: message`` per error: the same wording for the file, the Variable
    and a profile shipped to a workload, so a user finds the line to fix."""
    lines = []
    for error in exc.errors():
        where = ".".join(["profiles", name, *(str(p) for p in error["loc"])])
        lines.append(f"{where}: {str(error['msg']).removeprefix('Value error, ')}")
    return "\n  ".join(lines)


LATER_TRAINING_FIELDS: dict[str, str] = {"precision": Precision.FP32.value}
"""TrainingSpec fields added after profiles were first recorded, with the value every older profile
meant (:func:`profile_digest` leaves them out at that value)."""


LATER_SECTIONS: tuple[str, ...] = ("fathom", "transformer", "serving")
"""Profile sections added after digests were first recorded, each read only by its own suite: a job
of another suite has the digest it always had; a job of that suite digests the section too."""


def profile_digest(profile: Profile, suite: str | None = None, *, whole: bool = False) -> str:
    """Short sha256 of what a profile makes a workload of ``suite`` do: every field but ``name``,
    ``description`` and ``equivalence_margin_pct`` (how the results are read, not what runs), and
    the :data:`LATER_SECTIONS` of other suites. Recorded in each result
    document, so results of a profile redefined under the same name are told apart in the warehouse
    (and two names with the same numbers match). ``whole``: every section, to tell two definitions
    of a profile apart whatever suite they are used for."""
    content = profile.model_dump(mode="json", exclude={"name", "description", "equivalence_margin_pct"})
    for spec in content["tf_cnn"].values():
        # A field added later, at the value that means what profiles did before it existed, is
        # left out: the digest of every profile written before it stays what it was.
        for field, before in LATER_TRAINING_FIELDS.items():
            if spec.get(field) == before:
                del spec[field]
    for section in LATER_SECTIONS:
        if not whole and section != suite:
            del content[section]
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
