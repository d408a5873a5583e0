"""``fathom``: study 003's eight Fathom workloads in their two tasks (TensorFlow), single scenario;
asked for by name."""

from __future__ import annotations

from dlbench.suites.spec import Cell, CellRequest, SuiteFigure, SuiteSpec, auto_or_synthetic, reads_data_set
from dlbench.workloads.profiles import FathomModel, Framework, Scenario


def cells(request: CellRequest, scenario: Scenario) -> list[Cell]:
    if scenario is not Scenario.SINGLE:
        return []
    spec = request.resolved_profile.fathom
    data = auto_or_synthetic(request)
    return [{"model": m.value, "task": t.value, "data": data} for m in spec.models for t in spec.tasks]


SPEC = SuiteSpec(
    name="fathom", command="fathom", cells=cells, opt_in=True, document_framework=Framework.TENSORFLOW,
    reads_data=reads_data_set,
    # Study 003's Fathom figure: each workload's speed, native vs each platform, training and inference.
    headline=("throughput", "step_time_mean"),
    case_parameters={"task": "{}", "data": "{}", "batch_size": "batch {}"}, data_as_run=True,
    figure=SuiteFigure(panel_by="name", panel_order=tuple(m.value for m in FathomModel),  # its paper's table 1
                       title="Fathom (study 003): each workload's throughput, native (bare metal) vs each platform"))
