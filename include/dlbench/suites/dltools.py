"""``dltools``: study 001's DL-tool training set (FCN5, AlexNet, ResNet-50 on MNIST/CIFAR-10, LSTM on
PTB), each network at each batch size of Table VII, single scenario; asked for by name (16 jobs per
platform even in smoke)."""

from __future__ import annotations

from dlbench.suites.spec import Cell, CellRequest, SuiteSpec, auto_or_synthetic, reads_data_set
from dlbench.workloads.profiles import DLToolModel, Scenario


def cells(request: CellRequest, scenario: Scenario) -> list[Cell]:
    """On its real data set when the request has ``real`` data and the data directory holds it
    (``data: auto``; else generated data of its shapes, labelled ``data=synthetic``), on generated
    data otherwise."""
    if scenario is not Scenario.SINGLE:
        return []
    spec = request.resolved_profile.dltools
    data = auto_or_synthetic(request)
    return [{"model": m.value, "batch_size": b, "data": data} for m in DLToolModel for b in spec.model(m).batch_sizes]


SPEC = SuiteSpec(
    name="dltools", command="dltools", cells=cells, opt_in=True, reads_data=reads_data_set,
    # Study 001's Table IX (seconds per batch) and Table XIII (first vs second epoch).
    headline=("seconds_per_batch", "first_epoch_excess", "throughput", "elapsed_time"),
    case_parameters={"dataset": "{}", "batch_size": "batch {}"})
