"""``serving``: an LLM inference server (vLLM) under load on the platform under test, and the
request rate it sustains at the profile's latency target; asked for by name (docs/serving.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dlbench.suites import tf_cnn
from dlbench.suites.spec import Cell, CellRequest, SuiteSpec, framework_arg
from dlbench.workloads.profiles import Framework, Profile, Scenario

FRAMEWORK = Framework.VLLM
"""The server's engine: its jobs name it, so they run in its image and environment."""


def cells(request: CellRequest, scenario: Scenario) -> list[Cell]:
    """One server per instance (single); shared: the server alone, then beside the core study's
    looped training background on the same machine (the serving latency's degradation), and N
    servers sharing one machine (the profile's ``scenarios.shared.tenants``: one job starts them
    all and offers every load point to each at once; docs/serving.md)."""
    if scenario is Scenario.SINGLE:
        return [{**framework_arg(FRAMEWORK)}]
    if scenario is Scenario.SHARED:
        tenants = request.resolved_profile.scenarios.shared.tenants
        return [{**framework_arg(FRAMEWORK), "interference": "background"},
                *({**framework_arg(FRAMEWORK), "interference": "tenants", "tenants": n} for n in tenants if n > 1)]
    return []


def servers_per_machine(profile: Profile, scenarios: Iterable[Scenario]) -> int:
    """The most servers a run's serving jobs start on one machine (its tenants cells'), which the
    controllers' memory checks multiply a server's needs by."""
    if Scenario.SHARED not in set(scenarios):
        return 1
    return max((n for n in profile.scenarios.shared.tenants if n > 1), default=1)


def background(profile: Profile, cell: Mapping[str, Any]) -> Cell:
    """The core study's background (the profile's big-batch network, TensorFlow), looped: the
    training tenant a server meets on a shared machine."""
    return tf_cnn.background(profile, {"data": "synthetic"})


def _frameworks(chosen: Iterable[Framework]) -> set[Framework]:
    """vLLM's image, and TensorFlow's for the shared cells' training background."""
    return {FRAMEWORK, Framework.TENSORFLOW}


SPEC = SuiteSpec(name="serving", command="serving", cells=cells, opt_in=True, frameworks=_frameworks,
                 document_framework=FRAMEWORK, scenarios=frozenset({Scenario.SINGLE, Scenario.SHARED}),
                 background=background, background_suite=tf_cnn.SPEC.name, tenants_in_one_job=True,
                 tenants_metrics=("capacity_machine",),
                 shared_metrics=(("capacity", True), ("capacity_output_throughput", True)),
                 # A server that missed the target at the lowest rate tried (capacity bound "below",
                 # e.g. beside a training job on a loaded machine) served no rate at the target: no
                 # tokens/s there. The cell stays a measurement: the capacity's bound says which.
                 shared_optional=frozenset({"capacity_output_throughput"}), shared_labels=("capacity_bound",),
                 # vLLM's engine core and its worker exchange tensors through shared memory: 160 MiB
                 # for the toy model, more for larger ones (vLLM's docs ask for --ipc=host or a large
                 # --shm-size); Docker's default 64 MiB fails the engine's start.
                 shared_memory=2 * 2**30,
                 # What a planner sizes a serving fleet by: the rate one instance sustains at the target,
                 # the tokens/s it serves there, how much of it a training job beside it takes and how
                 # long a server takes to come up. Each load point's rates and latencies are cases of
                 # their own (a dozen per run): in the tables and the serving section's curves, not in
                 # the answer's one line per case.
                 headline=("capacity", "capacity_output_throughput", "degradation_capacity", "startup_time"),
                 case_parameters={"precision": "{}", "input_tokens": "in {}", "output_tokens": "out {}"})
