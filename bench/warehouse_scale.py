"""Report generation and the explorer's queries on a warehouse of 1 million generated samples.

A year of weekly scheduled runs (52) x 4 platforms x (2 models x 2 data kinds x single + 2 and 4
tenants) x 3 repetitions, each execution with its case samples plus per-step samples (the bulk of
a real warehouse) up to ``--samples`` rows, on SQLite and on a private PostgreSQL server (tests/support/pg.py;
skipped when its binaries are missing). Prints, per database: the load time, the report's time
(goal < 10 s) and each explorer query's time through the real FastAPI app (goal < 1 s; first call
and the median of ``--repeat``), and the regression step's.

    .venv/bin/python bench/warehouse_scale.py [--samples 1000000] [--only sqlite|postgresql]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUNS, PLATFORMS, BENCHMARKS, REPS = 52, 4, 2 * 2 * 3, 3
CASE_SAMPLES_PER_EXECUTION = (4 * 2 + 8 * 5) / 12  # single: 2, shared: 5 (4 of the 12 benchmarks single)


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    first_start = time.perf_counter()
    fn()
    first = time.perf_counter() - first_start
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return first, statistics.median(times) if times else first


def bench(url: str, samples: int, repeat: int, out: Path) -> list[tuple[str, float, float, float]]:
    from fastapi.testclient import TestClient
    from sqlalchemy import func, select

    from dlbench.reports import build_report
    from dlbench.reports.analysis.regression import detect
    from dlbench.ui.app import create_app
    from dlbench.warehouse import db
    from dlbench.warehouse.models import Sample
    from tools.ui_history import generate_history

    engine = db.upgrade(db.engine_for(url))
    executions = RUNS * PLATFORMS * BENCHMARKS * REPS
    extra = max(0, round((samples - executions * CASE_SAMPLES_PER_EXECUTION) / executions))
    start = time.perf_counter()
    runs = generate_history(engine, runs=RUNS, extra_samples=extra, seed=42)
    load_s = time.perf_counter() - start
    with engine.connect() as conn:
        count = conn.scalar(select(func.count()).select_from(Sample))
    print(f"  {engine.dialect.name}: {count:,} samples, {executions:,} executions, {len(runs)} runs "
          f"(generated and inserted in {load_s:.1f} s)")
    latest = runs[-1]
    client = TestClient(create_app(engine))
    quarter = {"since": runs[-13][len("scheduled__"):][:10], "until": latest[len("scheduled__"):][:10]}

    def get(path: str, **params: object) -> Callable[[], object]:
        def call() -> object:
            response = client.get(path, params=params)
            assert response.status_code == 200, response.text[:300]
            return response.json()
        return call

    checks: list[tuple[str, Callable[[], object], float]] = [
        ("report (build_report, latest run)", lambda: build_report(engine, latest, out / engine.dialect.name), 10.0),
        ("regression step (detect, latest run)", lambda: detect(engine, latest), 10.0),
        ("explorer: options", get("/api/options"), 1.0),
        ("explorer: comparison, latest run", get("/api/comparison"), 1.0),
        ("explorer: comparison, 2 runs, one model", get("/api/comparison", runs=runs[-2:], model="resnet50"), 1.0),
        ("explorer: comparison, 13 scheduled weeks", get("/api/comparison", **quarter), 1.0),
        ("explorer: trend over 52 weeks", get("/api/trend", model="resnet50", data="synthetic", scenario="single",
                                              metric="throughput", since=runs[0][len("scheduled__"):][:10],
                                              until=quarter["until"]), 1.0),
        ("explorer: capacity", get("/api/capacity", model="resnet50", data="synthetic"), 1.0),
        ("explorer: page", lambda: client.get("/").raise_for_status(), 1.0),
    ]
    results = []
    for name, fn, goal in checks:
        first, median = timed(fn, repeat)
        ok = "ok" if max(first, median) < goal else "SLOW"
        print(f"    {name:44} first {first * 1000:8.1f} ms   median {median * 1000:8.1f} ms   "
              f"(goal < {goal:g} s) {ok}")
        results.append((name, first, median, goal))
    engine.dispose()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=["sqlite", "postgresql"], default=None)
    args = parser.parse_args()
    slow = []
    with tempfile.TemporaryDirectory(prefix="dlbench-scale-") as tmp:
        out = Path(tmp)
        if args.only in (None, "sqlite"):
            slow += [r for r in bench(f"sqlite:///{out / 'warehouse.db'}", args.samples, args.repeat, out)
                     if max(r[1], r[2]) >= r[3]]
        if args.only in (None, "postgresql"):
            from tests.support.pg import pg_bin, postgres_server

            if pg_bin() is None:
                print("  postgresql: skipped (no server binaries: apt-get install postgresql)")
            else:
                with postgres_server() as url:
                    slow += [r for r in bench(url, args.samples, args.repeat, out) if max(r[1], r[2]) >= r[3]]
    print("all within their goals" if not slow else f"{len(slow)} over their goal: {[r[0] for r in slow]}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
