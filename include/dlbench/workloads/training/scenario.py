"""The study's scenario arguments (section 3.3), for every training command that takes them
(``tf-cnn``, ``transformer``): which scenarios and shared-machine conditions there are, what is
wrong with a combination (:func:`scenario_problem`, checked with the command's own arguments),
how a command refuses it (exit 2, the reason on stderr, before any framework is imported) and the
parameters a scenario adds to a document's case: the controller aggregates the documents of one
job by those parameters, so every suite must write them alike. Imports no framework.
"""

from __future__ import annotations

import argparse
from typing import Any

from dlbench.workloads.cli import refused
from dlbench.workloads.training.cluster import ClusterRole, parse_role

SCENARIOS = ("single", "distributed", "shared")
CONDITIONS = ("alone", "with_background", "background", "tenant")


def below_minimum(args: argparse.Namespace, minimums: dict[str, int]) -> str | None:
    """The first of the optional integer arguments ``minimums`` (dest -> least value, in order) given
    below its least value, said as the command line spells it."""
    for dest, least in minimums.items():
        value = getattr(args, dest)
        if value is not None and value < least:
            return f"--{dest.replace('_', '-')} must be at least {least}"
    return None


def scenario_problem(args: argparse.Namespace, cluster_problem: str | None = None) -> str | None:
    """What is wrong with the scenario arguments together, for every command that takes them (tf-cnn,
    transformer): cluster arguments outside the distributed scenario, then the command's own
    ``cluster_problem`` with them, then the shared scenario's arguments."""
    given = [f"--{n.replace('_', '-')}" for n in ("mode", "role", "task_index", "cluster")
             if getattr(args, n) is not None]
    if given and args.scenario != "distributed":
        return f"{', '.join(given)} need --scenario distributed"
    if cluster_problem is not None:
        return cluster_problem
    if args.scenario != "shared" and (args.condition is not None or args.tenants is not None):
        return "--condition and --tenants need --scenario shared"
    if args.scenario == "shared" and args.condition is None:
        return f"--scenario shared needs --condition ({', '.join(CONDITIONS)})"
    return below_minimum(args, {"tenants": 1})


def accepted(args: argparse.Namespace, command: str, problem: str | None) -> tuple[bool, ClusterRole | None]:
    """Whether the command runs with ``args`` (``problem``: its ``usage_problem``; a distributed
    process's role must also parse), and the role of a distributed process (None otherwise). A
    refusal is printed as argparse prints its own errors."""
    role = None
    if problem is None and args.scenario == "distributed":
        try:
            role = parse_role(args.mode, args.role, args.task_index, args.cluster)
        except ValueError as exc:
            problem = str(exc)
    if refused(command, problem):
        return False, None
    return True, role


def parameters(args: argparse.Namespace, role: ClusterRole | None) -> dict[str, Any]:
    """What the scenario adds to a document's parameters: nothing for ``single`` (single-instance
    documents stay what they always were), else the scenario, a distributed job's shape (the role is
    a label: every role's document has the same parameters), a shared job's condition and tenants,
    and ``loop`` for a background load."""
    out: dict[str, Any] = {}
    if args.scenario != "single":
        out["scenario"] = args.scenario
    if role is not None:
        out.update(role.parameters())
    if args.scenario == "shared":
        out.update(condition=args.condition, tenants=args.tenants or 1)
    if args.loop:
        out["loop"] = True
    return out
