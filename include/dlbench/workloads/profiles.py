"""Benchmark profiles: the parameters of every study, as validated data.

The built-in numbers live in ``profiles.yaml`` beside this module; this module is the one config
model that validates them, so a typo in a profile fails at load time with the field's name.

User profiles (docs/profiles.md) come from a YAML file named by ``DLBENCH_PROFILES_FILE`` and
from the Airflow Variable ``dlbench_profiles`` (the DAG reads it and hands the text to
:func:`register_user_profiles`: this module never imports Airflow, because workloads on remote
machines import it). A user profile may ``extends:`` another one and override a few fields.
Precedence: built-ins < the file < the Variable < a profile registered by a validated request.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
from collections.abc import Mapping
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, model_validator

PROFILES_FILE = Path(__file__).with_name("profiles.yaml")
PROFILES_FILE_ENV = "DLBENCH_PROFILES_FILE"
"""Environment variable naming a YAML file of user profiles (on the Airflow workers)."""
PROFILES_VARIABLE = "dlbench_profiles"
"""Airflow Variable holding user profiles (YAML or JSON, same shape as the file)."""

log = logging.getLogger(__name__)

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


class DLToolModel(StrEnum):
    """Study 001's deep-learning-tool networks (Table VII): FCN5 on MNIST, AlexNet and ResNet-50 on
    CIFAR-10, a 2-layer LSTM on PTB (architectures: docs/dltools.md)."""

    FCN5 = "fcn5"
    ALEXNET = "alexnet"
    RESNET50 = "resnet50"
    LSTM = "lstm"


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
    tf_cnn: dict[ModelName, TrainingSpec]
    micro: MicroSpec
    scenarios: ScenarioSpecs = Field(default_factory=ScenarioSpecs)
    dltools: DLToolsSpec = Field(default_factory=DLToolsSpec)

    def repetitions_for(self, suite: str) -> int:
        """TF training repeats ``repetitions`` times; micro-benchmarks ``micro.repetitions`` (20 in study 001);
        the DL-tool set ``dltools.repetitions``."""
        if suite == "tf_cnn":
            return self.repetitions
        if suite == "dltools":
            return self.dltools.repetitions
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


class ProfileError(ValueError):
    """A user profile that cannot be used; the message names ``profiles.<name>.<field>``."""


def _builtin_yaml(path: Path) -> dict[str, Any]:
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: profiles must be a mapping of name -> profile")
    return raw


@cache
def load_profiles(path: Path = PROFILES_FILE) -> dict[str, Profile]:
    """The built-in profiles of the installed package (the user's are in :func:`all_profiles`)."""
    return {name: Profile.model_validate({"name": name, **body}) for name, body in _builtin_yaml(path).items()}


def _field_errors(name: str, exc: ValidationError) -> str:
    """``profiles.<name>.<field>: message`` per error: the same wording for the file, the Variable
    and a profile shipped to a workload, so a user finds the line to fix."""
    lines = []
    for error in exc.errors():
        where = ".".join(["profiles", name, *(str(p) for p in error["loc"])])
        lines.append(f"{where}: {str(error['msg']).removeprefix('Value error, ')}")
    return "\n  ".join(lines)


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; lists and scalars replace (``hpl_sizes: [2000]`` is the whole list)."""
    out = dict(base)
    for key, value in override.items():
        out[key] = _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) \
            else value
    return out


def _extend(parent: Profile, child: Mapping[str, Any]) -> dict[str, Any]:
    """The child's fields over its parent's. ``tf_cnn.defaults`` in a child applies to every
    model of the parent (``defaults: {batch_size_per_device: 64}`` is batch 64 for all three),
    and the child's per-model entries apply over that."""
    base = parent.model_dump(mode="json", exclude={"name"})
    body = {k: v for k, v in child.items() if k != "tf_cnn"}
    merged = _merge(base, body)
    tf_child = child.get("tf_cnn")
    if isinstance(tf_child, Mapping):
        defaults = tf_child.get("defaults") or {}
        models = {**{m: {} for m in base["tf_cnn"]}, **{k: v for k, v in tf_child.items() if k != "defaults"}}
        merged["tf_cnn"] = {m: {**base["tf_cnn"].get(m, {}), **defaults, **(spec or {})} for m, spec in models.items()}
    elif tf_child is not None:
        merged["tf_cnn"] = tf_child  # not a mapping: let the model say so
    return merged


def resolve_profiles(raw: Any, below: Mapping[str, Profile], source: str) -> dict[str, Profile]:
    """Validate user profiles (name -> body) over the profiles ``below`` them.

    ``extends: NAME`` takes every field of NAME (a profile of the same source, else one below,
    e.g. a built-in) and the body overrides it; a profile without ``extends`` is complete on its
    own. A profile may reuse a built-in name (it replaces it; ``extends: paper`` inside a profile
    named ``paper`` is the built-in one): its results differ in the recorded digest."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ProfileError(f"{source}: profiles must be a mapping of name -> profile (got {type(raw).__name__})")
    resolved: dict[str, Profile] = {}
    resolving: list[str] = []

    def resolve(name: str) -> Profile:
        if name in resolved:
            return resolved[name]
        body = raw[name]
        if not isinstance(body, Mapping):
            raise ProfileError(f"{source}: profiles.{name}: must be a mapping of fields (got {type(body).__name__})")
        if "name" in body and body["name"] != name:
            raise ProfileError(f"{source}: profiles.{name}.name: the key is the name (got {body['name']!r})")
        body = {k: v for k, v in body.items() if k != "name"}
        parent_name = body.pop("extends", None)
        if parent_name is not None:
            parent_name = str(parent_name)
            if parent_name in resolving and parent_name != name:
                raise ProfileError(f"{source}: profiles.{name}.extends: cycle "
                                   f"{' -> '.join([*resolving, name, parent_name])}")
            resolving.append(name)
            try:
                if parent_name in raw and parent_name != name:
                    parent = resolve(parent_name)
                elif parent_name in below:
                    parent = below[parent_name]
                else:
                    allowed = sorted({*below, *(n for n in raw if n != name)})
                    raise ProfileError(f"{source}: profiles.{name}.extends: unknown profile {parent_name!r} "
                                       f"(allowed: {', '.join(allowed)})")
            finally:
                resolving.pop()
            body = _extend(parent, body)
            body.setdefault("description", f"{parent_name}, modified: {parent.description}")
        try:
            resolved[name] = Profile.model_validate({**body, "name": name})
        except ValidationError as exc:
            raise ProfileError(f"{source}:\n  {_field_errors(name, exc)}") from None
        return resolved[name]

    for name in raw:
        resolve(str(name))
    return resolved


def parse_profiles_text(text: str, below: Mapping[str, Profile], source: str) -> dict[str, Profile]:
    """YAML or JSON text (JSON is YAML) of user profiles -> validated profiles."""
    try:
        raw = yaml.safe_load(text) if text and text.strip() else None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{source}: not YAML or JSON: {exc}") from None
    return resolve_profiles(raw, below, source)


@cache
def _file_profiles(path: str, mtime_ns: int) -> dict[str, Profile]:
    """The user file's profiles, re-read when the file changes (the key includes its mtime)."""
    del mtime_ns
    return parse_profiles_text(Path(path).read_text(), load_profiles(), f"{PROFILES_FILE_ENV}={path}")


def file_profiles() -> dict[str, Profile]:
    """Profiles of the file named by ``DLBENCH_PROFILES_FILE`` (none when unset)."""
    path = os.environ.get(PROFILES_FILE_ENV, "").strip()
    if not path:
        return {}
    try:
        mtime = Path(path).stat().st_mtime_ns
    except OSError as exc:
        raise ProfileError(f"{PROFILES_FILE_ENV}={path}: cannot read it ({exc.strerror})") from None
    return _file_profiles(path, mtime)


_registered: dict[str, Profile] = {}
_registered_lock = threading.Lock()


def register_profile(profile: Profile) -> Profile:
    """Make ``profile`` resolvable by name in this process: a validated request's pinned profile
    (so a later task on another worker runs what was validated) or one a workload got on its
    command line. Same name, other content: the newer wins, with a warning."""
    with _registered_lock:
        old = _registered.get(profile.name)
        if old is not None and profile_digest(old) != profile_digest(profile):
            log.warning("profile %r redefined in this process (digest %s -> %s)", profile.name,
                        profile_digest(old), profile_digest(profile))
        _registered[profile.name] = profile
    return profile


def register_user_profiles(text: str | None, source: str = f"Airflow Variable {PROFILES_VARIABLE}") -> list[str]:
    """Validate user profiles given as text (the Variable's) and register them; their names."""
    if not text or not text.strip():
        return []
    profiles = parse_profiles_text(text, {**load_profiles(), **file_profiles()}, source)
    for profile in profiles.values():
        register_profile(profile)
    return list(profiles)


def all_profiles() -> dict[str, Profile]:
    """Every profile this process knows: built-ins, the user file, then registered ones."""
    with _registered_lock:
        registered = dict(_registered)
    return {**load_profiles(), **file_profiles(), **registered}


def profile_names() -> list[str]:
    return list(all_profiles())


def get_profile(name: str) -> Profile:
    profiles = all_profiles()
    if name not in profiles:
        raise ValueError(f"unknown profile {name!r}; allowed: {', '.join(profiles)}")
    return profiles[name]


def profile_digest(profile: Profile) -> str:
    """Short sha256 of what a profile makes a workload do: every field but ``name`` and
    ``description``. Recorded in each result document, so results of a profile redefined under
    the same name are told apart in the warehouse (and two names with the same numbers match)."""
    content = profile.model_dump(mode="json", exclude={"name", "description"})
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def is_builtin(profile: Profile) -> bool:
    """Whether ``profile`` is the installed package's profile of that name, unchanged: then a
    workload resolves it by name and nothing else travels on its command line."""
    builtin = load_profiles().get(profile.name)
    return builtin is not None and profile_digest(builtin) == profile_digest(profile)


def profile_to_argument(profile: Profile) -> str:
    """The profile as one ASCII JSON word (``--profile-spec``): shell-quoted by every executor."""
    return json.dumps(profile.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=True)


def profile_from_argument(text: str) -> Profile:
    """Inverse of :func:`profile_to_argument`, validated like any profile."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProfileError(f"--profile-spec: not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ProfileError("--profile-spec: a JSON object with the profile's fields and its name")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(f"--profile-spec:\n  {_field_errors(data['name'], exc)}") from None


# --- Timeouts derived from a profile ---------------------------------------------------------
#
# A job's timeout is a hang detector, so its bound is conservative: the planned work at rates a
# slow machine still reaches, times a margin, plus a fixed allowance for what precedes the work.

TRAIN_FLOPS_PER_IMAGE: dict[ModelName, tuple[float, int]] = {
    ModelName.ALEXNET: (2.2e9, 224),      # forward ~0.72 GFLOPs, training ~3x
    ModelName.RESNET50: (12.3e9, 224),    # forward ~4.1 GFLOPs
    ModelName.INCEPTION3: (17.1e9, 299),  # forward ~5.7 GFLOPs
}
"""Training FLOPs per image at the model's native size (scaled by the image area)."""
SLOW_TRAINING_FLOPS = 20e9
DLTOOLS_TRAIN_FLOPS: dict[DLToolModel, float] = {
    # 6 x the forward multiply-adds of one example (forward 2, backward 4 FLOPs per MAC)
    DLToolModel.FCN5: 6 * 14_198_784,  # 784x2048 + 2048x4096 + 4096x1024 + 1024x10
    DLToolModel.ALEXNET: 6 * 10_732_160,  # three 5x5 convs at 32, 15, 7 px + 576x10
    DLToolModel.RESNET50: 6 * 111_329_920,  # 49 3x3 convs at 32/16/8 px + 64x10
    DLToolModel.LSTM: 6 * 115_474_432,  # 32 words x (2 layers x 4x256x512 + 256x10000 softmax)
}
"""Training FLOPs per example of study 001's DL-tool networks (an LSTM example is one 32-word sequence)."""
DLTOOLS_DATA_SECONDS = 120.0
"""Reading the real data set or generating one of its shapes, at a slow disk's speed (CIFAR-10: 180 MB)."""
"""Sustained training rate of the slowest device a profile may land on (a few CPU cores)."""
SLOW_HPL_FLOPS = 20e9
"""Sustained HPL rate of a slow machine (any server CPU since 2012 does several times this)."""
SLOW_DISK_BYTES_S = 50e6
TIMEOUT_MARGIN = 1.5
STARTUP_ALLOWANCE_S = 600.0
"""Interpreter start, imports, model build, data staging, container start."""
MIN_JOB_TIMEOUT_S = 3600.0
"""The floor: what every job got before timeouts were derived. An emulated guest (TCG) still
starts TensorFlow within it; a smaller profile never gets less."""


def _training_seconds(profile: Profile, model: str, batch: int | None) -> tuple[float, str]:
    spec = profile.training(model)
    flops, native = TRAIN_FLOPS_PER_IMAGE[ModelName(model)]
    images = batch or spec.batch_size_per_device
    per_step = images * flops * (spec.image_size / native) ** 2 / SLOW_TRAINING_FLOPS
    steps = spec.warmup_steps + spec.measured_steps
    return per_step * steps, (f"{model} {steps} steps x {per_step:.3g} s (batch {images}, "
                              f"{spec.image_size} px at {SLOW_TRAINING_FLOPS / 1e9:.0f} GFLOPS)")


def planned_work(profile: Profile, suite: str, args: Mapping[str, Any] | None = None,
                 scenario: str = "single") -> tuple[float, str]:
    """Seconds of work a job of ``suite`` with ``args`` plans at conservative rates, and how."""
    args = args or {}
    micro = profile.micro
    if suite == "tf_cnn":
        seconds, basis = _training_seconds(profile, str(args.get("model", ModelName.INCEPTION3.value)),
                                           int(args["batch_size"]) if args.get("batch_size") else None)
        if scenario == "distributed":
            seconds, basis = seconds * 2, basis + "; x2 synchronising across instances"
        elif scenario == "shared":
            sharing = int(args.get("tenants") or 2)
            lead = profile.scenarios.shared.lead_seconds
            seconds = seconds * (1 + sharing) + lead  # alone, then slowed by the others
            basis += f"; alone + x{sharing} sharing the machine, {lead:.0f} s lead"
        return seconds, basis
    if suite == "dltools":
        return _dltools_seconds(profile, args)
    if suite == "cpu":
        hpl = sum(2 / 3 * n**3 + 2 * n**2 for n in micro.cpu.hpl_sizes) / SLOW_HPL_FLOPS
        hpcg = micro.cpu.hpcg_seconds * 1.2 + 120
        return hpl + hpcg, (f"HPL {len(micro.cpu.hpl_sizes)} sizes up to N={max(micro.cpu.hpl_sizes)} "
                            f"{hpl:.0f} s at {SLOW_HPL_FLOPS / 1e9:.0f} GFLOPS + HPCG {micro.cpu.hpcg_seconds:.0f} s "
                            f"(+20% + 120 s set-up)")
    if suite == "disk":
        d = micro.disk
        block = _bytes(d.dd_block)
        dd = sum(c * block for c in d.dd_counts) / SLOW_DISK_BYTES_S
        ioping = d.ioping_count * 1.0 + 2 * d.ioping_seconds
        fio = 4 * (d.fio_runtime_s + d.fio_size_mb * 1e6 / SLOW_DISK_BYTES_S)
        return dd + ioping + fio, f"dd {dd:.0f} s + ioping {ioping:.0f} s + fio 4 x {d.fio_runtime_s} s (+ layout)"
    if suite == "network":
        n = micro.network
        return 4 * n.seconds + n.latency_samples * 0.05, f"iperf3 4 x {n.seconds} s + {n.latency_samples} pings"
    if suite == "gpu":
        g = micro.gpu
        m, k, n3 = g.gemm
        work = g.iterations * (2 * m * k * n3 + 2 * g.conv_size**2 * 9) / 1e12 + 300
        return work, f"{g.iterations} iterations of GEMM {m}x{k}x{n3} at 1 TFLOPS + 300 s for the other programs"
    if suite == "deepbench":
        per = 120.0 if micro.deepbench.shapes == "paper" else 5.0
        return (micro.deepbench.iterations * per,
                f"{micro.deepbench.iterations} iterations x {per:.0f} s ({micro.deepbench.shapes} shapes)")
    return 0.0, f"no estimate for suite {suite!r}"


def _dltools_seconds(profile: Profile, args: Mapping[str, Any]) -> tuple[float, str]:
    spec = profile.dltools
    model = DLToolModel(str(args.get("model", DLToolModel.RESNET50.value)))
    batch = int(args.get("batch_size") or spec.model(model).batch_sizes[0])
    batches = spec.batches(model, batch)
    per_batch = batch * DLTOOLS_TRAIN_FLOPS[model] / SLOW_TRAINING_FLOPS
    seconds = spec.epochs * batches * per_batch + DLTOOLS_DATA_SECONDS
    return seconds, (f"{model.value} {spec.epochs} epochs x {batches} batches x {per_batch:.3g} s (batch {batch} at "
                     f"{SLOW_TRAINING_FLOPS / 1e9:.0f} GFLOPS) + {DLTOOLS_DATA_SECONDS:.0f} s data")


def _bytes(size: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    size = size.strip().lower()
    return int(size[:-1]) * units[size[-1]] if size and size[-1] in units else int(size)


def job_timeout(profile: Profile, suite: str, args: Mapping[str, Any] | None = None,
                scenario: str = "single") -> tuple[int, str]:
    """(timeout in seconds, its basis): max(floor, startup + margin x planned work)."""
    work, basis = planned_work(profile, suite, args, scenario)
    derived = STARTUP_ALLOWANCE_S + TIMEOUT_MARGIN * work
    seconds = int(math.ceil(max(MIN_JOB_TIMEOUT_S, derived)))
    floor = " (the floor)" if derived < MIN_JOB_TIMEOUT_S else ""
    return seconds, (f"{seconds} s{floor} = max({MIN_JOB_TIMEOUT_S:.0f}, {STARTUP_ALLOWANCE_S:.0f} + "
                     f"{TIMEOUT_MARGIN} x {work:.0f} s) from profile {profile.name}: {basis}")
