"""The ``serving`` subcommand: an LLM inference server under load (docs/serving.md).

``python -m dlbench.workloads serving --profile smoke --out r.json`` starts vLLM's server with the
profile's model (random weights) on this machine, waits until it is ready (the start-up time is a
sample), drives the profile's concurrency sweep and Poisson-rate sweep with vLLM's load generator
from this machine, bisects the highest rate that meets the latency target, and writes one
document: every point's throughput, goodput and latency percentiles, the capacity, and every
request's record. The server is stopped, with every process it started, however the job ends.

This module holds what the command accepts; :mod:`dlbench.workloads.serving.main` runs it and is
imported only then (:func:`dlbench.workloads.cli.run_from`).
"""

from __future__ import annotations

import argparse

from dlbench.workloads.cli import command, run_from
from dlbench.workloads.profiles import Framework, Scenario

SERVER_READY = "serving vLLM"
"""What ``serving-server`` prints once its server answers: ``serving vLLM on <bind>:<port>
startup_time=<s> model=<name> device=<cpu|cuda>`` (:mod:`dlbench.workloads.serving.standalone`)."""
SERVER_ENVIRONMENT = "environment "
"""The line before it: ``environment <JSON>``, the server machine's environment as a job records it."""

SCENARIOS = (Scenario.SINGLE, Scenario.SHARED)
CONDITIONS = ("alone", "with_background", "tenants")
"""A server's conditions in the shared scenario: alone (the baseline), beside a training background
(a job of its own), or as ``--tenants`` servers of this job sharing the machine."""


def _serving_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", choices=[s.value for s in SCENARIOS], default=Scenario.SINGLE.value,
                        help="single: one server on this machine; shared: alone, or beside a training background "
                             "(--condition; docs/serving.md)")
    parser.add_argument("--condition", choices=CONDITIONS, default=None,
                        help="shared: alone (the baseline), with_background (a looped training job beside it) or "
                             "tenants (--tenants servers of this job on one machine, each on its share of the CPUs, "
                             "every load point offered to all of them at once)")
    parser.add_argument("--tenants", type=int, default=None,
                        help="shared: the cell's servers sharing the machine (1); this job starts them all with "
                             "--condition tenants, one (the baseline) with --condition alone")
    parser.add_argument("--framework", default=Framework.VLLM.value, choices=[Framework.VLLM.value],
                        help="the server's engine: vLLM (a controller's job names it, which picks the job's image)")
    parser.add_argument("--server-url", action="append", default=None, metavar="URL",
                        help="drive the server at URL (http://host:port) instead of starting one: the load generator "
                             "on another machine than the server (python -m dlbench.workloads serving-server), or "
                             "beside a server started by hand; repeated: every point offered to each at once")
    parser.add_argument("--startup-time", type=float, default=None, metavar="SECONDS",
                        help="with --server-url: the given server's start-up time, measured where it was started "
                             "(recorded as the startup_time sample)")
    parser.add_argument("--requests", type=int, default=None,
                        help="override the profile: requests per load point")


def usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with this combination of arguments (argparse checks each one alone)."""
    shared = args.scenario == Scenario.SHARED.value
    if shared and args.condition is None:
        return f"--scenario shared needs --condition ({', '.join(CONDITIONS)})"
    if not shared and (args.condition is not None or args.tenants is not None):
        return "--condition and --tenants belong to --scenario shared"
    tenants = args.condition == "tenants"
    if args.tenants is not None and args.tenants < 1:
        return "--tenants must be at least 1"
    if tenants and (args.tenants or 1) < 2:
        return "--condition tenants needs --tenants 2 or more"
    if tenants and args.server_url:
        return "--condition tenants starts its servers: not with --server-url"
    if args.startup_time is not None and not args.server_url:
        return "--startup-time is a given server's (with --server-url): a started server's is measured"
    if args.requests is not None and args.requests < 1:
        return "--requests must be at least 1"
    for url in args.server_url or []:
        if not url.startswith(("http://", "https://")):
            return f"--server-url must be an http:// or https:// URL, got {url!r}"
    return None


command("serving")(_serving_args)(run_from("dlbench.workloads.serving.main"))
