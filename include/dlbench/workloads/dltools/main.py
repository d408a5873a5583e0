"""The ``dltools`` subcommand's run (its arguments: :mod:`dlbench.workloads.dltools.command`).

Imported only when ``dltools`` runs: it loads the training code, which other suites' processes do
not need (their documents' ``elapsed_time`` counts from process start).
"""

from __future__ import annotations

import argparse

from dlbench.workloads import harness
from dlbench.workloads.cli import common_kwargs, refused
from dlbench.workloads.dltools import data as datasets
from dlbench.workloads.dltools import runner
from dlbench.workloads.dltools.command import usage_problem
from dlbench.workloads.profiles import DLToolModel, get_profile
from dlbench.workloads.result import Benchmark
from dlbench.workloads.tf_instance import versions


def main(args: argparse.Namespace) -> int:
    """Run ``dltools`` with parsed ``args``: 2 for a bad combination of arguments, else 0 (the
    harness records a failure in the document and raises)."""
    if refused("dltools", usage_problem(args)):
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
