"""The micro-benchmarks that explain the training results (study 001's CPU, GPU, disk and network,
study 003's DeepBench kernels): one cell each, single scenario, tools in TensorFlow's image; their
cells ask for no real data, so only the disk suite gets the data directory."""

from __future__ import annotations

from collections.abc import Mapping

from dlbench.suites.spec import SuiteSpec


def _always(args: Mapping[str, object]) -> bool:
    return True


CPU = SuiteSpec(name="cpu", command="cpu", headline=("hpl", "hpcg", "dgemm", "stream_triad"))
GPU = SuiteSpec(name="gpu", command="gpu",
                headline=("gpu_bandwidth", "gpu_convolution", "gpu_gemm", "gpu_histogram", "gpu_transpose"))
DEEPBENCH = SuiteSpec(name="deepbench", command="deepbench",
                      headline=("deepbench_tflops", "deepbench_allreduce_busbw"))
DISK = SuiteSpec(name="disk", command="disk", reads_data=_always,
                 headline=("dd_write_bandwidth", "ioping_latency", "fio_bandwidth", "fio_iops"))
"""The disk suite measures the directory real data is read from (it gets the data directory)."""
NETWORK = SuiteSpec(name="network", command="network", headline=("tcp_throughput", "tcp_latency"))

REPORT_ORDER = (GPU, DEEPBENCH, CPU, NETWORK, DISK)
"""The micro-benchmarks in the order that explains training: the accelerator, DL kernels, the CPU,
then the network and the disk (the report's sections)."""
