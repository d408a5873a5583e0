"""The ``fathom`` subcommand's run (its arguments: :mod:`dlbench.workloads.fathom.command`).

Imported only when ``fathom`` runs: it loads TensorFlow and one workload's code, which other
suites' processes do not need (their documents' ``elapsed_time`` counts from process start).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dlbench.workloads import harness
from dlbench.workloads.cli import common_kwargs, refused
from dlbench.workloads.fathom import runner
from dlbench.workloads.fathom.command import usage_problem
from dlbench.workloads.fathom.workload import DataMode, workload
from dlbench.workloads.profiles import FathomModel, FathomTask, get_profile
from dlbench.workloads.result import Benchmark
from dlbench.workloads.tf_instance import versions


def main(args: argparse.Namespace) -> int:
    """Run ``fathom`` with parsed ``args``: 2 for a bad combination of arguments, else 0 (the
    harness records a failure in the document and raises)."""
    if refused("fathom", usage_problem(args)):
        return 2
    spec = get_profile(args.profile).fathom
    overrides = {k: v for k, v in (("warmup_steps", args.warmup_steps), ("measured_steps", args.measured_steps))
                 if v is not None}
    spec = spec.model_copy(update=overrides)
    model, task = FathomModel(args.model), FathomTask(args.task)
    work = workload(model)
    model_spec = spec.model(model)
    model_spec = model_spec.model_copy(update={"batch_size": args.batch_size or model_spec.batch_size})
    parameters = {
        "profile": args.profile,
        "task": task.value,
        "data": args.data,
        "dataset": work.dataset,
        "batch_size": model_spec.batch_size,
        "learning_rate": model_spec.learning_rate,
        "warmup_steps": spec.warmup_steps,
        "measured_steps": spec.measured_steps,
        **work.case_parameters(model_spec),
    }
    benchmark = Benchmark(suite="fathom", name=model.value, parameters=parameters)
    with harness.workload(benchmark, versions=versions, **common_kwargs(args)) as doc:
        runner.run(doc, work, model_spec, task=task, counts=spec, data_mode=DataMode(args.data),
                   data_dir=Path(args.data_dir) if args.data_dir else None)
    return 0
