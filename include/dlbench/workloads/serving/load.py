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
    # heavy: the generator imports PyTorch and Transformers; only a serving job needs it
    from vllm.benchmarks.serve import add_cli_args, main

    # heavy: vLLM's own argument parser (as above), the one its generator's arguments are made for
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(generator_args(spec, base_url, tokenizer, point, seed))
    with contextlib.redirect_stdout(io.StringIO()):
        result = main(args)
    return parse_result(point, result)


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
