"""One load point against a running server, driven by vLLM's own load generator (``vllm bench
serve``), and what it measured.

Why this generator (issue 41, tried offline on a 2-core machine): it ships in the same package as
the server (nothing more to install or keep in step), runs offline with a local tokenizer, keeps
every request's record (time to first token, each inter-token gap, end-to-end latency, lengths,
errors) and computes goodput against per-request limits; GuideLLM needed 6 GB of dependencies
and a worker process per core, inference-perf Python 3.12, and AIPerf inflated TTFT 3-4x on two
cores. It is called through its command-line arguments (``add_cli_args``/``main`` of
``vllm.benchmarks.serve``: what ``vllm bench serve`` parses), so a user can repeat any point by
hand with the same flags (:func:`generator_args` is that command line).
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlbench.workloads.profiles import ServingSpec

PERCENTILES = (50, 90, 99)
LATENCIES = ("ttft", "tpot", "itl", "e2el")
"""vLLM's names: time to first token, time per output token (after the first), inter-token
latency (every gap), end-to-end latency."""


@dataclass(frozen=True)
class LoadPoint:
    """A closed loop of ``concurrency`` requests in flight, or Poisson arrivals at ``rate`` per second."""

    concurrency: int | None = None
    rate: float | None = None

    @property
    def kind(self) -> str:
        return "concurrency" if self.concurrency is not None else "poisson"

    @property
    def level(self) -> float:
        """Its point in its sweep: requests in flight, or requests per second."""
        return float(self.concurrency if self.concurrency is not None else self.rate or 0.0)

    @property
    def labels(self) -> dict[str, str | int | float]:
        """The samples' labels: which point of which sweep (a case of its own in the report)."""
        if self.concurrency is not None:
            return {"load": "concurrency", "concurrency": self.concurrency}
        return {"load": "poisson", "rate": round(float(self.rate or 0.0), 3)}

    def __str__(self) -> str:
        return f"concurrency {self.concurrency}" if self.concurrency is not None else f"{self.rate:g} requests/s"


@dataclass
class PointResult:
    point: LoadPoint
    completed: int
    failed: int
    duration: float
    """Seconds from the first request sent to the last answer."""
    request_throughput: float
    output_throughput: float
    goodput: float
    """Requests per second that met both limits of the target (vLLM's ``request_goodput``)."""
    percentiles_ms: dict[str, dict[int, float]]
    """``{"ttft": {50: ms, 90: ms, 99: ms}, ...}``."""
    records: list[dict[str, Any]] = field(default_factory=list)

    def meets(self, spec: ServingSpec) -> bool:
        """Both 99th percentiles within the target, and every request answered."""
        return (self.failed == 0 and self.percentiles_ms["ttft"][99] <= spec.target.ttft_p99_ms
                and self.percentiles_ms["tpot"][99] <= spec.target.tpot_p99_ms)


def requests_for(spec: ServingSpec, point: LoadPoint) -> int:
    """Requests at a point: the profile's, and at a rate at least four seconds of arrivals (fewer
    would end before the queue a rate builds shows in the percentiles)."""
    if point.rate is None:
        return spec.requests
    return max(spec.requests, math.ceil(4 * point.rate))


def generator_args(spec: ServingSpec, base_url: str, tokenizer: Path, point: LoadPoint, seed: int) -> list[str]:
    """``vllm bench serve``'s arguments for ``point``: random prompts of exactly the profile's
    lengths (end of sequence ignored, so every request generates ``output_tokens``), streamed."""
    args = ["--backend", "openai", "--base-url", base_url, "--endpoint", "/v1/completions",
            "--model", spec.model.name, "--tokenizer", str(tokenizer), "--dataset-name", "random",
            "--random-input-len", str(spec.input_tokens), "--random-output-len", str(spec.output_tokens),
            "--random-range-ratio", "0", "--num-prompts", str(requests_for(spec, point)), "--ignore-eos",
            "--percentile-metrics", ",".join(LATENCIES), "--metric-percentiles", ",".join(map(str, PERCENTILES)),
            "--goodput", f"ttft:{spec.target.ttft_p99_ms:g}", f"tpot:{spec.target.tpot_p99_ms:g}",
            "--seed", str(seed), "--disable-tqdm", "--save-detailed"]
    if point.concurrency is not None:
        args += ["--request-rate", "inf", "--max-concurrency", str(point.concurrency)]
    else:
        args += ["--request-rate", f"{point.rate:g}", "--burstiness", "1.0"]
    return args


def run_point(spec: ServingSpec, base_url: str, tokenizer: Path, point: LoadPoint, seed: int) -> PointResult:
    """Drive one point and return what it measured (the generator's own report is not printed:
    a job's output is its document)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return parse_result(point, _generate(spec, base_url, tokenizer, point, seed))


def run_points(spec: ServingSpec, base_urls: Sequence[str], tokenizer: Path, point: LoadPoint,
               seeds: Sequence[int]) -> list[PointResult]:
    """The same point offered to every server at the same moment (tenants sharing a machine), one
    generator per server in a thread of this process; their results in ``base_urls``' order. The
    first exception of any generator is raised once all have ended."""
    if len(base_urls) == 1:
        return [run_point(spec, base_urls[0], tokenizer, point, seeds[0])]
    # One redirection around every thread: redirect_stdout swaps the process's sys.stdout, so
    # threads that each entered their own would restore one another's.
    with contextlib.redirect_stdout(io.StringIO()), ThreadPoolExecutor(len(base_urls)) as pool:
        futures = [pool.submit(_generate, spec, url, tokenizer, point, seed)
                   for url, seed in zip(base_urls, seeds, strict=True)]
        wait(futures)
        return [parse_result(point, future.result()) for future in futures]


def _generate(spec: ServingSpec, base_url: str, tokenizer: Path, point: LoadPoint, seed: int) -> dict[str, Any]:
    # heavy: the generator imports PyTorch and Transformers; only a serving job needs it
    from vllm.benchmarks.serve import add_cli_args, main

    # heavy: vLLM's own argument parser (as above), the one its generator's arguments are made for
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    result: dict[str, Any] = main(parser.parse_args(generator_args(spec, base_url, tokenizer, point, seed)))
    return result


def parse_result(point: LoadPoint, result: dict[str, Any]) -> PointResult:
    """The generator's result (its ``--save-detailed`` JSON) as a :class:`PointResult`: the
    percentiles it computed, and one record per request (seconds)."""
    percentiles = {name: {p: float(result[f"p{p}_{name}_ms"]) for p in PERCENTILES} for name in LATENCIES}
    records = []
    for i, ttft in enumerate(result.get("ttfts", [])):
        output = int(result["output_lens"][i])
        latency = float(result["latencies"][i])
        error = result["errors"][i] if i < len(result.get("errors", [])) else ""
        records.append({
            "request": i, "input_tokens": int(result["input_lens"][i]), "output_tokens": output,
            "ttft_s": float(ttft), "e2e_s": latency,
            "tpot_s": (latency - float(ttft)) / (output - 1) if output > 1 and not error else None,
            "itl_s": [float(x) for x in result["itls"][i]], "start_s": float(result["start_times"][i]),
            **({"error": str(error)[:500]} if error else {})})
    return PointResult(point=point, completed=int(result["completed"]), failed=int(result.get("failed", 0)),
                       duration=float(result["duration"]), request_throughput=float(result["request_throughput"]),
                       output_throughput=float(result["output_throughput"]),
                       goodput=float(result.get("request_goodput") or 0.0), percentiles_ms=percentiles,
                       records=records)


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile with linear interpolation between the closest ranks (numpy's
    default, which vLLM's generator uses): the same definition for pooled tenants' requests."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def pooled(results: Sequence[PointResult]) -> PointResult:
    """One point as the tenants sharing a machine saw it: the rates per server (the mean over the
    servers: what one of them served beside the others), every request's latency pooled for the
    percentiles (a latency target covers every request the machine serves), each record marked with
    its server. One server's result is returned as its generator computed it."""
    if len(results) == 1:
        return results[0]
    records = [{**record, "server": index} for index, result in enumerate(results) for record in result.records]
    ok = [r for r in records if not r.get("error")]
    values = {"ttft": [r["ttft_s"] for r in ok], "e2el": [r["e2e_s"] for r in ok],
              "tpot": [r["tpot_s"] for r in ok if r["tpot_s"] is not None],
              "itl": [gap for r in ok for gap in r["itl_s"]]}
    n = len(results)
    return PointResult(
        point=results[0].point, completed=sum(r.completed for r in results), failed=sum(r.failed for r in results),
        duration=max(r.duration for r in results),
        request_throughput=sum(r.request_throughput for r in results) / n,
        output_throughput=sum(r.output_throughput for r in results) / n,
        goodput=sum(r.goodput for r in results) / n,
        percentiles_ms={name: {p: 1000.0 * percentile(values[name], p) for p in PERCENTILES} for name in LATENCIES},
        records=records)
