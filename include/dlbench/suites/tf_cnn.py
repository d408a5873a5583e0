"""``tf_cnn``: the core study's training benchmark (tf_cnn_benchmarks' CNNs), on every framework the
request names, in all three scenarios."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dlbench.suites.spec import Cell, CellRequest, SuiteSpec, framework_arg, framework_of
from dlbench.workloads.profiles import DistributedMode, Framework, Profile, Scenario


def cells(request: CellRequest, scenario: Scenario) -> list[Cell]:
    """- single: every model x framework x data;
    - distributed: the same, in the request's synchronisation mode for the framework;
    - shared: every model x data against the background job, the study's small-batch control
      (AlexNet batch 32 in ``paper``) against it too, and every model x data as N co-located
      tenants (study 002)."""
    single: list[Cell] = [{"model": m.value, **framework_arg(f), "data": d.value}
                          for m in request.models for f in request.frameworks for d in request.data]
    if scenario is Scenario.SINGLE:
        return single
    if scenario is Scenario.DISTRIBUTED:
        return [{**cell, "mode": request.distributed_mode_of(framework_of(cell)).value} for cell in single]
    shared = request.resolved_profile.scenarios.shared
    out = [{**cell, "interference": "background"} for cell in single]
    out += [{"model": shared.control_model.value, **framework_arg(f), "data": d.value,
             "batch_size": shared.control_batch_size, "interference": "background"}
            for f in request.frameworks for d in request.data]
    out += [{**cell, "interference": "tenants", "tenants": n} for n in shared.tenants for cell in single]
    return out


def background(profile: Profile, cell: Mapping[str, Any]) -> Cell:
    """The study's big-batch network (the profile's ``background_model`` and batch), in the
    foreground's framework (a tenant's stack beside the same stack)."""
    spec = profile.scenarios.shared
    framework = framework_arg(framework_of(cell))
    return {"model": spec.background_model.value, "data": cell.get("data", "synthetic"), **framework,
            "batch_size": spec.background_batch_size}


def _frameworks(chosen: Iterable[Framework]) -> set[Framework]:
    return set(chosen)


def _modes(request: CellRequest) -> list[DistributedMode]:
    return [request.distributed_mode_of(f) for f in request.frameworks]


SPEC = SuiteSpec(
    name="tf_cnn", command="tf-cnn", cells=cells, frameworks=_frameworks, document_framework=Framework.TENSORFLOW,
    scenarios=frozenset(Scenario), distributed_modes=_modes, background=background,
    # The core study's figures: throughput and elapsed time (figures 2-9), degradation (figure 10).
    headline=("throughput", "elapsed_time", "degradation_elapsed_time", "degradation_throughput"),
    case_parameters={"framework": "{}", "precision": "{}", "data": "{}", "batch_size_per_device": "batch {}",
                     "image_size": "{}px"})
