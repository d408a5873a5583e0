"""The ``tf-cnn`` subcommand's run (its arguments: :mod:`dlbench.workloads.tf_cnn.command`).

Imported only when ``tf-cnn`` runs: it loads the training code, which other suites' processes do
not need (their documents' ``elapsed_time`` counts from process start).
"""

from __future__ import annotations

import argparse
import sys

from dlbench.workloads import harness
from dlbench.workloads.cli import common_kwargs
from dlbench.workloads.profiles import DataKind, ModelName, get_profile
from dlbench.workloads.result import Benchmark
from dlbench.workloads.tf_cnn import distributed, runner
from dlbench.workloads.tf_cnn.command import usage_problem


def main(args: argparse.Namespace) -> int:
    """Run ``tf-cnn`` with parsed ``args``: 2 for a bad combination of arguments, else 0 (the
    harness records a failure in the document and raises)."""
    problem = usage_problem(args)
    role = None
    if problem is None and args.scenario == "distributed":
        try:
            role = distributed.parse_role(args.mode, args.role, args.task_index, args.cluster)
        except ValueError as exc:
            problem = str(exc)
    if problem is not None:
        print(f"python -m dlbench.workloads tf-cnn: error: {problem}", file=sys.stderr)
        return 2

    spec = get_profile(args.profile).training(args.model)
    overrides = {
        k: v for k, v in (("warmup_steps", args.warmup_steps), ("measured_steps", args.measured_steps),
                          ("batch_size_per_device", args.batch_size)) if v is not None
    }
    spec = spec.model_copy(update=overrides)
    model, data = ModelName(args.model), DataKind(args.data)
    parameters = {"profile": args.profile, "data": data.value, **spec.model_dump()}
    if args.scenario != "single":
        parameters["scenario"] = args.scenario
    if role is not None:
        parameters.update(role.parameters())
    if args.scenario == "shared":
        parameters.update(condition=args.condition, tenants=args.tenants or 1)
    if args.loop:
        parameters["loop"] = True
    benchmark = Benchmark(suite="tf_cnn", name=model.value, parameters=parameters)
    labels = role.labels() if role is not None else {}
    with harness.workload(benchmark, versions=runner.versions, labels=labels, **common_kwargs(args)) as doc:
        train = {"model_name": model, "spec": spec, "data": data, "data_dir": args.data_dir}
        if role is None:
            runner.train(doc, loop=args.loop, **train)
        elif role.role == "ps":
            distributed.run_parameter_server(doc, role)
        elif role.mode == "distributed_replicated":
            import tensorflow as tf  # heavy: seconds to import; only this role needs it here

            # Graph mode for the whole process, before any TF op (and before the helper thread,
            # which takes its execution mode from this default).
            tf.compat.v1.disable_eager_execution()
            distributed.run_worker_interruptibly(
                doc, lambda d: distributed.train_replicated_worker(d, role, **train))
        else:
            distributed.run_worker_interruptibly(
                doc, lambda d: distributed.train_mirrored_worker(d, role, **train))
    return 0
