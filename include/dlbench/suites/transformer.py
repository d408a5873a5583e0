"""``transformer``: a GPT-style decoder's training and generation (PyTorch), in all three scenarios;
asked for by name."""

from __future__ import annotations

from collections.abc import Iterable

from dlbench.suites.spec import Cell, CellRequest, SuiteSpec, framework_arg
from dlbench.workloads.profiles import DistributedMode, Framework, Scenario, TransformerSpec, TransformerTask

FRAMEWORK = Framework.PYTORCH
"""The decoder's framework (its jobs name it: the job's image and its skips follow)."""


def transformer_cells(spec: TransformerSpec, scenario: Scenario) -> list[Cell]:
    """Single: each task of the profile; distributed: training data-parallel across the instances
    (DDP); shared: training alone and then beside a looped generation job on the same machine (the
    background a serving tenant puts on a training one)."""
    framework = framework_arg(FRAMEWORK)
    if scenario is Scenario.SINGLE:
        return [{"task": t.value, **framework} for t in spec.tasks]
    if TransformerTask.TRAIN not in spec.tasks:
        return []
    train = {"task": TransformerTask.TRAIN.value, **framework}
    if scenario is Scenario.DISTRIBUTED:
        return [{**train, "mode": DistributedMode.DDP.value}]
    return [{**train, "interference": "background"}]


def cells(request: CellRequest, scenario: Scenario) -> list[Cell]:
    return transformer_cells(request.resolved_profile.transformer, scenario)


def _frameworks(chosen: Iterable[Framework]) -> set[Framework]:
    return {FRAMEWORK}


SPEC = SuiteSpec(name="transformer", command="transformer", cells=cells, opt_in=True, frameworks=_frameworks,
                 document_framework=FRAMEWORK, scenarios=frozenset(Scenario),
                 distributed_modes=lambda request: [DistributedMode.DDP])
