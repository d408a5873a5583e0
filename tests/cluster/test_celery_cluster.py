"""The benchmark DAG on a real multi-worker deployment, triggered through the REST API:
jobs routed to the queue of the workers next to their machines (two of three Celery workers that
share nothing local), and a worker SIGKILLed mid-job whose task the scheduler's heartbeat
detection fails and retries on the other worker of that queue."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from sqlalchemy import create_engine, text

from tests.support.cluster import JOB_TASK, NEAR_WORKERS

CONF = {"provider": "local", "platforms": ["bare_metal"], "suites": ["cpu", "disk"], "profile": "smoke",
        "repetitions": 2}


def warehouse_counts(url: str, run_id: str) -> tuple[int, int]:
    """(executions of the run, distinct job ids among them)."""
    engine = create_engine(url)
    with engine.connect() as conn:
        row = conn.execute(text("SELECT count(*), count(DISTINCT e.job_id) FROM executions e "
                                "JOIN runs r ON r.id = e.run_pk WHERE r.run_id = :run"), {"run": run_id}).one()
    engine.dispose()
    return int(row[0]), int(row[1])


def leaked_workloads(base: Path) -> list[str]:
    """Workload processes started from a directory of this cluster still alive."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if "dlbench.workloads" in cmd and cwd.startswith(str(base)):
            found.append(f"{pid}: {cmd[:200]}")
    return found


def check_run(cluster, api, run_id: str) -> list[dict]:
    tis = api.task_instances(run_id)
    jobs = [t for t in tis if t["task_id"] == JOB_TASK]
    assert jobs and all(t["state"] == "success" for t in jobs), [(t["map_index"], t["state"]) for t in jobs]
    # Routed: every job on the route's queue, run by a worker serving it; the default job task
    # had nothing to run.
    assert {(t["queue"]) for t in jobs} == {"near"} and {t["hostname"] for t in jobs} <= set(NEAR_WORKERS), jobs
    assert all(t["state"] == "skipped" for t in tis if t["task_id"] == "run_job"), tis
    key = re.sub(r"[^A-Za-z0-9._-]", "-", run_id)  # the run's name in the store and the warehouse
    assert (cluster.store / "results" / key / "run.info.json").exists(), key
    executions, distinct = warehouse_counts(cluster.warehouse_url, key)
    assert executions == distinct == len(jobs), (executions, distinct, len(jobs))  # nothing loaded twice
    reports = list((cluster.store / "reports" / key).glob("*.html"))
    assert reports, f"no report in the shared store for {run_id}"
    documents = [p for p in (cluster.store / "results" / key).glob("*.json") if p.name != "run.info.json"]
    assert len(documents) == len(jobs), sorted(p.name for p in documents)
    secrets = api.get("/api/v2/variables", limit=500)["variables"]
    assert not [v["key"] for v in secrets if v["key"].startswith("dlbench_secret__")], "run secrets left behind"
    assert not leaked_workloads(cluster.base)
    return tis


def test_jobs_spread_over_both_workers(cluster, api):
    started = time.monotonic()
    run_id = api.trigger(CONF)
    assert api.wait_run(run_id, timeout=240) == "success", api.task_instances(run_id)
    tis = check_run(cluster, api, run_id)
    hosts = {t["hostname"] for t in tis if t["hostname"]}
    assert set(NEAR_WORKERS) <= hosts <= set(cluster.workers), hosts
    jobs_hosts = {t["hostname"] for t in tis if t["task_id"] == JOB_TASK}
    print(f"run {run_id}: {len(tis)} task instances on {sorted(hosts)}, jobs on {sorted(jobs_hosts)}, "
          f"{time.monotonic() - started:.0f} s")


def test_killed_worker_task_retried_on_the_other(cluster, api):
    started = time.monotonic()
    run_id = api.trigger(CONF)
    deadline = time.monotonic() + 180
    victim = None
    while victim is None and time.monotonic() < deadline:
        for t in api.task_instances(run_id):
            if t["task_id"] == JOB_TASK and t["state"] == "running" and t["hostname"] in cluster.workers:
                victim = t
                break
        else:
            time.sleep(0.5)
    assert victim is not None, "no job ran"
    time.sleep(1)  # inside the job, not at its start
    cluster.kill(victim["hostname"], signal.SIGKILL)
    killed_at = time.monotonic()
    # The workload runs in its own session: it outlives its killed worker until it ends by itself.
    orphans = leaked_workloads(cluster.workers[victim["hostname"]])
    assert api.wait_run(run_id, timeout=300) == "success", api.task_instances(run_id)
    tries = api.tries(run_id, JOB_TASK, victim["map_index"])
    states = [(t["try_number"], t["state"], t["hostname"]) for t in tries]
    assert len(tries) >= 2, states
    first, last = tries[0], tries[-1]
    assert first["hostname"] == victim["hostname"] and first["state"] == "failed", states
    survivor = next(n for n in NEAR_WORKERS if n != victim["hostname"])  # the other worker of queue "near"
    assert last["hostname"] == survivor and last["state"] == "success", states
    check_run(cluster, api, run_id)
    print(f"run {run_id}: killed {victim['hostname']} in map index {victim['map_index']} "
          f"({len(orphans)} workload process(es) outlived it); tries {states}; "
          f"{time.monotonic() - killed_at:.0f} s from the kill to the end, {time.monotonic() - started:.0f} s in all")
