"""The serving suite's tests' shared parts: vLLM servers alive on this host, this host's vLLM
environment, and a serving run's documents written by the workload's own recording code (the report's
and the explorer's tests read them from a real warehouse)."""

from __future__ import annotations

import os
from pathlib import Path

from dlbench.execution import workload_env
from dlbench.workloads.profiles import Framework
from dlbench.workloads.result import Benchmark, Environment, Platform, ResultDocument
from dlbench.workloads.serving.capacity import Bound, Capacity
from dlbench.workloads.serving.load import LATENCIES, PERCENTILES, LoadPoint, PointResult
from dlbench.workloads.serving.main import add_capacity, add_point
from tests.support.prereqs import require, wait_for_build

SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def vllm_servers(containing: str = "") -> list[int]:
    """Live vLLM server processes (a container's are visible from the host too) whose command line
    holds ``containing`` (a job's model directory, say)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if SERVER_MODULE in cmd and containing in cmd:
            found.append(int(pid))
    return found


def serving_python() -> str:
    """The interpreter of this host's vLLM environment (``build/workload-env-vllm``), once a build of
    it beside the tests (.ci/run's ``CI_BACKGROUND``) has ended; a missing one is a missing
    prerequisite (``make workload-env-vllm``)."""
    wait_for_build(workload_env.SERVING.lock, str(workload_env.SERVING.directory))
    env = workload_env.local(Framework.VLLM)
    require(env.label == workload_env.SERVING.label,
            f"no current {workload_env.SERVING.directory} (make workload-env-vllm)")
    return env.python


# -- a serving run's documents ----------------------------------------------------------------

RUN = "serve41"
SPEED = {"bare_metal": 1.0, "container_on_bare_metal": 0.9}
"""The container serves 10 % fewer requests at the target, at every repetition."""
CAPACITY = (20.0, 20.1, 19.9)
"""Bare metal's capacity per repetition (requests/s)."""
RATES = (10.0, 20.0, 30.0)
PARAMETERS = {"profile": "smoke", "scenario": "single", "hidden_size": 256, "precision": "bf16", "input_tokens": 64,
              "output_tokens": 32, "ttft_p99_ms": 250.0, "tpot_p99_ms": 25.0}


def ttft_ms(rate: float, capacity: float) -> float:
    """A TTFT p99 that grows with the load and crosses 250 ms above the capacity."""
    return 100.0 * rate / capacity * 2.0


def point(load: LoadPoint, ttft: float, tokens: float) -> PointResult:
    percentiles = {name: {p: (ttft if name == "ttft" else 10.0) * (0.5 + p / 200) for p in PERCENTILES}
                   for name in LATENCIES}
    percentiles["ttft"][99] = ttft
    return PointResult(point=load, completed=8, failed=0, duration=1.0, request_throughput=float(load.rate or 1),
                       output_throughput=tokens, goodput=float(load.rate or 1), percentiles_ms=percentiles)


def documents() -> list[ResultDocument]:
    docs = []
    for rep, base in enumerate(CAPACITY):
        for platform, speed in SPEED.items():
            capacity = base * speed
            doc = ResultDocument(job_id=f"s-{platform}-{rep}", run_id=RUN, repetition=rep,
                                 benchmark=Benchmark(suite="serving", name="tiny-llama", parameters=PARAMETERS),
                                 environment=Environment(hostname=f"h-{platform[:4]}", platform=Platform(platform)),
                                 labels={"framework": "vllm", "host_cpus": "16", "host_steal_share": "0.0",
                                         "host_other_cpu_share": "0.01"})
            doc.add("startup_time", 25.0 / speed, "s")
            by_rate = {}
            for rate in RATES:
                by_rate[rate] = point(LoadPoint(rate=rate), ttft_ms(rate, capacity), tokens=rate * 32)
                add_point(doc, by_rate[rate])
            met = [r for r in RATES if by_rate[r].percentiles_ms["ttft"][99] <= 250.0]
            # What the search would have found: the bisection stops at the capacity itself.
            by_rate[capacity] = point(LoadPoint(rate=capacity), 250.0, tokens=capacity * 32)
            add_capacity(doc, Capacity(rate=capacity, bound=Bound.MEASURED, missed=30.0,
                                       tried=tuple((r, r in met) for r in RATES) + ((capacity, True),)), by_rate)
            docs.append(doc)
    return docs
