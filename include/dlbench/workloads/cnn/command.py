"""The ``tf-cnn`` subcommand: the core study's image-classification training, in any framework.

The scenarios of the study (section 3.3) are arguments, so that a controller can start the
processes of one job on several machines and aggregate their documents:

- ``single`` (default): one process trains on every GPU of its instance. Its parameters carry no
  ``scenario`` key, so single-instance documents are what they always were.
- ``distributed``: one process per role of a cluster (``--mode --role --task-index --cluster``,
  see :mod:`dlbench.workloads.training.cluster`). The role is a label: every role's document has
  the same parameters.
- ``shared``: a job measured alone or beside others on one physical machine (``--condition``,
  ``--tenants``); a background load runs with ``--loop`` until the executor stops it.

This module holds what the command accepts; :mod:`dlbench.workloads.cnn.main` runs it and is
imported only then (:func:`dlbench.workloads.cli.run_from`).
"""

from __future__ import annotations

import argparse

from dlbench.workloads.cli import command, run_from
from dlbench.workloads.profiles import (
    TRAINING_FRAMEWORKS,
    DataKind,
    DistributedMode,
    DistributedRole,
    Framework,
    ModelName,
    Precision,
)
from dlbench.workloads.training.scenario import CONDITIONS, SCENARIOS, below_minimum, scenario_problem


def _tf_cnn_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, choices=[m.value for m in ModelName])
    parser.add_argument("--framework", default=Framework.TENSORFLOW.value,
                        choices=[f.value for f in TRAINING_FRAMEWORKS],
                        help="the framework that trains the network (default tensorflow, the study's)")
    parser.add_argument("--precision", default=None, choices=[p.value for p in Precision],
                        help="override the profile's precision (fp32, tf32, bf16)")
    parser.add_argument("--data", default="synthetic", choices=[d.value for d in DataKind])
    parser.add_argument("--data-dir", default=None, help="ImageNet-format TFRecords (for --data real)")
    parser.add_argument("--warmup-steps", type=int, default=None, help="override the profile")
    parser.add_argument("--measured-steps", type=int, default=None, help="override the profile")
    parser.add_argument("--batch-size", type=int, default=None, help="override the profile's batch_size_per_device")
    parser.add_argument("--scenario", choices=SCENARIOS, default="single", help="the study's scenario (default single)")
    dist = parser.add_argument_group("distributed scenario")
    dist.add_argument("--mode", choices=[m.value for m in DistributedMode], default=None,
                      help="distributed_replicated (the study's: parameter servers) or multi_worker_mirrored "
                           "(tensorflow), ddp (pytorch), jax_distributed (jax)")
    dist.add_argument("--role", choices=[r.value for r in DistributedRole], default=None,
                      help="this process's role in the cluster")
    dist.add_argument("--task-index", type=int, default=None, help="this process's index among its role's tasks")
    dist.add_argument("--cluster", default=None,
                      help='JSON {"ps": ["host:port", ...], "worker": ["host:port", ...]} (no "ps" for '
                           "multi_worker_mirrored)")
    shared = parser.add_argument_group("shared-resource scenario")
    shared.add_argument("--condition", choices=CONDITIONS, default=None,
                        help="how this job shares the machine (required with --scenario shared)")
    shared.add_argument("--tenants", type=int, default=None, help="jobs sharing the machine (default 1)")
    parser.add_argument("--loop", action="store_true",
                        help="after warm-up, repeat windows of the measured steps until SIGTERM (a background load)")


def usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with this combination of arguments (argparse checks each one alone)."""
    distributed = args.scenario == "distributed"
    problem = scenario_problem(args) or below_minimum(args, {"batch_size": 1})
    if problem is not None:
        return problem
    if args.mode is not None and DistributedMode(args.mode) not in Framework(args.framework).distributed_modes:
        modes = ", ".join(m.value for m in Framework(args.framework).distributed_modes)
        return f"--mode {args.mode} is not a mode of {args.framework} (its modes: {modes})"
    if distributed and args.loop:
        return "--loop is for a background load, not for a distributed job (its workers step together)"
    return None


command("tf-cnn")(_tf_cnn_args)(run_from("dlbench.workloads.cnn.main"))
