"""``serving``: an LLM inference server (vLLM) under load on the platform under test, and the
request rate it sustains at the profile's latency target; asked for by name (docs/serving.md)."""

from __future__ import annotations

from collections.abc import Iterable

from dlbench.suites.spec import Cell, CellRequest, SuiteSpec, framework_arg
from dlbench.workloads.profiles import Framework, Scenario

FRAMEWORK = Framework.VLLM
"""The server's engine: its jobs name it, so they run in its image and environment."""


def cells(request: CellRequest, scenario: Scenario) -> list[Cell]:
    """One server per instance (single); the shared scenarios are not built yet (docs/serving.md)."""
    return [{**framework_arg(FRAMEWORK)}] if scenario is Scenario.SINGLE else []


def _frameworks(chosen: Iterable[Framework]) -> set[Framework]:
    return {FRAMEWORK}


SPEC = SuiteSpec(name="serving", command="serving", cells=cells, opt_in=True, frameworks=_frameworks,
                 document_framework=FRAMEWORK,
                 # vLLM's engine core and its worker exchange tensors through shared memory: 160 MiB
                 # for the toy model, more for larger ones (vLLM's docs ask for --ipc=host or a large
                 # --shm-size); Docker's default 64 MiB fails the engine's start.
                 shared_memory=2 * 2**30,
                 # What a planner sizes a serving fleet by: the rate one instance sustains at the target,
                 # the tokens/s it serves there, how long a server takes to come up, and the tail latencies
                 # at each load point.
                 headline=("capacity", "capacity_output_throughput", "startup_time", "output_throughput",
                           "ttft_p99", "tpot_p99", "goodput"),
                 case_parameters={"precision": "{}", "input_tokens": "in {}", "output_tokens": "out {}"})
