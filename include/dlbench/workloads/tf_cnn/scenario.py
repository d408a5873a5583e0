"""The run side of the study's scenario arguments, for every command that takes them (``tf-cnn``,
``transformer``; :func:`~dlbench.workloads.tf_cnn.command.scenario_problem` checks them together).

One place for how a command refuses a bad combination (exit 2, the reason on stderr, before any
framework is imported) and for the parameters a scenario adds to a document's case: the controller
aggregates the documents of one job by those parameters, so both suites must write them alike.
Imported by the commands' ``main`` modules only (it loads :mod:`.distributed`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dlbench.workloads.tf_cnn import distributed
from dlbench.workloads.tf_cnn.distributed import ClusterRole


def accepted(args: argparse.Namespace, command: str, problem: str | None) -> tuple[bool, ClusterRole | None]:
    """Whether the command runs with ``args`` (``problem``: its ``usage_problem``; a distributed
    process's role must also parse), and the role of a distributed process (None otherwise). A
    refusal is printed as argparse prints its own errors."""
    role = None
    if problem is None and args.scenario == "distributed":
        try:
            role = distributed.parse_role(args.mode, args.role, args.task_index, args.cluster)
        except ValueError as exc:
            problem = str(exc)
    if problem is not None:
        print(f"python -m dlbench.workloads {command}: error: {problem}", file=sys.stderr)
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
