"""CLI subcommands of the micro-benchmark suites (registered in dlbench.workloads.cli)."""

from __future__ import annotations

import argparse

from dlbench.workloads import harness
from dlbench.workloads.cli import command, common_kwargs
from dlbench.workloads.profiles import get_profile
from dlbench.workloads.result import Benchmark


def _no_args(parser: argparse.ArgumentParser) -> None:
    """Suites whose parameters all come from the profile."""


def _disk_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default=None, help="directory to test (the real-data directory; default: tmp)")


def _network_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", default=None, help="iperf3/latency endpoint (default: start one on loopback)")
    parser.add_argument("--port", type=int, default=5201)


def _suite(name: str, args: argparse.Namespace, **parameters: object) -> tuple[Benchmark, object]:
    spec = getattr(get_profile(args.profile).micro, name)
    benchmark = Benchmark(suite=name, name=name, parameters={"profile": args.profile, **spec.model_dump(mode="json"),
                                                             **parameters})
    return benchmark, spec


@command("cpu")(_no_args)
def _cpu(args: argparse.Namespace) -> int:
    from dlbench.workloads.micro import cpu

    benchmark, spec = _suite("cpu", args)
    with harness.workload(benchmark, **common_kwargs(args)) as doc:
        cpu.run(doc, spec)
    return 0


@command("disk")(_disk_args)
def _disk(args: argparse.Namespace) -> int:
    from dlbench.workloads.micro import disk

    benchmark, spec = _suite("disk", args)
    with harness.workload(benchmark, **common_kwargs(args)) as doc:
        disk.run(doc, spec, args.data_dir)
    return 0


@command("network")(_network_args)
def _network(args: argparse.Namespace) -> int:
    from dlbench.workloads.micro import network

    benchmark, spec = _suite("network", args)
    with harness.workload(benchmark, **common_kwargs(args)) as doc:
        network.run(doc, spec, args.server, args.port)
    return 0


@command("gpu")(_no_args)
def _gpu(args: argparse.Namespace) -> int:
    from dlbench.workloads.gpu import runner

    benchmark, spec = _suite("gpu", args)
    with harness.workload(benchmark, **common_kwargs(args)) as doc:
        runner.run(doc, spec)
    return 0


@command("deepbench")(_no_args)
def _deepbench(args: argparse.Namespace) -> int:
    from dlbench.workloads.micro import deepbench

    benchmark, spec = _suite("deepbench", args)
    with harness.workload(benchmark, **common_kwargs(args)) as doc:
        deepbench.run(doc, spec)
    return 0
