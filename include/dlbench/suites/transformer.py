"""``transformer``: a GPT-style decoder's training and generation (PyTorch), in all three scenarios;
asked for by name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dlbench.suites.spec import Cell, CellRequest, SuiteFigure, SuiteSpec, framework_arg, framework_of
from dlbench.workloads.profiles import DistributedMode, Framework, Profile, Scenario, TransformerSpec, TransformerTask

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


def background(profile: Profile, cell: Mapping[str, Any]) -> Cell:
    """Generation with the same model: the serving tenant a training job meets on a shared GPU machine."""
    framework = framework_arg(framework_of(cell))
    return {"task": TransformerTask.GENERATE.value, **framework}


def _frameworks(chosen: Iterable[Framework]) -> set[Framework]:
    return {FRAMEWORK}


SPEC = SuiteSpec(name="transformer", command="transformer", cells=cells, opt_in=True, frameworks=_frameworks,
                 document_framework=FRAMEWORK, scenarios=frozenset(Scenario),
                 distributed_modes=lambda request: [DistributedMode.DDP], background=background,
                 # What a planner sizes a GPU cloud by: training tokens/s and MFU, serving's latencies, and
                 # training's loss of throughput beside a generation job (the shared scenario).
                 headline=("throughput", "mfu", "time_to_first_token", "inter_token_latency", "degradation_throughput"),
                 case_parameters={"task": "{}", "framework": "{}", "precision": "{}", "batch_size": "batch {}",
                                  "context": "ctx {}", "prompt_length": "prompt {}", "new_tokens": "+{} tokens"},
                 figure=SuiteFigure(panel_by="task", panel_order=tuple(t.value for t in TransformerTask),
                                    title="Transformer (GPT): tokens/s per platform, training and generation"))
