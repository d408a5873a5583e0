"""Micro-benchmarks that explain a training result by its parts: CPU, GPU, disk, network.

Each suite is a workload like the TF runner (same CLI options, same result document), wrapping
a reference tool where one exists (hpcc, dd, ioping, fio, iperf3, the CUDA programs in
``dlbench.workloads.gpu``) and parsing its output strictly: unexpected output fails with
:class:`~dlbench.workloads.micro.tools.ToolOutputError` naming the tool and the line.
"""
