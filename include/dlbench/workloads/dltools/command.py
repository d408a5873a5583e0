"""The ``dltools`` subcommand: study 001's DL-tool training set (Table VII).

``python -m dlbench.workloads dltools --model fcn5 --batch-size 512 --data-dir ~/data --out r.json``
trains one network at one batch size for the profile's epochs and writes one result document with
``seconds_per_batch`` per epoch (labels ``epoch=1``, ``epoch=2``, ...).
"""

from __future__ import annotations

import argparse
import sys

from dlbench.workloads import harness
from dlbench.workloads.cli import command, common_kwargs
from dlbench.workloads.profiles import DLToolModel, get_profile
from dlbench.workloads.result import Benchmark


def _dltools_args(parser: argparse.ArgumentParser) -> None:
    from dlbench.workloads.dltools.data import DATA_MODES

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
        choices=DATA_MODES,
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


def _usage_problem(args: argparse.Namespace) -> str | None:
    if args.batch_size is not None and args.batch_size < 1:
        return "--batch-size must be at least 1"
    if args.epochs is not None and args.epochs < 2:
        return "--epochs must be at least 2 (the first epoch is compared with the second)"
    if args.batches_per_epoch is not None and args.batches_per_epoch < 1:
        return "--batches-per-epoch must be at least 1"
    if args.data == "real" and not args.data_dir:
        return "--data real needs --data-dir"
    return None


@command("dltools")(_dltools_args)
def _dltools(args: argparse.Namespace) -> int:
    from dlbench.workloads.dltools import data as datasets
    from dlbench.workloads.dltools import runner
    from dlbench.workloads.tf_cnn.runner import versions

    problem = _usage_problem(args)
    if problem is not None:
        print(f"python -m dlbench.workloads dltools: error: {problem}", file=sys.stderr)
        return 2
    spec = get_profile(args.profile).dltools
    overrides = {
        k: v for k, v in (("epochs", args.epochs), ("batches_per_epoch", args.batches_per_epoch)) if v is not None
    }
    spec = spec.model_copy(update=overrides)
    model = DLToolModel(args.model)
    model_spec = spec.model(model)
    batch_size = args.batch_size or model_spec.batch_sizes[0]
    parameters = {
        "profile": args.profile,
        "data": args.data,
        "dataset": datasets.dataset_name(model),
        "batch_size": batch_size,
        "epochs": spec.epochs,
        "batches_per_epoch": spec.batches_per_epoch or "full",
        "learning_rate": model_spec.learning_rate,
        "momentum": model_spec.momentum,
    }
    benchmark = Benchmark(suite="dltools", name=model.value, parameters=parameters)
    with harness.workload(benchmark, versions=versions, **common_kwargs(args)) as doc:
        runner.train(
            doc, model_name=model, spec=spec, batch_size=batch_size, data_mode=args.data, data_dir=args.data_dir
        )
    return 0
