"""Command line of the workloads: ``python -m dlbench.workloads <command> ...``.

Every benchmark command shares the same options (``--out``, ``--run-id``, ``--job-id``,
``--repetition``, ``--platform``, ``--profile``, ``--profile-spec``) and writes one result document.
A user profile travels as ``--profile-spec JSON`` (its resolved fields): the machine that runs the
job needs neither the user's file nor Airflow. Every document records the profile's name and
digest in its labels (``profile``, ``profile_digest``). Exit status:
0 ok, 1 the workload failed (the document says why; also when SIGTERM stopped a workload whose
normal end it is not), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from dlbench.workloads import harness
from dlbench.workloads.profiles import (
    PROFILES_FILE_ENV,
    Framework,
    Profile,
    ProfileError,
    all_profiles,
    get_profile,
    profile_digest,
    profile_from_argument,
    register_profile,
)
from dlbench.workloads.result import Platform, ResultDocument, json_schema
from dlbench.workloads.training import frameworks

Command = tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
COMMANDS: dict[str, Command] = {}
"""Benchmark subcommands: name -> (add arguments, run). Suites register here."""


def command(name: str) -> Callable[[Callable[[argparse.ArgumentParser], None]], Callable]:
    def register(add_args: Callable[[argparse.ArgumentParser], None]) -> Callable:
        def with_run(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
            COMMANDS[name] = (add_args, run)
            return run

        return with_run

    return register


def load(module: str) -> ModuleType:
    """A module of the workloads imported by name when it is needed, not when this module is: the
    suites' command modules (:data:`SUITE_MODULES`) and the code a command runs. Registering every
    command then stays light, and a workload's process (whose age is the document's
    ``elapsed_time``, from process start) imports only what the command it runs needs."""
    return importlib.import_module(module)


def run_from(module: str, framework: Framework | None = None) -> Callable[[argparse.Namespace], int]:
    """A command's run that lives in ``module`` (its ``main(args) -> int``), imported by :func:`load`
    when the command runs. ``framework``: the one training framework the command runs on, whatever
    its arguments (Fathom and dltools: TensorFlow); the others are hidden from its process before
    ``module`` loads (:func:`~dlbench.workloads.training.frameworks.isolate`). A command whose
    framework is an argument (``tf-cnn``) isolates when it loads its trainer."""

    def run(args: argparse.Namespace) -> int:
        if framework is not None:
            frameworks.isolate(framework)
        main: Callable[[argparse.Namespace], int] = load(module).main
        return main(args)

    return run


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="where to write the result JSON document")
    parser.add_argument("--run-id", default="adhoc", help="benchmark run this execution belongs to")
    parser.add_argument("--job-id", default=None, help="unique id of this execution (default: random)")
    parser.add_argument("--repetition", type=int, default=0)
    parser.add_argument("--platform", choices=[p.value for p in Platform], default=None)
    parser.add_argument("--profile", default="smoke",
                        help="profile name: built-in, from DLBENCH_PROFILES_FILE, or given by --profile-spec")
    parser.add_argument("--profile-spec", default=None, metavar="JSON",
                        help="the profile's resolved fields (a user profile this machine does not have)")


def profiles_file() -> str | None:
    """The user profiles file of this machine: ``DLBENCH_PROFILES_FILE`` in the workload's own
    environment (a person running ``python -m dlbench.workloads`` by hand sets it; the pipeline
    never relies on it: a user profile travels as ``--profile-spec``). The workload's own interface,
    read here, where the workload starts: the profile loaders take the path and read no environment."""
    return os.environ.get(PROFILES_FILE_ENV, "").strip() or None


_hook_registered: list[bool] = []
_used_profile: list[Profile] = []
"""The profile of the command being run; the hook below labels its document."""


def _label_profile(doc: ResultDocument) -> Callable[[], None]:
    """Harness hook: name and digest of the profile into the document's labels, so results of a
    profile redefined under the same name stay distinguishable in the warehouse."""
    if _used_profile:
        doc.labels.setdefault("profile", _used_profile[-1].name)
        doc.labels.setdefault("profile_digest", profile_digest(_used_profile[-1], doc.benchmark.suite))
    return lambda: None


def resolve_profile(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Profile:
    """The command's profile: ``--profile-spec`` under ``--profile``, else the name looked up here
    (built-ins, this machine's :func:`profiles_file`); a bad one ends with exit status 2 naming the
    field or the allowed names. The profile is registered: the suite's code resolves the same one
    by name (the one place a workload's profile is made known to this process)."""
    try:
        if args.profile_spec:
            profile = profile_from_argument(args.profile_spec)
            if profile.name != args.profile:
                parser.error(f"--profile-spec describes profile {profile.name!r}, not --profile {args.profile!r}")
            return register_profile(profile)
        return register_profile(get_profile(args.profile, profiles_file()))
    except ProfileError as exc:
        parser.error(str(exc))
    except ValueError:
        parser.error(f"argument --profile: unknown profile {args.profile!r} (allowed: "
                     f"{', '.join(all_profiles(profiles_file()))}; a user profile travels with --profile-spec)")
    raise AssertionError("unreachable")


def refused(command: str, problem: str | None) -> bool:
    """Whether a command's combination of arguments is refused (``problem``: its ``usage_problem``),
    printed as argparse prints its own errors; the command then exits with status 2."""
    if problem is None:
        return False
    print(f"python -m dlbench.workloads {command}: error: {problem}", file=sys.stderr)
    return True


def common_kwargs(args: argparse.Namespace) -> dict:
    return {
        "out": args.out,
        "run_id": args.run_id,
        "job_id": args.job_id,
        "repetition": args.repetition,
        "platform": Platform(args.platform) if args.platform else None,
    }


def _make_tfrecords_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="directory for train-* shards")
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=96)
    parser.add_argument("--num-classes", type=int, default=10)


SUITE_MODULES = ("dlbench.workloads.counters", "dlbench.workloads.cnn.command", "dlbench.workloads.micro.commands",
                 "dlbench.workloads.dltools.command", "dlbench.workloads.transformer.command",
                 "dlbench.workloads.fathom.command", "dlbench.workloads.serving.command")
"""Modules whose import registers counter hooks and subcommands (light: heavy imports happen in the run)."""


def load_commands() -> dict[str, Command]:
    for module in SUITE_MODULES:
        load(module)
    return COMMANDS


def main(argv: list[str] | None = None) -> int:
    load_commands()
    parser = argparse.ArgumentParser(prog="python -m dlbench.workloads", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (add_args, _) in sorted(COMMANDS.items()):
        p = sub.add_parser(name, help=f"run the {name} benchmark")
        add_common(p)
        add_args(p)
    _make_tfrecords_args(sub.add_parser("make-tfrecords", help="write a small ImageNet-format TFRecord set"))
    net_serve = sub.add_parser("net-serve", help="serve the network benchmark's endpoints (iperf3 + latency echo)")
    net_serve.add_argument("--bind", default="127.0.0.1")
    net_serve.add_argument("--port", type=int, default=5201)
    net_serve.add_argument("--seconds", type=float, default=None,
                           help="stop after this long (default: until killed)")
    llm = sub.add_parser("serving-server", help="the serving suite's server alone until stopped, for a load "
                                                "generator on another machine (serving --server-url)")
    llm.add_argument("--bind", default="127.0.0.1")
    llm.add_argument("--port", type=int, default=8100)
    llm.add_argument("--profile", default="smoke")
    llm.add_argument("--profile-spec", default=None, metavar="JSON")
    sub.add_parser("schema", help="print the result document's JSON Schema")
    sub.add_parser("profiles", help="print the profiles as JSON")
    args = parser.parse_args(argv)

    if args.command == "schema":
        print(json.dumps(json_schema(), indent=2))
        return 0
    if args.command == "profiles":
        print(json.dumps({k: v.model_dump(mode="json") for k, v in all_profiles(profiles_file()).items()}, indent=2))
        return 0
    if args.command == "net-serve":
        serve: Callable[[str, int, float | None], None] = load("dlbench.workloads.micro.network").serve
        serve(args.bind, args.port, args.seconds)
        return 0
    if args.command == "serving-server":
        resolve_profile(parser, args)
        return int(load("dlbench.workloads.serving.standalone").main(args))
    if args.command == "make-tfrecords":
        write: Callable[..., list[Path]] = load("dlbench.workloads.cnn.tf_data").write_imagenet_tfrecords
        paths = write(
            args.out, images=args.images, shards=args.shards, image_size=args.image_size, num_classes=args.num_classes
        )
        print("\n".join(str(p) for p in paths))
        return 0
    _used_profile[:] = [resolve_profile(parser, args)]
    if not _hook_registered:
        harness.register_counter_hook(_label_profile)
        _hook_registered.append(True)
    try:
        return COMMANDS[args.command][1](args)
    except harness.Stopped as exc:
        print(f"dlbench workload {args.command}: {exc}", file=sys.stderr)
        # The document is written: leave at once, without the interpreter's shutdown. A helper
        # thread may be stuck in a native call (a barrier for a peer that died: shutdown could
        # hang, harness.interruptible), and a native library's exit-time teardown can abort a
        # process stopped mid-rendezvous (a PyTorch worker stopped while waiting for its peer at
        # the TCPStore ended with SIGABRT instead of status 1, once, on a loaded machine).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    except Exception as exc:  # noqa: BLE001 - the document already records it; say it plainly on stderr
        print(f"dlbench workload {args.command} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
