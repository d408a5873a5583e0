"""The ``tf-cnn`` subcommand's run (its arguments: :mod:`dlbench.workloads.cnn.command`).

Imported only when ``tf-cnn`` runs: it loads the training code, which other suites' processes do
not need (their documents' ``elapsed_time`` counts from process start).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dlbench.workloads import harness
from dlbench.workloads.cli import common_kwargs
from dlbench.workloads.cnn import trainers
from dlbench.workloads.cnn.command import usage_problem
from dlbench.workloads.profiles import DataKind, Framework, ModelName, Precision, TrainingSpec, get_profile
from dlbench.workloads.profiles.schema import LATER_TRAINING_FIELDS
from dlbench.workloads.result import Benchmark, Status
from dlbench.workloads.training import frameworks, scenario


def main(args: argparse.Namespace) -> int:
    """Run ``tf-cnn`` with parsed ``args``: 2 for a bad combination of arguments, else 0 (the
    harness records a failure in the document and raises)."""
    ok, role = scenario.accepted(args, "tf-cnn", usage_problem(args))
    if not ok:
        return 2

    spec = get_profile(args.profile).training(args.model)
    overrides = {
        k: v for k, v in (("warmup_steps", args.warmup_steps), ("measured_steps", args.measured_steps),
                          ("batch_size_per_device", args.batch_size),
                          ("precision", Precision(args.precision) if args.precision else None)) if v is not None
    }
    spec = spec.model_copy(update=overrides)
    model, data, framework = ModelName(args.model), DataKind(args.data), Framework(args.framework)
    parameters = {"profile": args.profile, "data": data.value, **parameters_of(spec)}
    if framework is not Framework.TENSORFLOW:
        # Absent means tensorflow: every document written before frameworks existed keeps its identity.
        parameters["framework"] = framework.value
    parameters.update(scenario.parameters(args, role))
    benchmark = Benchmark(suite="tf_cnn", name=model.value, parameters=parameters)
    labels = {**(role.labels() if role is not None else {}), "framework": framework.value,
              "precision": spec.precision.value,
              "frameworks_installed": ",".join(f.value for f in frameworks.installed())}
    try:
        trainer = trainers.trainer(framework)
    except frameworks.FrameworkMissing as exc:
        # A visible skip (status skipped, the reason naming the image to use), as the GPU suite
        # does on a machine without a GPU: the run goes on and the report lists it.
        with harness.workload(benchmark, labels=labels, **common_kwargs(args)) as doc:
            doc.status = Status.SKIPPED
            doc.error = str(exc)
        print(f"python -m dlbench.workloads tf-cnn: skipped: {exc}", file=sys.stderr)
        return 0
    with harness.workload(benchmark, versions=trainer.versions, labels=labels, **common_kwargs(args)) as doc:
        train = {"model_name": model, "spec": spec, "data": data, "data_dir": args.data_dir}
        if role is None:
            trainer.train(doc, loop=args.loop, **train)
        else:
            trainer.run_role(doc, role, **train)
    return 0


def parameters_of(spec: TrainingSpec) -> dict[str, Any]:
    """The spec as a document's parameters. A field added later (``precision``) is left out at the
    value every older document meant (fp32), so those documents and new ones stay the same case; at
    any other value it is part of the case key."""
    dumped = spec.model_dump(mode="json")
    return {k: v for k, v in dumped.items() if LATER_TRAINING_FIELDS.get(k, object()) != v}
