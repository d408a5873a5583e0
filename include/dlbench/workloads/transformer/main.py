"""The ``transformer`` subcommand's run (its arguments: :mod:`dlbench.workloads.transformer.command`).

Imported only when ``transformer`` runs; PyTorch only once the arguments are accepted (other
suites' processes never load it: their documents' ``elapsed_time`` counts from process start).
"""

from __future__ import annotations

import argparse
from typing import Any

from dlbench.workloads import harness
from dlbench.workloads.cli import common_kwargs
from dlbench.workloads.profiles import Precision, TransformerSpec, TransformerTask, get_profile
from dlbench.workloads.result import Benchmark
from dlbench.workloads.training import frameworks, scenario
from dlbench.workloads.training.cluster import run_worker_interruptibly
from dlbench.workloads.transformer.command import usage_problem

NAME = "gpt"
"""The benchmark's name in every document (one model: its sizes are parameters)."""


def main(args: argparse.Namespace) -> int:
    """Run ``transformer`` with parsed ``args``: 2 for a bad combination of arguments, else 0 (the
    harness records a failure in the document and raises)."""
    ok, role = scenario.accepted(args, "transformer", usage_problem(args))
    if not ok:
        return 2

    # heavy: PyTorch takes seconds to import; a command refused above exits without it
    from dlbench.workloads.torch_instance import versions
    from dlbench.workloads.transformer import generate, train  # heavy: they import PyTorch (as above)

    profile = get_profile(args.profile)
    task = TransformerTask(args.task)
    spec, warmup = overridden(profile.transformer, task, args)
    parameters = {"profile": args.profile, **parameters_of(spec, task, warmup)}
    parameters.update(scenario.parameters(args, role))
    benchmark = Benchmark(suite="transformer", name=NAME, parameters=parameters)
    labels = {**(role.labels() if role is not None else {}), "framework": "pytorch", "task": task.value,
              "data": "synthetic", "data_source": "generated", "precision": spec.precision.value,
              # which image ran it (a container's has PyTorch only), as tf_cnn's documents say
              "frameworks_installed": ",".join(f.value for f in frameworks.installed())}
    gpu_gemm = profile.micro.gpu.gemm
    with harness.workload(benchmark, versions=versions, labels=labels, **common_kwargs(args)) as doc:
        if task is TransformerTask.GENERATE:
            generate.generate(doc, spec=spec, warmup=warmup, loop=args.loop)
        elif role is None:
            train.train(doc, spec=spec, loop=args.loop, gpu_gemm=gpu_gemm)
        else:
            run_worker_interruptibly(
                doc, lambda d: train.train_distributed(d, role, spec=spec, gpu_gemm=gpu_gemm))
    return 0


GENERATION_WARMUP = 1
"""Warm-up generations before the measured ones (the first pays for allocation and kernel choice)."""


def overridden(spec: TransformerSpec, task: TransformerTask, args: argparse.Namespace) -> tuple[TransformerSpec, int]:
    """The profile's spec with the command line's overrides, and the warm-up count of ``task``
    (steps for training, generations for generation)."""
    precision = Precision(args.precision) if args.precision else None
    if task is TransformerTask.TRAIN:
        pairs: tuple[tuple[str, Any], ...] = (
            ("warmup_steps", args.warmup_steps), ("measured_steps", args.measured_steps),
            ("batch_size", args.batch_size), ("precision", precision))
    else:
        pairs = (("generations", args.measured_steps), ("prompts", args.batch_size), ("precision", precision))
    spec = spec.model_copy(update={k: v for k, v in pairs if v is not None})
    if task is TransformerTask.TRAIN:
        return spec, spec.warmup_steps
    return spec, args.warmup_steps or GENERATION_WARMUP


def parameters_of(spec: TransformerSpec, task: TransformerTask, warmup: int) -> dict[str, Any]:
    """The case a document measures (metrics contract of issue 24): the model's sizes and the task's."""
    shape = {"layers": spec.layers, "heads": spec.heads, "width": spec.width, "context": spec.context,
             "vocabulary": spec.vocabulary}
    common = {"task": task.value, "data": "synthetic", "precision": spec.precision.value, **shape}
    if task is TransformerTask.TRAIN:
        return {**common, "batch_size": spec.batch_size, "warmup_steps": warmup,
                "measured_steps": spec.measured_steps, "learning_rate": spec.learning_rate}
    return {**common, "batch_size": spec.prompts, "prompt_length": spec.prompt_length,
            "new_tokens": spec.new_tokens, "warmup_generations": warmup, "generations": spec.generations}
