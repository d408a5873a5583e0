"""The micro-benchmarks that explain the training results (study 001's CPU, GPU, disk and network,
study 003's DeepBench kernels): one cell each, single scenario, tools in TensorFlow's image."""

from __future__ import annotations

from collections.abc import Mapping

from dlbench.suites.spec import SuiteSpec, never


def _always(args: Mapping[str, object]) -> bool:
    return True


CPU = SuiteSpec(name="cpu", command="cpu", reads_data=never)
GPU = SuiteSpec(name="gpu", command="gpu", reads_data=never)
DEEPBENCH = SuiteSpec(name="deepbench", command="deepbench", reads_data=never)
DISK = SuiteSpec(name="disk", command="disk", reads_data=_always)
"""The disk suite measures the directory real data is read from (it gets the data directory)."""
NETWORK = SuiteSpec(name="network", command="network", reads_data=never)
