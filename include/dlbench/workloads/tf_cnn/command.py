"""The ``tf-cnn`` subcommand: TensorFlow image-classification training (the core study).

The scenarios of the study (section 3.3) are arguments, so that a controller can start the
processes of one job on several machines and aggregate their documents:

- ``single`` (default): one process trains on every GPU of its instance. Its parameters carry no
  ``scenario`` key, so single-instance documents are what they always were.
- ``distributed``: one process per role of a cluster (``--mode --role --task-index --cluster``,
  see :mod:`dlbench.workloads.tf_cnn.distributed`). The role is a label: every role's document has
  the same parameters.
- ``shared``: a job measured alone or beside others on one physical machine (``--condition``,
  ``--tenants``); a background load runs with ``--loop`` until the executor stops it.

This module holds what the command accepts; :mod:`dlbench.workloads.tf_cnn.main` runs it and is
imported only then (:func:`dlbench.workloads.cli.run_from`).
"""

from __future__ import annotations

import argparse

from dlbench.workloads.cli import command, run_from
from dlbench.workloads.profiles import DataKind, DistributedMode, DistributedRole, Framework, ModelName, Precision

SCENARIOS = ("single", "distributed", "shared")
CONDITIONS = ("alone", "with_background", "background", "tenant")


def _tf_cnn_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, choices=[m.value for m in ModelName])
    parser.add_argument("--framework", default=Framework.TENSORFLOW.value, choices=[f.value for f in Framework],
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


def below_minimum(args: argparse.Namespace, minimums: dict[str, int]) -> str | None:
    """The first of the optional integer arguments ``minimums`` (dest -> least value, in order) given
    below its least value, said as the command line spells it."""
    for dest, least in minimums.items():
        value = getattr(args, dest)
        if value is not None and value < least:
            return f"--{dest.replace('_', '-')} must be at least {least}"
    return None


def scenario_problem(args: argparse.Namespace, cluster_problem: str | None = None) -> str | None:
    """What is wrong with the scenario arguments together, for every command that takes them (tf-cnn,
    transformer): cluster arguments outside the distributed scenario, then the command's own
    ``cluster_problem`` with them, then the shared scenario's arguments."""
    given = [f"--{n.replace('_', '-')}" for n in ("mode", "role", "task_index", "cluster")
             if getattr(args, n) is not None]
    if given and args.scenario != "distributed":
        return f"{', '.join(given)} need --scenario distributed"
    if cluster_problem is not None:
        return cluster_problem
    if args.scenario != "shared" and (args.condition is not None or args.tenants is not None):
        return "--condition and --tenants need --scenario shared"
    if args.scenario == "shared" and args.condition is None:
        return f"--scenario shared needs --condition ({', '.join(CONDITIONS)})"
    return below_minimum(args, {"tenants": 1})


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


command("tf-cnn")(_tf_cnn_args)(run_from("dlbench.workloads.tf_cnn.main"))
