"""The suite registry: every suite the controller runs, each declared whole in its own module.

Adding a suite = one module in this package holding a :class:`~dlbench.suites.spec.SuiteSpec`
(its workload command, cells, frameworks, scenarios...) and one line here: a member of
:class:`Suite` and its entry in :data:`SUITES`. Requests, planning, the images a run needs and the
warehouse's framework column read a suite's facts from here (docs/architecture.md).
"""

from __future__ import annotations

from enum import StrEnum

from dlbench.suites import dltools, fathom, micro, serving, tf_cnn, transformer
from dlbench.suites.spec import CellRequest, SuiteSpec, framework_arg, framework_of


class Suite(StrEnum):
    """The suites by id (the requests', the warehouse's, the documents' ``benchmark.suite``)."""

    TF_CNN = "tf_cnn"
    CPU = "cpu"
    GPU = "gpu"
    DEEPBENCH = "deepbench"
    DISK = "disk"
    NETWORK = "network"
    DLTOOLS = "dltools"
    FATHOM = "fathom"
    TRANSFORMER = "transformer"
    SERVING = "serving"


SUITES: dict[Suite, SuiteSpec] = {
    Suite.TF_CNN: tf_cnn.SPEC,
    Suite.CPU: micro.CPU,
    Suite.GPU: micro.GPU,
    Suite.DEEPBENCH: micro.DEEPBENCH,
    Suite.DISK: micro.DISK,
    Suite.NETWORK: micro.NETWORK,
    Suite.DLTOOLS: dltools.SPEC,
    Suite.FATHOM: fathom.SPEC,
    Suite.TRANSFORMER: transformer.SPEC,
    Suite.SERVING: serving.SPEC,
}
"""Every suite's spec, in the order a request without ``suites`` lists the default ones."""


def spec_of(suite: Suite | str) -> SuiteSpec:
    """The suite's spec (``suite``: the enum or its id; an unknown id raises ValueError naming it)."""
    return SUITES[Suite(suite)]


def find_spec(suite: str) -> SuiteSpec | None:
    """The suite's spec, or None for an id outside the registry (a job's own command, e.g. a
    tool's or a test's: it runs with the defaults)."""
    return next((spec for key, spec in SUITES.items() if key.value == suite), None)


OPT_IN_SUITES: tuple[Suite, ...] = tuple(s for s, spec in SUITES.items() if spec.opt_in)
"""Asked for by name only."""

DEFAULT_SUITES: tuple[Suite, ...] = tuple(s for s, spec in SUITES.items() if not spec.opt_in)
"""What a request without ``suites`` runs: the core study and the micro-benchmarks that explain it."""

MICRO_ORDER: tuple[Suite, ...] = tuple(Suite(spec.name) for spec in micro.REPORT_ORDER)
"""The micro-benchmarks in the order that explains training (the report's sections)."""

SCENARIO_SUITES: tuple[Suite, ...] = tuple(s for s, spec in SUITES.items() if len(spec.scenarios) > 1)
"""Suites with distributed and shared cells (the others run the single scenario only)."""

__all__ = ["DEFAULT_SUITES", "MICRO_ORDER", "OPT_IN_SUITES", "SCENARIO_SUITES", "SUITES", "CellRequest", "Suite",
           "SuiteSpec", "find_spec", "framework_arg", "framework_of", "spec_of"]
