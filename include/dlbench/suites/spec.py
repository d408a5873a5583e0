"""What the controller knows of a suite, in one typed value (:class:`SuiteSpec`), and the request
fields a suite's cells are made from (:class:`CellRequest`: a protocol, so this package sits below
:mod:`dlbench.request`, which satisfies it).

A suite module declares one :class:`SuiteSpec` (the micro-benchmarks' module, five); the registry
(:mod:`dlbench.suites`) lists them. Everything below the request reads a suite's facts from there:
its workload command, whether a request gets it without naming it, the frameworks (images) its
jobs need, the framework its documents default to, its scenarios, whether a job reads the data
directory, the distributed synchronisation its cells use, and how it expands into cells.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from dlbench.workloads.profiles import DataKind, DistributedMode, Framework, ModelName, Profile, Scenario

Cell = dict[str, Any]
"""One cell's workload arguments (the job's ``args``)."""


class CellRequest(Protocol):
    """The request's fields a suite expands into cells (:class:`dlbench.request.BenchmarkRequest`)."""

    @property
    def models(self) -> list[ModelName]: ...

    @property
    def frameworks(self) -> list[Framework]: ...

    @property
    def data(self) -> list[DataKind]: ...

    @property
    def resolved_profile(self) -> Profile: ...

    def distributed_mode_of(self, framework: Framework) -> DistributedMode: ...


def framework_arg(framework: Framework) -> dict[str, str]:
    """A cell's ``framework`` argument (tf_cnn's choice, the transformer's PyTorch): absent for
    tensorflow, so a TensorFlow job's id, arguments and documents are what they were before
    frameworks existed (old runs stay comparable)."""
    return {} if framework is Framework.TENSORFLOW else {"framework": framework.value}


def framework_of(args: Mapping[str, object]) -> Framework:
    """The framework a job's arguments name (:func:`framework_arg`'s inverse): none is TensorFlow."""
    return Framework(str(args.get("framework", Framework.TENSORFLOW.value)))


def auto_or_synthetic(request: CellRequest) -> str:
    """A data-set suite's ``data`` argument: ``auto`` (its real data set when the data directory holds
    it, else generated data of its shapes) when the request has ``real`` data, else ``synthetic``."""
    return "auto" if DataKind.REAL in request.data else DataKind.SYNTHETIC.value


def reads_data_set(args: Mapping[str, object]) -> bool:
    """A data-set suite's job reads the data directory unless its cell is ``synthetic``
    (``auto`` reads the data set when it is there, so does ``real``)."""
    return args.get("data") != DataKind.SYNTHETIC.value


def single_cell(request: CellRequest, scenario: Scenario) -> list[Cell]:
    """A suite with no dimension of its own: one cell, single scenario (the micro-benchmarks)."""
    return [{}] if scenario is Scenario.SINGLE else []


def tensorflow_only(chosen: Iterable[Framework]) -> set[Framework]:
    """Jobs of a suite whose code is TensorFlow's, or a tool in TensorFlow's image."""
    return {Framework.TENSORFLOW}


def reads_real_data(args: Mapping[str, object]) -> bool:
    """A job reads the data directory when its cell asks for real data."""
    return args.get("data") == DataKind.REAL.value


def alone_metric(metric: str) -> str:
    """A shared cell's ``metric`` of the job alone (:attr:`SuiteSpec.shared_metrics`)."""
    return f"{metric}_alone"


def degradation_metric(metric: str) -> str:
    """A shared cell's degradation % of ``metric`` under load against alone (positive: degraded)."""
    return f"degradation_{metric}"


@dataclass(frozen=True)
class SuiteFigure:
    """A suite's figure in the report: one panel per benchmark or parameter value, bars per platform."""

    panel_by: str
    """What a panel is: ``name`` (the benchmark: Fathom's workload) or a parameter (the transformer's ``task``)."""
    panel_order: tuple[str, ...]
    """Panels in the order a reader knows them."""
    title: str
    """The figure's title and its part of the section's heading."""


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    """The suite's id: the requests', the warehouse's, the result documents' ``benchmark.suite``."""
    command: str
    """The workload CLI's subcommand that runs it (``python -m dlbench.workloads <command>``)."""
    cells: Callable[[CellRequest, Scenario], list[Cell]] = single_cell
    """The argument sets it runs for a request in one scenario ([] where it has no such scenario)."""
    opt_in: bool = False
    """Run only when a request names it (the default suites are the core study and its micro-benchmarks)."""
    frameworks: Callable[[Iterable[Framework]], set[Framework]] = tensorflow_only
    """The frameworks its jobs run with, given the request's (which workload images a run needs)."""
    document_framework: Framework | None = None
    """The framework a document of it trained with when it names none (the warehouse's
    ``benchmarks.framework``); None: the suite has no framework dimension (a micro-benchmark)."""
    scenarios: frozenset[Scenario] = frozenset({Scenario.SINGLE})
    """The scenarios it has cells for (distributed and shared need roles the suite's workload plays)."""
    distributed_modes: Callable[[CellRequest], list[DistributedMode]] = lambda request: []
    """How its distributed cells synchronise, for a request (how many roles, hence instances, they need)."""
    reads_data: Callable[[Mapping[str, object]], bool] = reads_real_data
    """Whether a job with these arguments reads the data directory (the executor stages it then)."""
    headline: tuple[str, ...] = ()
    """The metrics the report, the explorer and the regression check lead with, in this order (empty:
    every non-diagnostic metric)."""
    case_parameters: dict[str, str] = field(default_factory=dict)
    """Which requested parameters name a case in the report, and how (``{"batch_size": "batch {}"}``);
    the rest are in the warehouse."""
    data_as_run: bool = False
    """Its ``data`` parameter may be the request's ``auto``: a case name says the data the job ran on
    (its ``data`` label)."""
    figure: SuiteFigure | None = None
    """Its figure in the report's model-workloads section (None: the tables only)."""
    shared_memory: int | None = None
    """The /dev/shm its container or pod needs, in bytes (None: the runtime's default, 64 MiB):
    vLLM's engine and workers exchange tensors through shared memory."""
    shared_metrics: tuple[tuple[str, bool], ...] = (("throughput", True), ("elapsed_time", False))
    """What its shared cells compare alone and loaded (metric, higher is better): the cell reports
    each loaded, alone (:func:`alone_metric`) and its degradation (:func:`degradation_metric`); the
    report reads their directions from here."""
    shared_optional: frozenset[str] = frozenset()
    """Those of :attr:`shared_metrics` a role's successful document may lack (the serving job records
    the tokens/s at its capacity only when some rate met the target): the cell then leaves that
    metric out and names it (label ``not_measured``) instead of failing; any other missing metric
    fails the cell."""
    shared_labels: tuple[str, ...] = ()
    """Labels of the role documents a shared cell carries: the loaded role's as is, the alone role's
    with the suffix ``_alone`` (the serving job's ``capacity_bound``: whether a capacity is a
    measurement or a bound)."""
    background_suite: str | None = None
    """The suite whose looped job is its shared cells' background (None: its own): a server's
    background is a training job."""
    background: Callable[[Profile, Mapping[str, Any]], Cell] | None = None
    """What the looped background job of its shared cells runs, given the profile and the foreground
    cell's arguments (None: a suite without the shared scenario)."""
    tenants_in_one_job: bool = False
    """Its tenants cells run as **one** job holding every tenant (``--condition tenants --tenants N``)
    instead of N jobs started together: the serving job offers each load point to its servers at
    the same moment, which N jobs' adaptive sweeps would not (they drift apart within a point)."""
    tenants_metrics: tuple[str, ...] = ()
    """What a tenants cell carries as is from that one job, beside :attr:`shared_metrics`' comparison
    (the serving job's ``capacity_machine``: the requests/s all its servers served at the target)."""
