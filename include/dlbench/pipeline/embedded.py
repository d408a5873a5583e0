"""``make run``: the main DAG, end to end, with Airflow's ``dag.test()``; Ctrl-C releases, then exits.

Airflow's own log is verbose; it goes to ``$DLBENCH_HOME/last-run.log`` while this prints one
line per finished task, then the comparison table and the report path. The run is a real Airflow
DAG run (metadata DB, XCom, mapping, setup/teardown), visible in the UI afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from dlbench import paths, settings
from dlbench.jobs import BENCHMARK_DAG_ID
from dlbench.pipeline import steps
from dlbench.pipeline.progress import Progress
from dlbench.polling import Deadline, until

_END = re.compile(r"\[DAG TEST\] end task task_id=(\S+) map_index=(-?\d+)")
_PREFIX = re.compile(r"^\S+ \[\w+\s*\] ")
_TRAILER = re.compile(r" \[[a-z_.]+\] loc=.*$")


def _follow(log_path: Path, out: TextIO, stop: threading.Event, started: float | None = None) -> None:
    """Echo the run's progress and the interesting lines of the Airflow log as they are written."""
    progress = Progress(started if started is not None else time.monotonic())
    with open(log_path, errors="replace") as handle:
        while not stop.is_set():
            line = handle.readline()
            if not line:
                time.sleep(0.2)  # not a wait: tails the log as it grows, until the run is over (stop)
                continue
            if (match := _END.search(line)) is not None:
                task, index = match.groups()
                if task != "run_job":  # run_job's end is its [k/N] line
                    out.write(f"  done: {task}{'' if index == '-1' else f'[{index}]'}\n")
            elif (shown := progress.line(_TRAILER.sub("", _PREFIX.sub("", line.strip())), time.monotonic())):
                out.write(shown + "\n")
            out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conf", default="{}", help="trigger-form values as JSON, e.g. '{\"profile\": \"smoke\"}'")
    parser.add_argument("--dag-id", default=BENCHMARK_DAG_ID)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_dag(args)
    return supervise(args, argv if argv is not None else sys.argv[1:])


SUPERVISORS = "embedded-runs"
"""Under ``$DLBENCH_HOME``: one ``<pid>.json`` per ``make run`` supervisor (its pid and start),
so a later one can tell DAG runs no live supervisor drives (:func:`close_orphaned_runs`)."""


def _live_supervisors(me: int) -> list[float]:
    """Start times of the other ``make run`` supervisors alive now (their files; a dead one's is removed)."""
    found = []
    for entry in (paths.home() / SUPERVISORS).glob("*.json"):
        try:
            data = json.loads(entry.read_text())
            pid, started = int(data["pid"]), float(data["started_at"])
        except (OSError, ValueError, KeyError, TypeError):
            entry.unlink(missing_ok=True)
            continue
        if pid == me:
            continue
        try:
            alive = b"dlbench.pipeline.embedded" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            alive = False
        if alive:
            found.append(started)
        else:
            entry.unlink(missing_ok=True)
    return found


def close_orphaned_runs(dag_id: str, me: int | None = None) -> list[str]:
    """Mark failed, with a note, the DAG runs of ``dag_id`` that the local metadata still shows
    queued or running although no live ``make run`` drives them: a SIGKILLed ``make run`` (no
    scheduler ever marks a ``dag.test()`` run). A run started before every live supervisor began
    cannot be any of theirs. Called by each ``make run`` before its own run (issue 38, item 4:
    killed runs end in Airflow; the janitor has released their resources by lease meanwhile).
    Returns the DAG run ids marked."""
    from airflow.models.dagrun import DagRun  # heavy: Airflow's models and ORM, only here
    from airflow.utils.session import create_session  # heavy (as above)
    from airflow.utils.state import DagRunState  # heavy (as above)

    live = _live_supervisors(os.getpid() if me is None else me)
    oldest = datetime.fromtimestamp(min(live), UTC) if live else None
    marked = []
    with create_session() as session:
        for run in session.query(DagRun).filter(DagRun.dag_id == dag_id,
                                                DagRun.state.in_([DagRunState.QUEUED, DagRunState.RUNNING])):
            if oldest is not None and (run.start_date is None or run.start_date >= oldest):
                continue  # may be a live make run's
            run.set_state(DagRunState.FAILED)
            run.note = ("Marked failed by make run: no live make run drove this DAG run (its process was killed); "
                        "the janitor releases what it held once its lease lapses.")
            session.merge(run)
            marked.append(str(run.run_id))
    return marked


def _register(started_at: float) -> Path:
    directory = paths.home() / SUPERVISORS
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{os.getpid()}.json"
    path.write_text(json.dumps({"pid": os.getpid(), "started_at": started_at}))
    return path


def supervise(args: argparse.Namespace, argv: list[str]) -> int:
    """Run the DAG in a child process (its own process group) and stay responsive to Ctrl-C:
    on SIGINT/SIGTERM the child is stopped, everything the run holds is released by tag (from
    the run's request and tags in Airflow's metadata), the DAG run is marked failed, exit 130.
    Inside ``dag.test()`` an interrupt would only fail the current task and the run would go on.
    First, DAG runs left running by a killed ``make run`` are marked failed (:func:`close_orphaned_runs`)."""
    started_at = time.time()
    registered = _register(started_at)
    try:
        try:
            for orphan in close_orphaned_runs(args.dag_id):
                print(f"dlbench: DAG run {orphan} of a killed make run marked failed", flush=True)
        except Exception as exc:  # noqa: BLE001 - the run itself matters more; say why nothing was marked
            print(f"dlbench: DAG runs of killed make runs not checked ({type(exc).__name__}: {exc})", flush=True)
        return _supervise(args, argv, started_at)
    finally:
        registered.unlink(missing_ok=True)


def _supervise(args: argparse.Namespace, argv: list[str], started_at: float) -> int:
    child = subprocess.Popen([sys.executable, "-m", "dlbench.pipeline.embedded", "--child", *argv],
                             start_new_session=True)
    interrupted: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        interrupted.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # No deadline: the run takes as long as it takes; the child's exit or a signal ends the wait.
        until(lambda: child.poll() is not None or bool(interrupted), None, 0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not interrupted:
        return child.returncode
    print("\ndlbench: interrupted: stopping the run, then releasing everything it holds ...", flush=True)
    _stop(child)
    released = release_interrupted(args.dag_id, started_at)
    print(f"dlbench: {released}", flush=True)
    return 130


def _stop(child: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        if until(lambda: child.poll() is not None, Deadline(grace, f"the run's process {child.pid} after {sig.name}"),
                 0.1):
            return


def release_interrupted(dag_id: str, since: float) -> str:
    """Release what the interrupted run holds, by tag, and mark its DAG run failed."""
    from airflow.models.dagrun import DagRun  # heavy: Airflow's models and ORM, only for an interrupted run
    from airflow.models.xcom import XComModel  # heavy (as above)
    from airflow.utils.session import create_session  # heavy (as above)
    from airflow.utils.state import DagRunState  # heavy (as above)

    with create_session() as session:
        run = (session.query(DagRun).filter(DagRun.dag_id == dag_id,
                                            DagRun.start_date >= datetime.fromtimestamp(since - 5, UTC))
               .order_by(DagRun.start_date.desc()).first())
        if run is None:
            return "the run had not started: nothing to release"

        def pulled(task_id: str) -> Any:  # an XCom value: JSON
            row = session.query(XComModel).filter(XComModel.dag_id == dag_id, XComModel.run_id == run.run_id,
                                                  XComModel.task_id == task_id, XComModel.key == "return_value",
                                                  XComModel.map_index == -1).first()
            if row is None:
                return None
            return row.value if not isinstance(row.value, str) else json.loads(row.value)

        request, tags, targets = pulled("validate_request"), pulled("run_tags"), pulled("provision")
        run.set_state(DagRunState.FAILED)
        session.merge(run)
        run_id = run.run_id
    if not request or not tags:
        return f"run {run_id} marked failed; nothing was provisioned yet"
    steps.release(dict(request), dict(tags), list(targets or []))
    return f"run {run_id} marked failed; released everything tagged with it"


@contextlib.contextmanager
def in_plan_order() -> Iterator[None]:
    """Make ``dag.test()`` run mapped task instances in map-index order, as the scheduler does.

    Why: ``dag.test()`` collects the task instances it may run into a ``set`` and runs them in the
    set's order, which Python's per-process hash seed scrambles (a task instance hashes its ids).
    The plan's order (:func:`dlbench.request.plan_jobs`: repetitions outermost, a cell's platforms
    back to back, rotated per repetition) would become a random one: a run cut short would miss
    whole cells and one platform's repetitions could land minutes apart from the other's. While
    this is active a task instance hashes to its map index + 1; a set of distinct small
    non-negative ints iterates in ascending order (its table is always larger than its size), so the
    mapped jobs, all scheduled together, run in plan order. Identity equality is unchanged, so sets
    and dicts of task instances behave as before. ``tests/dags/test_benchmark_e2e.py`` checks the
    order a real run took, so an Airflow that stops iterating that set is caught."""
    from airflow.models.taskinstance import TaskInstance  # heavy: Airflow itself, only in the run's child

    original = TaskInstance.__hash__

    def by_map_index(ti: TaskInstance) -> int:
        return int(ti.map_index) + 1 if ti.map_index is not None and ti.map_index >= 0 else original(ti)

    TaskInstance.__hash__ = by_map_index  # type: ignore[method-assign]  # patched on purpose, restored on exit
    try:
        yield
    finally:
        TaskInstance.__hash__ = original  # type: ignore[method-assign]  # the restore of the patch above


def run_dag(args: argparse.Namespace) -> int:
    conf = json.loads(args.conf)
    home = paths.home()
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / "last-run.log"
    log_path.write_text("")
    console = os.fdopen(os.dup(1), "w", buffering=1)
    console.write(f"dlbench: running DAG {args.dag_id} with {json.dumps(conf)} (Airflow log: {log_path})\n")

    stop = threading.Event()
    started = time.monotonic()
    follower = threading.Thread(target=_follow, args=(log_path, console, stop, started), daemon=True)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        follower.start()
        from airflow.dag_processing.dagbag import DagBag  # heavy: Airflow itself, in the child that runs the DAG

        bag = DagBag(dag_folder=settings.dags_folder())
        if args.dag_id not in bag.dags:
            raise SystemExit(f"DAG {args.dag_id} not found; import errors: {bag.import_errors}")
        with in_plan_order():
            run = bag.dags[args.dag_id].test(run_conf=conf)
        states = {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        time.sleep(0.5)  # not a wait: the follower's last half second to echo the run's final lines
        stop.set()
        follower.join(timeout=2)
    minutes = (time.monotonic() - started) / 60
    bad = {k: v for k, v in states.items() if v not in ("success", "skipped", "TaskInstanceState.SUCCESS",
                                                          "TaskInstanceState.SKIPPED")}
    console.write(f"\nDAG run {run.run_id}: {run.state} in {minutes:.1f} min; "
                  f"{len(states)} task instances, {len(bad)} not successful {sorted(bad) if bad else ''}\n")
    console.close()
    return 0 if str(run.state).endswith("success") else 1


if __name__ == "__main__":
    sys.exit(main())
