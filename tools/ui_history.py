"""Generated multi-run history for the explorer's tests, the regression tests and the scale bench.

Rows are bulk-inserted with SQLAlchemy Core (no result documents), shaped like what the loader
writes: weekly scheduled runs, one environment per platform, single-instance tf_cnn cases and
shared-resource cells with N tenants (their ``aggregate`` document: throughput under load,
alone, degradation %), and optionally per-step samples (the bulk of a real warehouse).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, func, insert, select

from dlbench.warehouse.load import benchmark_framework
from dlbench.warehouse.models import Benchmark, Environment, Execution, Run, Sample

PLATFORMS = ("bare_metal", "container_on_bare_metal", "virtual_machine", "container_on_vm")
PLATFORM_FACTOR = {"bare_metal": 1.0, "container_on_bare_metal": 0.98, "virtual_machine": 0.9,
                   "container_on_vm": 0.88}
DEGRADATION_PER_TENANT = {"bare_metal": 6.0, "container_on_bare_metal": 6.5, "virtual_machine": 9.0,
                          "container_on_vm": 10.0}
"""Generated throughput degradation (%) per extra tenant on a host."""
MODEL_RATE = {"resnet50": 200.0, "alexnet": 1500.0, "inception3": 130.0, "vgg16": 110.0}


@dataclass
class Step:
    """A generated regression: ``platform``'s throughput times ``factor`` from run ``from_run`` on."""

    platform: str
    from_run: int
    factor: float = 0.85


def _hash(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def generate_history(engine: Engine, *, runs: int = 10, platforms: Sequence[str] = PLATFORMS,
                     models: Sequence[str] = ("resnet50", "alexnet"), data: Sequence[str] = ("synthetic", "real"),
                     repetitions: int = 3, tenants: Sequence[int] = (2, 4), hardware: str = "NVIDIA V100",
                     step: Step | None = None, extra_samples: int = 0, seed: int = 0,
                     start: datetime = datetime(2026, 1, 4, 2, 0, tzinfo=UTC), prefix: str = "scheduled__",
                     parameters: dict[str, object] | None = None) -> list[str]:
    """Insert ``runs`` weekly runs into a migrated warehouse; returns their run ids, oldest first.
    ``parameters``: added to every benchmark's parameters (e.g. another ``framework``)."""
    rng = random.Random(seed)
    with engine.begin() as conn:
        next_id = {m: (conn.scalar(select(func.max(m.id))) or 0) + 1
                   for m in (Run, Environment, Benchmark, Execution, Sample)}

        def ids(model: type, n: int = 1) -> int:
            first = next_id[model]
            next_id[model] += n
            return first

        envs = {}
        for platform in platforms:
            details = {"platform": platform, "hardware": hardware, "generated": True}
            existing_env = conn.scalar(select(Environment.id).where(Environment.fingerprint == _hash(details)))
            if existing_env is not None:  # a second history on the same machines
                envs[platform] = existing_env
                continue
            envs[platform] = ids(Environment)
            conn.execute(insert(Environment), [dict(
                id=envs[platform], fingerprint=_hash(details), platform=platform, hostname=f"gen-{platform}",
                cpu_model="Generated Xeon", cpu_count=32, memory_bytes=256 << 30, gpu_model=hardware, gpu_count=1,
                in_container=platform.startswith("container"), details=details)])
        benches = []  # (id, model, data, tenants or None)
        for model in models:
            for kind in data:
                for n in (None, *tenants):
                    params = {"model": model, "data": kind, "batch_size_per_device": 32, "profile": "generated",
                              "scenario": "single" if n is None else "shared", **(parameters or {})}
                    if n is not None:
                        params.update(interference="tenants", tenants=n)
                    existing = conn.scalar(select(Benchmark.id).where(
                        Benchmark.suite == "tf_cnn", Benchmark.name == model,
                        Benchmark.parameters_hash == _hash(params)))
                    if existing is None:
                        existing = ids(Benchmark)
                        conn.execute(insert(Benchmark), [dict(id=existing, suite="tf_cnn", name=model,
                                                              parameters_hash=_hash(params), parameters=params,
                                                              framework=benchmark_framework("tf_cnn", params))])
                    benches.append((existing, model, kind, n))
        run_ids, run_rows, exec_rows, sample_rows = [], [], [], []
        for r in range(runs):
            started = start + timedelta(days=7 * r)
            run_id = f"{prefix}{started:%Y-%m-%dT%H-%M-%S}"
            run_pk = ids(Run)
            run_ids.append(run_id)
            run_rows.append(dict(id=run_pk, run_id=run_id, dag_id="dlbench_benchmark", profile="generated",
                                 provider="generated", scheduled=prefix.startswith("scheduled"), started_at=started,
                                 loaded_at=started + timedelta(hours=3), config={}, tags=None))
            run_effect = {p: rng.gauss(1.0, 0.01) for p in platforms}
            for platform in platforms:
                factor = PLATFORM_FACTOR.get(platform, 0.9) * run_effect[platform]
                if step is not None and step.platform == platform and r >= step.from_run:
                    factor *= step.factor
                for bench_id, model, kind, n in benches:
                    rate = MODEL_RATE.get(model, 100.0) * factor * (0.95 if kind == "real" else 1.0)
                    for rep in range(repetitions):
                        exec_id = ids(Execution)
                        exec_rows.append(dict(
                            id=exec_id, job_id=f"{run_id}-{platform}-{bench_id}-{rep}", run_pk=run_pk,
                            environment_id=envs[platform], benchmark_id=bench_id, platform=platform,
                            repetition=rep, status="ok", started_at=started + timedelta(minutes=rep),
                            finished_at=started + timedelta(minutes=rep + 1),
                            labels={} if n is None else {"role": "aggregate"}))
                        alone = rate * rng.gauss(1.0, 0.02)
                        labels = {"model": model, "data": kind}
                        values = []
                        if n is None:
                            values += [("throughput", alone, "images/s", labels),
                                       ("elapsed_time", 6400.0 / alone * 32, "s", labels)]
                        else:
                            deg = DEGRADATION_PER_TENANT.get(platform, 8.0) * (n - 1) * rng.gauss(1.0, 0.05)
                            loaded = alone * (1 - deg / 100)
                            values += [("throughput", loaded, "images/s", {**labels, "condition": "loaded"}),
                                       ("throughput_alone", alone, "images/s", {**labels, "condition": "alone"}),
                                       ("degradation_throughput", deg, "%", labels),
                                       ("degradation_elapsed_time", deg * 1.02, "%", labels),
                                       ("tenants_throughput_sum", loaded * n, "images/s", labels)]
                        values += [("step_time", 32 / alone * rng.gauss(1.0, 0.03), "s", {"step": i})
                                   for i in range(extra_samples)]
                        first = ids(Sample, len(values))
                        sample_rows.extend(dict(id=first + i, execution_id=exec_id, ordinal=i, metric=m, value=v,
                                                unit=u, labels=lab) for i, (m, v, u, lab) in enumerate(values))
        conn.execute(insert(Run), run_rows)
        for chunk in range(0, len(exec_rows), 20000):
            conn.execute(insert(Execution), exec_rows[chunk:chunk + 20000])
        for chunk in range(0, len(sample_rows), 50000):
            conn.execute(insert(Sample), sample_rows[chunk:chunk + 50000])
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE")
    return run_ids
