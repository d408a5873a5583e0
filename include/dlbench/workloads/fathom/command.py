"""The ``fathom`` subcommand: study 003's Fathom workloads, one workload and one task per job.

``python -m dlbench.workloads fathom --model vgg --task train --out r.json`` builds Fathom's VGG,
runs the profile's warm-up steps untimed and its measured steps timed, and writes one result
document (docs/fathom.md).

This module holds what the command accepts; :mod:`dlbench.workloads.fathom.main` runs it and is
imported only then (:func:`dlbench.workloads.cli.run_from`).
"""

from __future__ import annotations

import argparse

from dlbench.workloads.cli import command, run_from
from dlbench.workloads.profiles import DLToolsData, FathomModel, FathomTask, Framework


def _fathom_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, choices=[m.value for m in FathomModel])
    parser.add_argument("--task", required=True, choices=[t.value for t in FathomTask],
                        help="train: training steps; infer: the forward pass only")
    parser.add_argument(
        "--data",
        default="auto",
        choices=[d.value for d in DLToolsData],
        help="auto (default): the real data set when it is in --data-dir (MNIST, bAbI), else generated "
        "data of its shapes; real: it must be there; synthetic: always generated",
    )
    parser.add_argument("--data-dir", default=None, help="directory with MNIST or bAbI (docs/fathom.md)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the profile's for the model")
    parser.add_argument("--warmup-steps", type=int, default=None, help="override the profile (at least 1)")
    parser.add_argument("--measured-steps", type=int, default=None, help="override the profile (at least 2)")


def usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with a combination of arguments argparse accepted (None: nothing)."""
    if args.batch_size is not None and args.batch_size < 1:
        return "argument --batch-size: must be at least 1"
    if args.warmup_steps is not None and args.warmup_steps < 1:
        return "argument --warmup-steps: must be at least 1 (the first step traces the graph)"
    if args.measured_steps is not None and args.measured_steps < 2:
        return "argument --measured-steps: must be at least 2 (a spread needs two)"
    if args.data == "real" and not args.data_dir:
        return "argument --data: real needs --data-dir"
    return None


command("fathom")(_fathom_args)(run_from("dlbench.workloads.fathom.main", Framework.TENSORFLOW))
