"""The ``dltools`` subcommand: study 001's DL-tool training set (Table VII).

``python -m dlbench.workloads dltools --model fcn5 --batch-size 512 --data-dir ~/data --out r.json``
trains one network at one batch size for the profile's epochs and writes one result document with
``seconds_per_batch`` per epoch (labels ``epoch=1``, ``epoch=2``, ...).

This module holds what the command accepts; :mod:`dlbench.workloads.dltools.main` runs it and is
imported only then (:func:`dlbench.workloads.cli.run_from`).
"""

from __future__ import annotations

import argparse

from dlbench.workloads.cli import command, run_from
from dlbench.workloads.profiles import DLToolModel, DLToolsData, Framework


def _dltools_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, choices=[m.value for m in DLToolModel])
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="one of Table VII's (default: the profile's first batch size for the model)",
    )
    parser.add_argument(
        "--data",
        default="auto",
        choices=[d.value for d in DLToolsData],
        help="auto (default): the real data set when it is in --data-dir, else generated data of its "
        "shapes; real: it must be there; synthetic: always generated",
    )
    parser.add_argument("--data-dir", default=None, help="directory with MNIST, CIFAR-10, PTB (docs/dltools.md)")
    parser.add_argument("--epochs", type=int, default=None, help="override the profile (at least 2)")
    parser.add_argument(
        "--batches-per-epoch",
        type=int,
        default=None,
        help="override the profile (default: its value; none = a full pass over the training set)",
    )


def usage_problem(args: argparse.Namespace) -> str | None:
    if args.batch_size is not None and args.batch_size < 1:
        return "--batch-size must be at least 1"
    if args.epochs is not None and args.epochs < 2:
        return "--epochs must be at least 2 (the first epoch is compared with the second)"
    if args.batches_per_epoch is not None and args.batches_per_epoch < 1:
        return "--batches-per-epoch must be at least 1"
    if args.data == "real" and not args.data_dir:
        return "--data real needs --data-dir"
    return None


command("dltools")(_dltools_args)(run_from("dlbench.workloads.dltools.main", Framework.TENSORFLOW))
