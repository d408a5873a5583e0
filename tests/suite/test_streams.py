"""The test suite's own machinery (tests/streams.py, tests/turns.py, the stream rule in
tests/conftest.py): the streams are a partition of the suite, an exclusive turn on Ironic runs
alone and goes before turns that arrive after it, the summary counts what the JUnit files say and
fails on any failure or abnormal stream, the tail streams start after the first main stream has
ended and the last step after every stream."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests import streams, turns
from tests.support.prereqs import ROOT

COLLECT = """
import json, sys
import pytest

class Collected:
    ids: list = []

    def pytest_collection_finish(self, session):
        Collected.ids = [item.nodeid for item in session.items]

found = {}
for stream in sys.argv[2:]:
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", f"--stream={stream}"], plugins=[Collected()])
    assert code == 0, (stream, code)
    found[stream] = Collected.ids
open(sys.argv[1], "w").write(json.dumps(found))
"""
"""Collects the whole suite once per ``--stream`` value in ONE process: the test modules (TensorFlow,
Airflow...) are imported by the first collection only (five processes took 73 s of the local stream)."""


def _collected(tmp_path: Path, *streams_: str) -> dict[str, set[str]]:
    """{stream: the node ids ``pytest --collect-only --stream=<stream>`` selects}."""
    out = tmp_path / "collected.json"
    subprocess.run([sys.executable, "-c", COLLECT, str(out), *streams_], cwd=ROOT, capture_output=True, text=True,
                   timeout=300, check=True)
    return {stream: set(ids) for stream, ids in json.loads(out.read_text()).items()}


def test_the_streams_are_a_partition_of_the_suite(tmp_path):
    names = ("devcloud", "local", "kubernetes", "alone")
    parts = _collected(tmp_path, "all", *names)
    everything = parts.pop("all")
    assert all(parts.values()), {name: len(part) for name, part in parts.items()}
    assert sum(len(part) for part in parts.values()) == len(everything)  # no test in two streams
    together = set().union(*parts.values())
    assert together == everything, (everything - together, together - everything)
    assert {streams.LAST, *streams.STREAMS} == set(names)
    devcloud, local, kubernetes, alone = (parts[name] for name in names)
    # the Kubernetes tier on the second node pool, whole; the Magnum tier (its clusters are
    # Ironic nodes of the main pool) stays in the devcloud stream
    assert kubernetes == {t for t in everything if t.startswith("tests/kubernetes/")}
    assert {t for t in everything if t.startswith("tests/magnum/")} <= devcloud
    # a test marked alone, beside its module's tests that are not; quiet tests, of either stream
    flag = "tests/workloads/test_load_flag.py::"
    assert f"{flag}test_a_job_without_competing_load_is_not_flagged" in alone
    assert f"{flag}test_quiet_labels_are_not_flagged_whatever_the_load_average" in local
    assert "tests/container/test_clocks.py::test_docker_launch_to_end_stops_at_the_exit" in alone
    assert "tests/execution/test_clocks_ssh.py::test_ssh_process_launch_to_end_stops_at_the_exit" in alone
    # a devcloud tier, a devcloud fixture outside one, and their neighbours that stay local
    ironic = {t for t in everything if t.startswith("tests/ironic/")}
    assert ironic and ironic <= devcloud
    lock = "tests/execution/test_machine_lock.py::"
    assert f"{lock}test_a_node_claim_over_ssh_waits_and_a_dropped_connection_releases_it" in devcloud  # fleet
    assert f"{lock}test_two_jobs_on_this_host_never_overlap" in local
    assert "tests/suite/test_streams.py::test_the_streams_are_a_partition_of_the_suite" in local


def _hold(exclusive: bool, seconds: float, log: list, name: str) -> None:
    with turns.turn(exclusive):
        log.append(("start", name, time.monotonic()))
        time.sleep(seconds)
        log.append(("end", name, time.monotonic()))


def _until(check, timeout: float = 10) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _held(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_an_ironic_wide_test_runs_alone_and_before_tests_that_came_after_it(tmp_path, monkeypatch):
    """An ``ironic_wide`` test (exclusive turn) waits for the second pool's running test, and a
    test of that stream that arrives meanwhile waits for it (the turnstile)."""
    lock = tmp_path / "ironic.lock"
    monkeypatch.setenv(turns.ENV, str(lock))
    log: list = []
    first = threading.Thread(target=_hold, args=(False, 1.0, log, "shared-1"))
    waiting = threading.Thread(target=_hold, args=(True, 0.5, log, "exclusive"))
    later = threading.Thread(target=_hold, args=(False, 0.2, log, "shared-2"))
    first.start()
    _until(lambda: log)  # shared-1 runs
    waiting.start()
    _until(lambda: _held(lock.with_name(lock.name + ".turnstile")))  # the exclusive test is in line
    later.start()  # arrives after the exclusive test: must not overtake it
    for thread in (first, waiting, later):
        thread.join(30)
    order = [(what, name) for what, name, _ in sorted(log, key=lambda e: e[2])]
    assert order == [("start", "shared-1"), ("end", "shared-1"), ("start", "exclusive"), ("end", "exclusive"),
                     ("start", "shared-2"), ("end", "shared-2")], order


def test_shared_turns_are_held_at_once(tmp_path, monkeypatch):
    """Two shared turns are held at once: the first waits, inside its turn, for the second to be
    inside its own (an exclusive turn would make this wait time out)."""
    monkeypatch.setenv(turns.ENV, str(tmp_path / "ironic.lock"))
    inside = threading.Event()
    met: list[bool] = []

    def first() -> None:
        with turns.turn(False):
            met.append(inside.wait(20))

    def second() -> None:
        with turns.turn(False):
            inside.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    threads[1].start()
    for thread in threads:
        thread.join(30)
    assert met == [True]


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.reports.test_a" name="test_ok" time="1.5"/>
<testcase classname="tests.reports.test_a" name="test_bad" time="2.0"><failure message="boom"/></testcase>
<testcase classname="tests.ironic.test_b" name="test_skip" time="0.1">
  <skipped type="pytest.skip" message="prerequisite missing: no devcloud (run `make devcloud-up`)"/></testcase>
<testcase classname="tests.ironic.test_b" name="test_waited" time="3.0">
  <properties><property name="turn_wait_s" value="2.5"/></properties></testcase>
</testsuite></testsuites>"""


def test_the_summary_counts_the_junit_files_and_fails_on_a_failure(tmp_path, capsys):
    (tmp_path / "local.xml").write_text(JUNIT)
    (tmp_path / "local.log").write_text("pytest output\n")
    step = streams.Step("local", ["python", "-m", "pytest"], {}, tmp_path / "local.xml", tmp_path / "local.log", rc=1)
    status = streams.report({"local": [step]}, 10.0, tmp_path)
    out = capsys.readouterr().out
    assert status == 1
    assert out.rstrip().splitlines()[-1] == "2 passed, 1 failed, 1 skipped"
    assert (tmp_path / "summary.txt").read_text() == "2 passed, 1 failed, 1 skipped\n"
    assert "1 test(s): no devcloud (run `make devcloud-up`)" in out
    assert step.waited == 2.5
    tiers = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ") and "passed" in line}
    assert tiers["reports"][1:7] == ["1", "passed", "1", "failed", "0", "skipped"]
    assert tiers["ironic"][1:7] == ["1", "passed", "0", "failed", "1", "skipped"]


def test_a_stream_that_ended_abnormally_fails_the_run_even_with_nothing_failed(tmp_path, capsys):
    ok = JUNIT.replace('<failure message="boom"/>', "")
    (tmp_path / "local.xml").write_text(ok)
    (tmp_path / "local.log").write_text("")
    fine = streams.Step("local", ["pytest"], {}, tmp_path / "local.xml", tmp_path / "local.log", rc=0)
    assert streams.report({"local": [fine]}, 1.0, tmp_path) == 0
    crashed = streams.Step("devcloud", ["pytest"], {}, tmp_path / "devcloud.xml", tmp_path / "devcloud.log", rc=2)
    assert streams.report({"local": [fine], "devcloud": [crashed]}, 1.0, tmp_path) == 1
    assert "devcloud: pytest exited 2" in capsys.readouterr().out
    empty = streams.Step("devcloud", ["pytest"], {}, tmp_path / "none.xml", tmp_path / "none.log", rc=5)
    assert streams.report({"local": [fine], "devcloud": [empty]}, 1.0, tmp_path) == 0  # nothing selected there


def test_the_alone_step_starts_after_every_stream_has_ended(tmp_path):
    """The runner itself, on one small file: the local stream runs its label tests, the devcloud
    and kubernetes streams select nothing, the kubernetes stream (a tail) starts only once the
    first main stream has ended (here the devcloud stream, which selects nothing), and the alone
    step (its tests deselected by -k) only once every stream has; the summary counts every step."""
    out = subprocess.run([sys.executable, "-m", "tests.streams", "--logs", str(tmp_path), "--",
                          "tests/workloads/test_load_flag.py", "-k", "labels or thresholds or window",
                          "-p", "no:cacheprovider"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=False).stdout
    events = [line.split("] ", 1)[1] for line in out.splitlines() if line.startswith("[") and ": " in line]
    ended = [i for i, e in enumerate(events) if e.startswith(tuple(f"{s}: ended" for s in streams.STREAMS))]
    started = [i for i, e in enumerate(events) if e.startswith("alone: started")]
    assert len(ended) == 3 and len(started) == 1 and started[0] > max(ended), events
    first_ended, first = min((next(i for i, e in enumerate(events) if e.startswith(f"{s}: ended")), s)
                             for s in streams.MAIN)
    assert next(i for i, e in enumerate(events) if e.startswith("kubernetes: started")) > first_ended, events
    assert f"started after {first})" in out, out[-3000:]  # the first to end, named in the summary
    assert out.rstrip().splitlines()[-1] == "3 passed, 0 failed, 0 skipped", out[-3000:]
    assert {p.name for p in tmp_path.glob("*.log")} == {f"{name}.log" for name in (*streams.STREAMS, streams.LAST)}
