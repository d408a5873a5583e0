"""Run the whole suite as concurrent pytest streams and print one summary (``make test``).

Why streams: the suite waits on devcloud boots, SSH, Docker and Airflow start-up far more than
it computes (the host's 2 cores were 46 % idle over the serial run). The devcloud tests share
three nodes, the Nova hypervisors and the Magnum API, so they stay one ordered stream; every
other test needs nothing of the devcloud and runs in a second stream beside it. The multi-worker
cluster tier is a stream of its own (its own pytest session: it starts its own Airflow). The Kubernetes
tier needs only Ironic nodes and its own control planes: it deploys on the devcloud's second node
pool (:data:`SECOND_POOL_CLASS`), so it is a third stream. It and the cluster tier are the tails
(:data:`TAILS`): each starts when the first of the two main streams ends, beside the other's last
tests (the machine's idle end, not its busy start; a tail started after the longer stream would
lengthen the run by its whole time: run KK's local stream ended 450 s after the devcloud stream,
and then ran the cluster tier). Which stream a test belongs to is decided by ``tests/conftest.py`` (``--stream``),
from the test itself, so the streams are a partition of the collected suite: nothing is run twice
or left out.

Isolation (each stream is its own pytest process): its own Airflow home and metadata DB and
DLBENCH_HOME (``tests/conftest.py`` makes both per process), its own PostgreSQL server
(``tests/support/pg.py``, per process), its own machine-lock path (``DLBENCH_MACHINE_LOCK``) and its own
name for the tests that look at host-global state (``DLBENCH_TEST_STREAM``). The two streams
that deploy devcloud nodes use disjoint pools (``DLBENCH_IRONIC_TEST_RESOURCE_CLASS``) and one
Ironic: a test that stops or restarts it (``ironic_wide``) waits for the Kubernetes stream's
running test and holds the next ones back (``DLBENCH_TEST_IRONIC_LOCK``, ``tests/turns.py``).

Output: each stream writes its pytest output to ``<logs>/<stream>.log`` (printed whole at the
end, stream after stream), results as JUnit XML; the end is one line per tier (tests/<tier>)
with counts and time, the prerequisites that were missing with the command that installs them,
and the whole run's ``N passed, N failed, N skipped`` line. Any failure, error or a stream
that did not finish makes the exit status 1.

Tests marked ``alone`` (a bound on a share of the whole machine's CPU) or ``quiet`` (a timing
bound of the product: a clock within 50 ms, a heartbeat within 0.18 s) run in a last step, once
every stream has ended (:data:`LAST`), with nothing else running.

    python -m tests.streams [--cluster] [--logs DIR] [-- PYTEST ARGS...]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tests import budgets, turns

ROOT = Path(__file__).resolve().parents[1]
SECOND_POOL = "kubernetes"
"""The stream whose tests deploy on the devcloud's second node pool."""
STREAMS = ("devcloud", "local", SECOND_POOL)
"""The concurrent streams, in the order their logs are printed; ``tests/conftest.py`` owns the
rule that puts each test in exactly one of them (or in :data:`LAST`)."""
SECOND_POOL_CLASS = "dlbench-bm-2"
"""The second pool's Ironic resource class (docs/devcloud.md, the contract)."""
MAIN = ("devcloud", "local")
"""The streams that start at once; :data:`TAILS` wait for the first of them to end."""
CLUSTER = "cluster"
"""The multi-worker tier's stream (``--cluster``): its own pytest session, a tail."""
TAILS = (SECOND_POOL, CLUSTER)
"""Streams that start when the first :data:`MAIN` stream has ended: what waits most (Ironic
deploys, Airflow's heartbeats) fills the end of the longer one, where the cores idle."""
LAST = "alone"
"""The step after every stream has ended: the tests marked ``alone``, whose bound is a share of the
whole machine's CPU (another stream's test, or its daemons mid-tier, would be that share), and
those marked ``quiet``, whose bound is a timing of the product (run beside a stream, each waited
for the test another stream was running: 116 s of the local stream's critical path in run R)."""


@dataclass
class Step:
    """One pytest process of a stream (a stream runs its steps one after the other)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    junit: Path
    log: Path
    rc: int | None = None
    seconds: float = 0.0
    waited: float = 0.0
    """Seconds its tests waited for their turn on Ironic (tests/turns.py)."""
    after: tuple[Step, ...] = ()
    """Steps of which the first to end starts this one (:data:`TAILS`)."""
    ended: threading.Event = field(default_factory=threading.Event)
    ended_order: int = 0
    """Its place among the steps that have ended (1: the first), taken as its end line is said."""
    started_after: str | None = None
    """Which of :attr:`after` had ended when this one started (the summary names it)."""


@dataclass
class Tier:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    streams: set[str] = field(default_factory=set)


def _stream_env(stream: str, logs: Path) -> dict[str, str]:
    lock_dir = Path("/run/lock") if os.access("/run/lock", os.W_OK) else logs
    return {
        **os.environ,
        "DLBENCH_TEST_STREAM": stream,
        "DLBENCH_MACHINE_LOCK": str(lock_dir / f"dlbench-test-{stream}.lock"),
        turns.ENV: str(logs / "ironic.lock"),
        **({"DLBENCH_IRONIC_TEST_RESOURCE_CLASS": SECOND_POOL_CLASS} if stream == SECOND_POOL else {}),
        "PYTHONUNBUFFERED": "1",
    }


def _stream_step(stream: str, logs: Path, pytest_args: list[str]) -> Step:
    junit = logs / f"{stream}.xml"
    return Step(stream, [sys.executable, "-m", "pytest", "-ra", "--durations=15", f"--stream={stream}",
                         f"--junitxml={junit}", *pytest_args], _stream_env(stream, logs), junit, logs / f"{stream}.log")


def plan(logs: Path, pytest_args: list[str], cluster: bool) -> dict[str, list[Step]]:
    """The concurrent streams' steps (:data:`STREAMS`, and the cluster tier's with ``cluster``);
    a :data:`TAILS` stream waits for the first :data:`MAIN` stream to end. :data:`LAST` is not
    among them: :func:`last` is its step, run once they have all ended."""
    py = sys.executable
    streams = {stream: [_stream_step(stream, logs, pytest_args)] for stream in STREAMS}
    if cluster:
        # Its own stream name and machine-lock path, like every stream (its Airflow's workers do
        # not inherit them: tools/cluster.py passes them no DLBENCH_* variable).
        env = {**_stream_env(CLUSTER, logs), "DLBENCH_CLUSTER_TESTS": "1"}
        junit = logs / "cluster.xml"
        streams[CLUSTER] = [Step(CLUSTER, [py, "-m", "pytest", "-ra", "--durations=10", f"--junitxml={junit}",
                                           "tests/cluster"], env, junit, logs / "cluster.log")]
    for tail in TAILS:
        if tail in streams:
            streams[tail][0].after = tuple(streams[main][0] for main in MAIN)
    return streams


def last(logs: Path, pytest_args: list[str]) -> Step:
    """The :data:`LAST` step: its own pytest process, after the streams (:func:`main`)."""
    return _stream_step(LAST, logs, pytest_args)


_PRINT = threading.Lock()  # the streams' threads print whole lines


def _say(message: str, t0: float) -> None:
    elapsed = int(time.monotonic() - t0)
    with _PRINT:
        print(f"[{elapsed // 60:3d}m{elapsed % 60:02d}s] {message}", flush=True)


_ENDED = itertools.count(1)
_ENDED_LOCK = threading.Lock()


def _run_stream(steps: list[Step], t0: float) -> None:
    for step in steps:
        if step.after:  # the first of them to end starts this one
            while not any(s.ended.is_set() for s in step.after):
                time.sleep(0.5)
            # The first to end, not the first listed: both may have ended before this thread looked.
            step.started_after = min((s for s in step.after if s.ended.is_set()), key=lambda s: s.ended_order).name
        _say(f"{step.name}: started ({step.log})", t0)
        start = time.monotonic()
        try:
            with step.log.open("w") as out:
                step.rc = subprocess.call(step.argv, cwd=ROOT, env=step.env, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL)
            step.seconds = time.monotonic() - start
            with _ENDED_LOCK:  # the order the end lines are said in is the order the steps ended
                _say(f"{step.name}: ended, exit {step.rc}, {step.seconds:.0f} s ({_last_line(step.log)})", t0)
                step.ended_order = next(_ENDED)
        finally:
            with _ENDED_LOCK:
                step.ended_order = step.ended_order or next(_ENDED)
            step.ended.set()  # after its line; also on an error: a step waiting for this one must not hang


def _last_line(log: Path) -> str:
    lines = [line.strip("= \n") for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


PREREQ = re.compile(r"prerequisite missing: (.*)", re.S)


def collect(steps: list[Step]) -> tuple[dict[str, Tier], Counter[str], list[str]]:
    """Per-tier counts from the JUnit files; the missing prerequisites; problems of the run itself."""
    tiers: dict[str, Tier] = defaultdict(Tier)
    missing: Counter[str] = Counter()
    problems = []
    for step in steps:
        if step.rc not in (0, 1, 5):  # 1: tests failed (counted below); 5: nothing selected here
            problems.append(f"{step.name}: pytest exited {step.rc} (interrupted, internal or usage error): "
                            f"see {step.log}")
        if not step.junit.exists():
            if step.rc != 5:
                problems.append(f"{step.name}: no results ({step.junit} missing)")
            continue
        for case in ET.parse(step.junit).getroot().iter("testcase"):
            parts = (case.get("classname") or "").split(".")
            tier = tiers[parts[1] if len(parts) > 2 and parts[0] == "tests" else "(top)"]
            tier.streams.add(step.name)
            for prop in case.iter("property"):
                if prop.get("name") == "turn_wait_s":
                    step.waited += float(prop.get("value") or 0)
            tier.seconds += float(case.get("time") or 0)
            if case.find("failure") is not None or case.find("error") is not None:
                tier.failed += 1
            elif (skip := case.find("skipped")) is not None:
                tier.skipped += 1
                if match := PREREQ.search(skip.get("message") or ""):
                    missing[match.group(1).strip()] += 1
            else:
                tier.passed += 1
    return tiers, missing, problems


def report(streams: dict[str, list[Step]], wall: float, logs: Path) -> int:
    steps = [step for stream in streams.values() for step in stream]
    for step in steps:
        print(f"\n{'#' * 30} {step.name} stream: {' '.join(step.argv[1:])}\n", flush=True)
        sys.stdout.write(step.log.read_text(errors="replace") if step.log.exists() else "(no output)\n")
    tiers, missing, problems = collect(steps)
    limits = budgets.load()
    over: list[str] = []

    def judged(kind: str, name: str, seconds: float) -> budgets.Verdict:
        verdict = budgets.Verdict(seconds, limits.get((kind, name)))
        if verdict.over:
            over.append(f"{kind} {name} {verdict}")
        return verdict

    print(f"\n{'=' * 30} tiers (tests/<tier>: results, summed test time, stream, budget: docs/testing.md)")
    for name in sorted(tiers, key=lambda n: -tiers[n].seconds):
        t = tiers[name]
        print(f"  {name:<16} {t.passed:4d} passed {t.failed:3d} failed {t.skipped:3d} skipped "
              f"{t.seconds:7.0f} s  {','.join(sorted(t.streams)):<10} {judged('tier', name, t.seconds)}")
    print(f"{'=' * 30} streams (wall time, budget)")
    for stream, stream_steps in streams.items():
        seconds = sum(s.seconds for s in stream_steps)
        parts = ", ".join(f"{s.name} {s.seconds:.0f} s (exit {s.rc}, {s.waited:.0f} s waiting for its turn"
                          f"{f'; started after {s.started_after}' if s.started_after else ''})"
                          for s in stream_steps)
        print(f"  {stream:<16} {seconds:7.0f} s  {judged('stream', stream, seconds)}: {parts}")
    print(f"  {'whole run':<16} {wall:7.0f} s  {judged('ci', 'tests', wall)}")
    budget_line = f"budgets: {'; '.join(over)}" if over else "budgets: every tier and stream within its budget"
    print(f"{'=' * 30} {budget_line}")
    (logs / "budget.txt").write_text(budget_line + "\n")
    if missing:
        print(f"{'=' * 30} skipped for a missing prerequisite (install it, then run `make test` again)")
        for reason, count in missing.most_common():
            print(f"  {count:4d} test(s): {reason}")
    for problem in problems:
        print(f"ERROR: {problem}")
    passed = sum(t.passed for t in tiers.values())
    failed = sum(t.failed for t in tiers.values())
    skipped = sum(t.skipped for t in tiers.values())
    summary = f"{passed} passed, {failed} failed, {skipped} skipped"
    print(summary, flush=True)
    (logs / "summary.txt").write_text(summary + "\n")
    return 1 if failed or problems or not passed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", action="store_true", help="run the multi-worker tier after the local stream")
    parser.add_argument("--logs", type=Path, help="where the streams' logs and JUnit files go (default: a temp dir)")
    parser.add_argument("pytest_args", nargs="*", help="passed to every stream's pytest (after --)")
    args = parser.parse_args(argv)
    logs = args.logs or Path(tempfile.mkdtemp(prefix="dlbench-test-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    for stale in [*logs.glob("*.xml"), logs / "summary.txt", logs / "budget.txt"]:
        stale.unlink(missing_ok=True)
    streams = plan(logs.resolve(), args.pytest_args, args.cluster)
    alone = last(logs.resolve(), args.pytest_args)
    t0 = time.monotonic()
    _say(f"streams {', '.join(streams)} in parallel, then {LAST}; logs in {logs}", t0)
    threads = [threading.Thread(target=_run_stream, args=(steps, t0), name=name) for name, steps in streams.items()]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        _run_stream([alone], t0)
    except KeyboardInterrupt:
        _say("interrupted: waiting for the streams' pytest processes to stop", t0)
        for thread in threads:
            thread.join()
    return report({**streams, LAST: [alone]}, time.monotonic() - t0, logs)


if __name__ == "__main__":
    sys.exit(main())
