"""The ``tf-cnn`` subcommand: TensorFlow image-classification training (the core study)."""

from __future__ import annotations

import argparse

from dlbench.workloads import harness
from dlbench.workloads.cli import command, common_kwargs
from dlbench.workloads.profiles import DataKind, ModelName, get_profile
from dlbench.workloads.result import Benchmark


def _tf_cnn_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, choices=[m.value for m in ModelName])
    parser.add_argument("--data", default="synthetic", choices=[d.value for d in DataKind])
    parser.add_argument("--data-dir", default=None, help="ImageNet-format TFRecords (for --data real)")
    parser.add_argument("--warmup-steps", type=int, default=None, help="override the profile")
    parser.add_argument("--measured-steps", type=int, default=None, help="override the profile")


@command("tf-cnn")(_tf_cnn_args)
def _tf_cnn(args: argparse.Namespace) -> int:
    from dlbench.workloads.tf_cnn import runner

    spec = get_profile(args.profile).training(args.model)
    overrides = {
        k: v for k, v in (("warmup_steps", args.warmup_steps), ("measured_steps", args.measured_steps)) if v is not None
    }
    spec = spec.model_copy(update=overrides)
    model, data = ModelName(args.model), DataKind(args.data)
    benchmark = Benchmark(
        suite="tf_cnn",
        name=model.value,
        parameters={"profile": args.profile, "data": data.value, **spec.model_dump()},
    )
    with harness.workload(benchmark, versions=runner.versions, **common_kwargs(args)) as doc:
        runner.train(doc, model_name=model, spec=spec, data=data, data_dir=args.data_dir)
    return 0
