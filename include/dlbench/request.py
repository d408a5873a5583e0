"""The one config model of a benchmark run: what the Airflow trigger form and the CLI fill in.

Validation happens here, before anything is provisioned: a bad value fails with the field's
name and the allowed values. :func:`plan_jobs` expands a validated request into the job matrix
that the DAG maps over.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from dlbench.errors import ConfigError
from dlbench.grammar import AbsolutePath
from dlbench.jobs import Job, job_id_for
from dlbench.profiles import all_profiles, get_profile, profile_names
from dlbench.providers.local import LocalSettings
from dlbench.providers.registry import ProviderSettingsUnion, provider_choices, provider_names
from dlbench.providers.settings import ProviderSettings
from dlbench.suites import DEFAULT_SUITES, SCENARIO_SUITES, SUITES, Suite
from dlbench.workloads.profiles import (
    TRAINING_FRAMEWORKS,
    DataKind,
    DistributedMode,
    Framework,
    ModelName,
    Profile,
    Scenario,
    job_timeout,
    profile_digest,
)
from dlbench.workloads.result import Platform


def _this_host() -> list[ProviderSettings]:
    """A request without providers benchmarks this host (the embedded provider)."""
    return [LocalSettings()]


class GateOp(StrEnum):
    """How a gate compares the ratio to bare metal with its threshold (docs/gates.md)."""

    AT_LEAST = ">="
    """Passes when the interval's LOWER end is at least the threshold (higher-is-better metrics)."""
    AT_MOST = "<="
    """Passes when the interval's UPPER end is at most the threshold (lower-is-better: times)."""


GATE_CONFIDENCE = 0.95
"""A gate's confidence when it names none: the report's own level, so a gate and the report's
interval agree unless the gate asks for another."""


class Gate(BaseModel):
    """A pass/fail threshold on this run's comparison with bare metal, e.g. ``container_on_vm
    throughput >= 0.90 x bare metal at 95 %`` (docs/gates.md). It is part of the request so that it
    is validated before anything is provisioned and archived with the run; the run's last task
    (``gates``) evaluates it (:mod:`dlbench.reports.analysis.gates`) and fails naming it. ``op`` left out:
    the metric's own direction (``>=`` for rates, ``<=`` for times), known at evaluation."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200,
                             description="what the gate is called in messages (default: built from its fields)")
    platform: Platform = Field(description="the platform whose ratio to bare metal is gated")
    metric: str = Field(min_length=1, max_length=200, pattern=r"^[a-z][a-z0-9_]*$",
                        description="a metric of the comparison (throughput, elapsed_time, hpl, ...)")
    op: GateOp | None = Field(default=None, description="'>=' or '<='; default: the metric's direction")
    ratio: float = Field(gt=0, description="the threshold, as a multiple of bare metal (0.90 = 90 % of bare metal)")
    confidence: float = Field(default=GATE_CONFIDENCE, gt=0, lt=1,
                              description="the level of the two-sided interval whose end must clear the ratio")
    suite: Suite | None = Field(default=None, description="only rows of this suite")
    benchmark: str | None = Field(default=None, min_length=1,
                                  description="only rows of this benchmark (tf_cnn: the model, e.g. alexnet)")
    scenario: Scenario | None = Field(default=None, description="only rows of this scenario")
    data: DataKind | None = Field(default=None, description="only rows of this data kind (tf_cnn)")

    @field_validator("platform")
    @classmethod
    def _not_the_baseline(cls, value: Platform) -> Platform:
        if value is Platform.BARE_METAL:
            raise ValueError("bare_metal is the baseline (its ratio to itself is 1 by definition); gate another "
                             "platform")
        return value


class BenchmarkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)

    providers: list[ProviderSettingsUnion] = Field(
        default_factory=_this_host, min_length=1, max_length=len(provider_names()),
        description="who provisions the platforms: each platform comes from the one provider that offers it "
        "(e.g. ironic for bare metal + nova for VMs in one run)")
    platforms: list[Platform] = Field(
        default_factory=lambda: [Platform.BARE_METAL, Platform.CONTAINER_ON_BARE_METAL], min_length=1
    )
    suites: list[Suite] = Field(default_factory=lambda: list(DEFAULT_SUITES), min_length=1)
    models: list[ModelName] = Field(default_factory=lambda: list(ModelName), min_length=1)
    data: list[DataKind] = Field(default_factory=lambda: [DataKind.SYNTHETIC, DataKind.REAL], min_length=1)
    frameworks: list[Framework] = Field(
        default_factory=lambda: [Framework.TENSORFLOW], min_length=1,
        description="who trains the tf_cnn networks: tensorflow (the study's), pytorch, jax; platforms are compared "
        "per framework, frameworks on the same platform (docs/frameworks.md)")
    scenarios: list[Scenario] = Field(default_factory=lambda: [Scenario.SINGLE], min_length=1)
    distributed_mode: DistributedMode | None = Field(
        default=None, description="how a distributed TensorFlow job synchronises (default: the profile's, the "
        "study's mode); pytorch always uses ddp, jax jax_distributed")
    profile: str = Field(default="smoke", description="a profile's name: built-in, from DLBENCH_PROFILES_FILE "
                         "or from the Airflow Variable dlbench_profiles (docs/profiles.md)")
    profile_spec: Profile | None = Field(
        default=None, description="the profile's resolved fields, filled in at validation: later tasks (on any "
        "worker) and the archived request use exactly what was validated, even if the profile is redefined")
    repetitions: int | None = Field(default=None, ge=1, le=100)
    equivalence_margin_pct: float | None = Field(
        default=None, gt=0, le=50, description="the practical margin of the verdicts, in per cent: a platform "
        "whose whole interval lies within it of bare metal is equivalent, wholly beyond it better or worse "
        "(docs/statistics.md); empty = the profile's (3)")
    data_dir: AbsolutePath | None = None
    gates: list[Gate] = Field(
        default_factory=list, description="pass/fail thresholds on the comparison with bare metal, evaluated by "
        "the run's last task (docs/gates.md); none given: the Airflow Variable dlbench_gates")
    every_machine: bool = Field(
        default=False, description="run every single-scenario job once on each machine of its platform (a fleet "
        "survey) instead of spreading the jobs over the machines: each machine's result is labelled with its index, "
        "so the slow node is found")
    """A fleet survey. By default a platform's jobs are spread over its machines (a hash of the job
    id picks one), so with more machines than jobs most machines run nothing and a slow node goes
    unnoticed. With ``every_machine`` each single-scenario job is planned once per machine
    (:attr:`Job.machine`); the documents carry the machine's index as the label ``machine``, and the
    report counts the machines' results as repetition-like samples of the same case."""

    @model_validator(mode="before")
    @classmethod
    def _pin_profile(cls, data: Any, info: ValidationInfo) -> Any:
        """Resolve ``profile`` to its fields once (``profile_spec``), among the deployment's
        profiles and the user profiles the caller hands in (:func:`parse_request`'s
        ``user_profiles``: the Airflow Variable's). A request that already carries them (validated
        earlier, maybe in another process) keeps them: later tasks run what was validated. Nothing
        is registered: code that needs the pinned profile gets it from :attr:`resolved_profile`."""
        if not isinstance(data, dict):
            return data
        name = data.get("profile", "smoke")
        if not isinstance(name, str):
            return data  # the field's own validation says what is wrong
        spec = data.get("profile_spec")
        if spec is None:
            user: Mapping[str, Profile] = (info.context or {}).get("user_profiles") or {}
            known = {**all_profiles(), **user}
            if name not in known:
                raise ValueError(f"profile: unknown profile {name!r} (allowed: {', '.join(known)}; "
                                 "user profiles: docs/profiles.md)")
            return {**data, "profile_spec": known[name]}
        return data

    @model_validator(mode="after")
    def _pinned_profile_is_the_named_one(self) -> BenchmarkRequest:
        if self.profile_spec is not None and self.profile_spec.name != self.profile:
            raise ValueError(f"profile_spec: describes profile {self.profile_spec.name!r}, not {self.profile!r}")
        return self

    @property
    def resolved_profile(self) -> Profile:
        """The pinned profile (always set after validation)."""
        return self.profile_spec or get_profile(self.profile)

    @property
    def needs_data_set(self) -> bool:
        """Whether a job this request plans reads the data directory (each suite says so of its
        cells): micro-benchmarks or synthetic cells alone need no data set, so a controller without
        TensorFlow (an Airflow image's worker running the local provider) never generates one."""
        return any(SUITES[suite].reads_data(args) for suite in self.suites for scenario in self.scenarios
                   for args in suite_cells(self, suite, scenario))

    @field_validator("distributed_mode")
    @classmethod
    def _tensorflow_mode(cls, value: DistributedMode | None) -> DistributedMode | None:
        if value is not None and value not in Framework.TENSORFLOW.distributed_modes:
            raise ValueError(f"{value.value} is chosen by its framework itself; this field chooses tensorflow's mode "
                             "(distributed_replicated or multi_worker_mirrored)")
        return value

    @field_validator("platforms", "suites", "models", "data", "scenarios", "frameworks")
    @classmethod
    def _unique(cls, value: list[Any]) -> list[Any]:
        return list(dict.fromkeys(value))

    @field_validator("frameworks")
    @classmethod
    def _training(cls, value: list[Framework]) -> list[Framework]:
        engines = [f.value for f in value if not f.trains]
        if engines:
            training = ", ".join(f.value for f in TRAINING_FRAMEWORKS)
            raise ValueError(f"{', '.join(engines)} is not a training framework (frameworks are {training}: "
                             "the training suites' choice)")
        return value

    @model_validator(mode="before")
    @classmethod
    def _one_provider(cls, data: Any) -> Any:
        """``provider: {...}`` (one provider: the shape of requests archived before ``providers``)."""
        if isinstance(data, dict) and "provider" in data:
            if "providers" in data:
                raise ValueError("give provider or providers, not both")
            data = {**data, "providers": [data["provider"]]}
            del data["provider"]
        return data

    @model_validator(mode="after")
    def _platforms_offered(self) -> BenchmarkRequest:
        names = [p.name for p in self.providers]
        if len(set(names)) != len(names):
            raise ValueError(f"providers: each provider at most once (got {', '.join(names)})")
        for platform in self.platforms:
            offering = [p.name for p in self.offering(platform)]
            if not offering:
                allowed = sorted({q.value for p in self.providers for q in p.platforms})
                raise ValueError(f"platforms: {platform.value!r} is not offered by provider "
                                 f"{' or '.join(repr(n) for n in names)} (allowed: {', '.join(allowed)})")
            if len(offering) > 1:
                raise ValueError(f"platforms: {platform.value!r} is offered by {' and '.join(offering)}; "
                                 "choose one of them for this run")
        unused = [p.name for p in self.providers if not any(q in p.platforms for q in self.platforms)]
        if unused and len(self.providers) > 1:
            raise ValueError(f"providers: {', '.join(unused)} provisions none of the requested platforms "
                             f"({', '.join(p.value for p in self.platforms)})")
        return self

    @property
    def provider(self) -> ProviderSettings:
        """The first provider: the run's only one in the common case."""
        return self.providers[0]

    def offering(self, platform: Platform) -> list[ProviderSettings]:
        """The providers that would provision ``platform``. A provider whose settings declare one
        platform for their cluster (``magnum.platform``, ``kubernetes.platform``) takes it from the
        others that merely can host it (Ironic's containers on bare metal next to a Kubernetes
        cluster on bare metal: the cluster's run)."""
        offering = [p for p in self.providers if platform in p.platforms]
        declared = [p for p in offering if getattr(p, "platform", None) == platform.value]
        return declared or offering

    def provider_for(self, platform: Platform) -> ProviderSettings:
        """The provider that provisions ``platform`` in this run."""
        return self.offering(platform)[0]

    def for_provider(self, settings: ProviderSettings) -> BenchmarkRequest:
        """This request narrowed to one provider and the platforms it provisions (what that
        provider's backend sees when a run has several)."""
        platforms = [p for p in self.platforms if p in settings.platforms and self.provider_for(p) is settings]
        return self.model_copy(update={"providers": [settings], "platforms": platforms})

    @property
    def provider_names(self) -> str:
        """``ironic+nova``: how a run's providers are recorded (run info, warehouse)."""
        return "+".join(p.name for p in self.providers)

    @model_validator(mode="after")
    def _enough_instances(self) -> BenchmarkRequest:
        """A distributed job puts each role on its own instance (anti-affinity): refuse a request
        that provisions fewer, before anything is provisioned."""
        if self.scenarios != [Scenario.SINGLE] and not set(SCENARIO_SUITES) & set(self.suites):
            names = [s.value for s in SCENARIO_SUITES]
            raise ValueError("scenarios: 'distributed' and 'shared' are scenarios of the "
                             f"{', '.join(names[:-1])} and {names[-1]} suites; add one to suites")
        if Scenario.DISTRIBUTED not in self.scenarios:
            return self
        modes = [mode for suite in self.suites for mode in SUITES[suite].distributed_modes(self)]
        distributed = self.resolved_profile.scenarios.distributed
        roles = max((len(distributed.roles(mode)) for mode in modes), default=0)
        for platform in self.platforms:
            provider = self.provider_for(platform)
            have = provider.instances_for(platform)
            if have is not None and have < roles:
                raise ValueError(
                    f"scenarios: 'distributed' runs {roles} roles on {roles} different instances of "
                    f"{platform.value}, but provider {provider.name!r} provisions {have} "
                    f"(set {provider.name}.nodes.{platform.value} to {roles} or more)")
        return self

    @model_validator(mode="after")
    def _gates_can_be_shown(self) -> BenchmarkRequest:
        """A gate on what this run does not measure could only end "inconclusive" after the whole
        run: refuse it now, naming the gate's field."""
        asked: dict[str, tuple[str, list[StrEnum]]] = {
            "platform": ("platforms", list(self.platforms)), "suite": ("suites", list(self.suites)),
            "scenario": ("scenarios", list(self.scenarios)), "data": ("data", list(self.data))}
        for index, gate in enumerate(self.gates):
            if Platform.BARE_METAL not in self.platforms:
                raise ValueError(f"gates[{index}]: a gate compares with bare metal, but platforms does not include "
                                 "bare_metal (add it)")
            for field, (request_field, chosen) in asked.items():
                value = getattr(gate, field)
                if value is not None and value not in chosen:
                    raise ValueError(f"gates[{index}].{field}: {value.value!r} is not measured by this run (its "
                                     f"{request_field}: {', '.join(c.value for c in chosen)})")
        return self

    @model_validator(mode="after")
    def _every_machine_plannable(self) -> BenchmarkRequest:
        """``every_machine`` plans one job per machine, so the machines must be known now and each
        job must run on one machine: a distributed or shared cell places its roles itself."""
        if not self.every_machine:
            return self
        if self.scenarios != [Scenario.SINGLE]:
            others = ", ".join(s.value for s in self.scenarios if s is not Scenario.SINGLE)
            raise ValueError(f"every_machine: runs each single-scenario job once per machine; scenario {others} "
                             "places its roles on the machines itself (ask for scenarios ['single'] only, or set "
                             "every_machine false)")
        for platform in self.platforms:
            self.machine_count(platform)  # raises naming the field when unknown at planning time
        return self

    def machine_count(self, platform: Platform) -> int:
        """How many machines ``platform`` gets in this run, as known before anything is provisioned:
        the provider settings' node count (``ironic.nodes.bare_metal``, shared with the host platform
        under ``share_nodes``); the embedded provider's host is one machine. Raises ``ValueError``
        naming ``every_machine`` when the count is decided only at provisioning time (a Kubernetes
        cluster without ``nodes``: every schedulable node)."""
        provider = self.provider_for(platform)
        count = provider.instances_for(platform)
        if count is not None:
            return count
        if isinstance(provider, LocalSettings):
            return 1  # this host, shared by design
        raise ValueError(f"every_machine: the number of machines of {platform.value} is decided by the cluster at "
                         f"provisioning time; set {provider.name}.nodes to plan one job per machine")

    def machines_of(self, platform: Platform) -> list[int | None]:
        """The :attr:`Job.machine` values a single-scenario job of ``platform`` is planned with:
        every machine's index with ``every_machine``, else ``[None]`` (one job, target by hash)."""
        return list(range(self.machine_count(platform))) if self.every_machine else [None]

    @property
    def training_distributed_mode(self) -> DistributedMode:
        """TensorFlow's distributed mode: the request's, else the profile's (the study's)."""
        return self.distributed_mode or self.resolved_profile.scenarios.distributed.mode

    def distributed_mode_of(self, framework: Framework) -> DistributedMode:
        """How ``framework``'s distributed job synchronises: TensorFlow's is chosen
        (:attr:`training_distributed_mode`), the others have one each (DDP, jax.distributed)."""
        if framework is Framework.TENSORFLOW:
            return self.training_distributed_mode
        return framework.distributed_modes[0]

    @property
    def effective_repetitions(self) -> int:
        """Repetitions of the training cells (the request's, else the profile's)."""
        return self.repetitions_for(Suite.TF_CNN)

    def repetitions_for(self, suite: Suite) -> int:
        return self.repetitions or self.resolved_profile.repetitions_for(suite.value)

    @property
    def equivalence_margin(self) -> float:
        """The verdicts' margin as a fraction (0.03 = ±3 %): the request's, else the profile's."""
        return (self.equivalence_margin_pct or self.resolved_profile.equivalence_margin_pct) / 100.0


def normalize(params: dict[str, Any]) -> dict[str, Any]:
    """Trigger-form shape -> request shape.

    The form has a ``provider`` drop-down, a ``providers`` multi-select (several providers in
    one run: it wins over ``provider`` when not empty) and one object per provider (``ironic``,
    ``nova``, ...); the request holds the chosen providers' settings as ``providers: [{"name":
    ..., ...}]``. A settings object for a provider that was not chosen is an error (it would be
    silently ignored)."""
    cleaned = {k: v for k, v in params.items() if v is not None and v != "" and v != []}
    chosen = cleaned.pop("providers", None) or cleaned.pop("provider", None) or "local"
    cleaned.pop("provider", None)
    objects = {name: cleaned.pop(name) for name in provider_names() if name in cleaned}
    names = [chosen] if isinstance(chosen, (str, dict)) else list(chosen)
    plain = [n for n in names if isinstance(n, str)]
    if len(set(plain)) != len(plain):
        raise ConfigError("invalid benchmark request:\n  providers: each provider at most once "
                          f"(got {', '.join(plain)})")
    providers: list[Any] = []
    for name in names:
        if isinstance(name, dict):  # already a settings object (request shape)
            providers.append(name)
            continue
        if name not in provider_names():
            raise ConfigError(f"invalid benchmark request:\n  provider: unknown provider {name!r} "
                              f"(allowed: {', '.join(provider_names())})")
        settings = objects.pop(name, None) or {}
        if not isinstance(settings, dict):
            raise ConfigError(f"invalid benchmark request:\n  {name}: must be an object of settings")
        providers.append({**settings, "name": name})
    if objects:
        named = ", ".join(repr(p.get("name") if isinstance(p, dict) else p) for p in providers)
        raise ConfigError(f"invalid benchmark request:\n  {', '.join(objects)}: settings given but "
                          f"provider is {named} (choose that provider or remove the settings)")
    cleaned["providers"] = providers
    return cleaned


def parse_request(params: dict[str, Any], user_profiles: Mapping[str, Profile] | None = None) -> BenchmarkRequest:
    """Validate raw params (trigger form, CLI, a Variable) into a request, or raise :class:`ConfigError`.
    ``user_profiles`` (the Airflow Variable's, :func:`dlbench.profiles.parse_user_profiles`) may be
    chosen by name besides the deployment's profiles; the request pins the chosen one's fields."""
    cleaned = normalize(params)
    try:
        return BenchmarkRequest.model_validate(cleaned, context={"user_profiles": dict(user_profiles or {})})
    except ValidationError as exc:
        raise ConfigError(explain(exc)) from None


def explain(exc: ValidationError) -> str:
    """One line per bad field: ``field: message (allowed: a, b, c)``."""
    allowed = {
        "provider": provider_names(),
        "providers": provider_names(),
        "platforms": [p.value for p in Platform],
        "suites": [s.value for s in Suite],
        "models": [m.value for m in ModelName],
        "data": [d.value for d in DataKind],
        "profile": profile_names(),
        "scenarios": [s.value for s in Scenario],
        "distributed_mode": [m.value for m in Framework.TENSORFLOW.distributed_modes],
        "frameworks": [f.value for f in TRAINING_FRAMEWORKS],
        **provider_choices(),
        "gates.platform": [p.value for p in Platform if p is not Platform.BARE_METAL],
        "gates.op": [o.value for o in GateOp],
        "gates.suite": [s.value for s in Suite],
        "gates.scenario": [s.value for s in Scenario],
        "gates.data": [d.value for d in DataKind],
    }
    lines = []
    for error in exc.errors():
        loc = list(error["loc"])
        if len(loc) > 2 and loc[0] == "providers" and isinstance(loc[1], int):
            loc = loc[2:]  # ("providers", 0, "ironic", "docker_image") -> ironic.docker_image
        field = str(loc[0]) if loc else "request"
        where = ".".join(str(p) for p in loc) or "request"
        key = field if field in allowed else ".".join(str(p) for p in loc[:2])
        if len(loc) > 1 and loc[0] == "gates" and isinstance(loc[1], int):  # ("gates", 1, "platform")
            where = f"gates[{loc[1]}]" + "".join(f".{p}" for p in loc[2:])  # -> gates[1].platform
            key = ".".join(["gates", *(str(p) for p in loc[2:3])])
        hint = f" (allowed: {', '.join(allowed[key])})" if key in allowed else ""
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"{message}{hint}" if where == "request" and ": " in message else f"{where}: {message}{hint}")
    return "invalid benchmark request:\n  " + "\n  ".join(lines)


def suite_cells(request: BenchmarkRequest, suite: Suite, scenario: Scenario = Scenario.SINGLE) -> list[dict[str, Any]]:
    """The argument sets one suite runs for a request in one scenario ([] where it has no such
    scenario): the suite's own expansion (:attr:`dlbench.suites.spec.SuiteSpec.cells`)."""
    return SUITES[suite].cells(request, scenario)


def platform_order(platforms: list[Platform], repetition: int) -> list[Platform]:
    """The order the platforms run a cell in on ``repetition``: rotated by one place per repetition
    (a Latin square: over n repetitions of n platforms each platform runs each position once), so
    drift over the run (a machine warming up, a neighbour starting) falls on every platform alike
    instead of always on the one that runs second."""
    shift = repetition % len(platforms) if platforms else 0
    return [*platforms[shift:], *platforms[:shift]]


def plan_jobs(request: BenchmarkRequest, run_id: str) -> list[Job]:
    """Expand a request into jobs. Repetitions are the outer loop, so a run cut short still has
    a complete first pass over the matrix rather than many repetitions of its first cell. Within a
    repetition the platforms of one cell run back to back (:func:`platform_order`: interleaved, their
    order rotated per repetition), so the values a comparison pairs were measured minutes apart, not
    a whole matrix apart. With ``every_machine`` each cell is planned once per machine of its
    platform (machine innermost: a run cut short has surveyed the whole fleet on its first cells)."""
    jobs = []
    profile = request.resolved_profile
    for repetition in range(max(request.repetitions_for(suite) for suite in request.suites)):
        for suite in request.suites:
            if repetition >= request.repetitions_for(suite):
                continue
            for scenario in request.scenarios:
                for args in suite_cells(request, suite, scenario):
                    timeout, _ = job_timeout(profile, suite.value, args, scenario.value)
                    for platform in platform_order(list(request.platforms), repetition):
                        machines = request.machines_of(platform) if scenario is Scenario.SINGLE else [None]
                        for machine in machines:
                            jobs.append(Job(
                                job_id=job_id_for(run_id, platform.value, suite.value, args, repetition, scenario,
                                                  machine),
                                run_id=run_id, platform=platform, suite=suite.value,
                                command=SUITES[suite].command, args=args, profile=request.profile,
                                repetition=repetition, scenario=scenario,
                                profile_digest=profile_digest(profile, suite.value), timeout_s=timeout,
                                machine=machine,
                            ))
    return jobs
