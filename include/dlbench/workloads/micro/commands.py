"""CLI subcommands of the micro-benchmark suites (registered in dlbench.workloads.cli).

Every suite runs the same way: its spec comes from the profile's ``micro`` section, the
benchmark's parameters are that spec, and the suite module's ``run(doc, spec, *extra)`` fills the
document inside the harness. Only the extra command-line options differ.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from dlbench.workloads import harness
from dlbench.workloads.cli import command, common_kwargs, load
from dlbench.workloads.profiles import get_profile
from dlbench.workloads.result import Benchmark


def _no_args(parser: argparse.ArgumentParser) -> None:
    """Suites whose parameters all come from the profile."""


def _disk_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default=None, help="directory to test (the real-data directory; default: tmp)")


def _network_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", default=None, help="iperf3/latency endpoint (default: start one on loopback)")
    parser.add_argument("--port", type=int, default=5201)


def register_suite(name: str, module: str, add_args: Callable[[argparse.ArgumentParser], None],
                   extra: Callable[[argparse.Namespace], tuple] = lambda args: ()) -> None:
    """Register ``name`` as a subcommand running ``<module>.run(doc, spec, *extra(args))``."""

    def run(args: argparse.Namespace) -> int:
        suite = load(module)  # its imports (TensorFlow...) only when it runs
        spec = getattr(get_profile(args.profile).micro, name)
        benchmark = Benchmark(suite=name, name=name,
                              parameters={"profile": args.profile, **spec.model_dump(mode="json")})
        with harness.workload(benchmark, **common_kwargs(args)) as doc:
            suite.run(doc, spec, *extra(args))
        return 0

    command(name)(add_args)(run)


register_suite("cpu", "dlbench.workloads.micro.cpu", _no_args)
register_suite("disk", "dlbench.workloads.micro.disk", _disk_args, lambda args: (args.data_dir,))
register_suite("network", "dlbench.workloads.micro.network", _network_args, lambda args: (args.server, args.port))
register_suite("gpu", "dlbench.workloads.gpu.runner", _no_args)
register_suite("deepbench", "dlbench.workloads.micro.deepbench", _no_args)
