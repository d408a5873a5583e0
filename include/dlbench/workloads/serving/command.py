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

SCENARIOS = (Scenario.SINGLE, Scenario.SHARED)
CONDITIONS = ("alone", "with_background")
"""A server's conditions in the shared scenario (the background is a training job of its own)."""


def _serving_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", choices=[s.value for s in SCENARIOS], default=Scenario.SINGLE.value,
                        help="single: one server on this machine; shared: alone, or beside a training background "
                             "(--condition; docs/serving.md)")
    parser.add_argument("--condition", choices=CONDITIONS, default=None,
                        help="shared: alone (the baseline) or with_background (a looped training job beside it)")
    parser.add_argument("--tenants", type=int, default=None, help="shared: servers sharing the machine (1)")
    parser.add_argument("--framework", default=Framework.VLLM.value, choices=[Framework.VLLM.value],
                        help="the server's engine: vLLM (a controller's job names it, which picks the job's image)")
    parser.add_argument("--server-url", default=None, metavar="URL",
                        help="drive the server at URL (http://host:port) instead of starting one: the load generator "
                             "on another machine than the server, or beside a server started by hand")
    parser.add_argument("--requests", type=int, default=None,
                        help="override the profile: requests per load point")


def usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with this combination of arguments (argparse checks each one alone)."""
    shared = args.scenario == Scenario.SHARED.value
    if shared and args.condition is None:
        return f"--scenario shared needs --condition ({', '.join(CONDITIONS)})"
    if not shared and (args.condition is not None or args.tenants is not None):
        return "--condition and --tenants belong to --scenario shared"
    if args.tenants not in (None, 1):
        return "--tenants: one server per machine (two servers sharing one are not built: docs/serving.md)"
    if args.requests is not None and args.requests < 1:
        return "--requests must be at least 1"
    if args.server_url is not None and not args.server_url.startswith(("http://", "https://")):
        return f"--server-url must be an http:// or https:// URL, got {args.server_url!r}"
    return None


command("serving")(_serving_args)(run_from("dlbench.workloads.serving.main"))
