"""The ``transformer`` subcommand: a GPT-style decoder's training or generation (docs/transformer.md).

``python -m dlbench.workloads transformer --task train --profile smoke --out r.json`` trains the
profile's decoder (GPT-2 small's shape at ``paper``) on synthetic token ids; ``--task generate``
decodes a batch of prompts with a KV cache. The scenarios are tf-cnn's arguments, with the same
names, so the controller starts both suites' processes alike:

- ``single`` (default): one process on every GPU of its instance (DDP, one process per GPU), else the CPU;
- ``distributed``: training only, DDP across instances (``--mode ddp --role worker --task-index
  --cluster``), one process per instance (per GPU of it), each worker writing its own document;
- ``shared``: ``--condition`` and ``--tenants``; a background load (``--loop``: the planner's is a
  looped generation) repeats windows of its measured steps until SIGTERM.

This module holds what the command accepts; :mod:`dlbench.workloads.transformer.main` runs it and
is imported only then (:func:`dlbench.workloads.cli.run_from`).
"""

from __future__ import annotations

import argparse

from dlbench.workloads.cli import command, run_from
from dlbench.workloads.cnn.command import CONDITIONS, SCENARIOS, below_minimum, scenario_problem
from dlbench.workloads.profiles import DistributedMode, DistributedRole, Framework, Precision, TransformerTask


def _transformer_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, choices=[t.value for t in TransformerTask],
                        help="train: training steps; generate: a batch of prompts decoded with a KV cache")
    parser.add_argument("--precision", default=None, choices=[p.value for p in Precision],
                        help="override the profile's precision (fp32, tf32, bf16)")
    parser.add_argument("--framework", default=Framework.PYTORCH.value, choices=[Framework.PYTORCH.value],
                        help="the framework that runs the decoder: PyTorch (a controller's job names it, which "
                             "picks the job's image)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="override the profile: sequences per step (train) or prompts decoded together (generate)")
    parser.add_argument("--warmup-steps", type=int, default=None,
                        help="override the profile's warm-up steps (train); warm-up generations (generate, default 1)")
    parser.add_argument("--measured-steps", type=int, default=None,
                        help="override the profile's measured steps (train) or measured generations (generate)")
    parser.add_argument("--scenario", choices=SCENARIOS, default="single", help="the study's scenario (default single)")
    dist = parser.add_argument_group("distributed scenario (training)")
    dist.add_argument("--mode", choices=[m.value for m in DistributedMode], default=None,
                      help="ddp: PyTorch DistributedDataParallel across the instances (the transformer's one mode)")
    dist.add_argument("--role", choices=[r.value for r in DistributedRole], default=None,
                      help="this process's role in the cluster (worker)")
    dist.add_argument("--task-index", type=int, default=None, help="this worker's index in the cluster")
    dist.add_argument("--cluster", default=None, help='JSON {"worker": ["host:port", ...]}')
    shared = parser.add_argument_group("shared-resource scenario")
    shared.add_argument("--condition", choices=CONDITIONS, default=None,
                        help="how this job shares the machine (required with --scenario shared)")
    shared.add_argument("--tenants", type=int, default=None, help="jobs sharing the machine (default 1)")
    parser.add_argument("--loop", action="store_true",
                        help="after warm-up, repeat windows of the measured steps (generations) until SIGTERM "
                             "(a background load)")


def usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with this combination of arguments (argparse checks each one alone)."""
    distributed = args.scenario == "distributed"
    if distributed and args.task != TransformerTask.TRAIN.value:
        cluster_problem: str | None = "--scenario distributed trains (--task train): generation runs on one instance"
    elif args.mode is not None and args.mode != DistributedMode.DDP.value:
        cluster_problem = f"--mode {args.mode} is not the transformer's: its distributed training is --mode ddp"
    else:
        cluster_problem = None
    problem = scenario_problem(args, cluster_problem) or below_minimum(args, {"batch_size": 1, "warmup_steps": 1})
    if problem is not None:
        return problem
    if args.measured_steps is not None and args.measured_steps < (2 if args.task == TransformerTask.TRAIN.value else 1):
        return "--measured-steps must be at least 2 (train) or 1 (generate)"
    if distributed and args.loop:
        return "--loop is for a background load, not for a distributed job (its workers step together)"
    return None


command("transformer")(_transformer_args)(run_from("dlbench.workloads.transformer.main", Framework.PYTORCH))
