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
"""

from __future__ import annotations

import argparse
import sys

from dlbench.workloads import harness
from dlbench.workloads.cli import command, common_kwargs
from dlbench.workloads.profiles import DataKind, ModelName, get_profile
from dlbench.workloads.result import Benchmark

SCENARIOS = ("single", "distributed", "shared")
CONDITIONS = ("alone", "with_background", "background", "tenant")


def _tf_cnn_args(parser: argparse.ArgumentParser) -> None:
    from dlbench.workloads.tf_cnn.distributed import MODES, ROLES

    parser.add_argument("--model", required=True, choices=[m.value for m in ModelName])
    parser.add_argument("--data", default="synthetic", choices=[d.value for d in DataKind])
    parser.add_argument("--data-dir", default=None, help="ImageNet-format TFRecords (for --data real)")
    parser.add_argument("--warmup-steps", type=int, default=None, help="override the profile")
    parser.add_argument("--measured-steps", type=int, default=None, help="override the profile")
    parser.add_argument("--batch-size", type=int, default=None, help="override the profile's batch_size_per_device")
    parser.add_argument("--scenario", choices=SCENARIOS, default="single", help="the study's scenario (default single)")
    dist = parser.add_argument_group("distributed scenario")
    dist.add_argument("--mode", choices=MODES, default=None,
                      help="distributed_replicated (the study's: parameter servers) or multi_worker_mirrored")
    dist.add_argument("--role", choices=ROLES, default=None, help="this process's role in the cluster")
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


def _usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with this combination of arguments (argparse checks each one alone)."""
    distributed = args.scenario == "distributed"
    given = [f"--{n.replace('_', '-')}" for n in ("mode", "role", "task_index", "cluster")
             if getattr(args, n) is not None]
    if given and not distributed:
        return f"{', '.join(given)} need --scenario distributed"
    if args.scenario != "shared" and (args.condition is not None or args.tenants is not None):
        return "--condition and --tenants need --scenario shared"
    if args.scenario == "shared" and args.condition is None:
        return f"--scenario shared needs --condition ({', '.join(CONDITIONS)})"
    if args.tenants is not None and args.tenants < 1:
        return "--tenants must be at least 1"
    if args.batch_size is not None and args.batch_size < 1:
        return "--batch-size must be at least 1"
    if distributed and args.loop:
        return "--loop is for a background load, not for a distributed job (its workers step together)"
    return None


@command("tf-cnn")(_tf_cnn_args)
def _tf_cnn(args: argparse.Namespace) -> int:
    from dlbench.workloads.tf_cnn import distributed, runner

    problem = _usage_problem(args)
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
            import tensorflow as tf

            # Graph mode for the whole process, before any TF op (and before the helper thread,
            # which takes its execution mode from this default).
            tf.compat.v1.disable_eager_execution()
            distributed.run_worker_interruptibly(
                doc, lambda d: distributed.train_replicated_worker(d, role, **train))
        else:
            distributed.run_worker_interruptibly(
                doc, lambda d: distributed.train_mirrored_worker(d, role, **train))
    return 0
