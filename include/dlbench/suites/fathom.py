"""``fathom``: study 003's eight Fathom workloads in their two tasks (TensorFlow), single scenario;
asked for by name."""

from __future__ import annotations

from dlbench.suites.dltools import reads_data
from dlbench.suites.spec import Cell, CellRequest, SuiteSpec
from dlbench.workloads.profiles import DataKind, Framework, Scenario


def cells(request: CellRequest, scenario: Scenario) -> list[Cell]:
    if scenario is not Scenario.SINGLE:
        return []
    spec = request.resolved_profile.fathom
    data = "auto" if DataKind.REAL in request.data else DataKind.SYNTHETIC.value
    return [{"model": m.value, "task": t.value, "data": data} for m in spec.models for t in spec.tasks]


SPEC = SuiteSpec(name="fathom", command="fathom", cells=cells, opt_in=True, document_framework=Framework.TENSORFLOW,
                 reads_data=reads_data)
