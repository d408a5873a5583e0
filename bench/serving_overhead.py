"""Does the product change what the load generator measures? The serving job against the same
load generator run by hand, on one server (issue 41, item 6: within 2 %).

One vLLM server (the smoke model, started as the job would start it) serves both sides, rounds
interleaved and alternating their order (A B, B A, ...: this 2-core machine is noisy, so the sides
are compared within a round, never across days):

- **product**: ``python -m dlbench.workloads serving --server-url URL`` in the serving
  environment, the whole job (harness, counters, its warm-up and the concurrency point, then its
  rate sweep, which is not compared);
- **by hand**: vLLM's generator alone in a fresh process of the same environment, with the same
  arguments (``dlbench.workloads.serving.load.generator_args``: what ``vllm bench serve`` parses),
  after the same 4 warm-up requests.

Compared at the concurrency point: output tokens/s and TTFT p50 (product / by hand, per round,
then the median ratio). Run it in the serving environment's absence and it says so.

The client does not share the server's cores: the server's whole process group (API server,
engine core, its OpenMP threads: ``VLLM_CPU_OMP_THREADS_BIND``) runs on ``--server-cpus`` and
each side's client on ``--client-cpus`` (``taskset``), as a client instance beside a server on a
cloud would. Without the split (the first measurement, stop 49) the two sides' rounds scattered
by ±30 %: the client's own CPU time was taken from the server it measured.

    .venv/bin/python bench/serving_overhead.py --rounds 6 --server-cpus 0 --client-cpus 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))

from dlbench.execution import workload_env  # noqa: E402 - after the path above
from dlbench.workloads.profiles import Framework, get_profile, profile_to_argument  # noqa: E402
from dlbench.workloads.result import ResultDocument  # noqa: E402
from dlbench.workloads.serving.load import LoadPoint, generator_args  # noqa: E402
from dlbench.workloads.serving.main import job_seeds  # noqa: E402
from dlbench.workloads.serving.model import write_model_dir  # noqa: E402
from dlbench.workloads.serving.server import Server  # noqa: E402

BY_HAND = """
import json, sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
add_cli_args(parser)
for argv in json.loads(sys.argv[1]):
    result = main(parser.parse_args(argv))
json.dump({"output_throughput": result["output_throughput"], "p50_ttft_ms": result["p50_ttft_ms"]},
          open(sys.argv[2], "w"))
"""


def pin_group(leader: int, cpus: str) -> int:
    """Every thread of every process in ``leader``'s process group onto ``cpus``; how many processes."""
    pids = subprocess.run(["pgrep", "-g", str(leader)], capture_output=True, text=True, check=True).stdout.split()
    for pid in pids:
        subprocess.run(["taskset", "-a", "-c", "-p", cpus, pid], capture_output=True, check=True)
    return len(pids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--server-cpus", default="0", help="the server's CPUs (taskset list; '' for no pinning)")
    parser.add_argument("--client-cpus", default="1", help="each client's CPUs (taskset list; '' for no pinning)")
    args = parser.parse_args()
    client = ["taskset", "-c", args.client_cpus] if args.client_cpus else []
    if args.server_cpus:  # the engine's OpenMP threads bind to these (vLLM's CPU backend), the rest below
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = args.server_cpus
    env = workload_env.local(Framework.VLLM)
    if env.label != workload_env.SERVING.label:
        print(f"no current {workload_env.SERVING.directory}: make workload-env-vllm", file=sys.stderr)
        return 2
    smoke = get_profile("smoke")
    spec = smoke.serving.model_copy(update={"concurrency": [args.concurrency], "rates": [64.0],
                                            "requests": args.requests, "bisection_steps": 0})
    profile = smoke.model_copy(update={"name": "serving-bench", "serving": spec})
    point = LoadPoint(concurrency=args.concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = write_model_dir(spec, work / "model")
        # the server as the job starts it, from the serving environment's interpreter
        server = Server(spec, model, log=work / "server.log", python=env.python)
        started = server.start()
        if args.server_cpus and server.process is not None:
            pinned = pin_group(server.process.pid, args.server_cpus)
            print(f"server's {pinned} processes on CPUs {args.server_cpus}, clients on {args.client_cpus or 'any'}")
        print(f"server ready in {started:.1f} s at {server.url}")
        warm_spec = spec.model_copy(update={"requests": 4})
        sides: dict[str, list[dict[str, float]]] = {"product": [], "by hand": []}
        try:
            for i in range(args.rounds):
                for side in (("product", "by hand") if i % 2 == 0 else ("by hand", "product")):
                    out = work / f"{side.replace(' ', '-')}-{i}.json"
                    if side == "product":
                        subprocess.run([*client, env.python, "-m", "dlbench.workloads", "serving", "--profile",
                                        profile.name, "--profile-spec", profile_to_argument(profile),
                                        "--server-url", server.url, "--out", str(out),
                                        # fresh prompts each round (seeds from the repetition): never
                                        # served from the prefix cache an earlier round filled
                                        "--repetition", str(i + 1)],
                                       check=True, capture_output=True, timeout=900, cwd=ROOT)
                        doc = ResultDocument.read(out)
                        labels = point.labels
                        sides[side].append({"output_throughput": doc.sample("output_throughput", **labels).value,
                                            "p50_ttft_ms": doc.sample("ttft_p50", **labels).value * 1000})
                    else:
                        # the job's own seeds for its warm-up and first point, at a repetition of its own
                        seeds = job_seeds(args.rounds + 1 + i)
                        warm = generator_args(warm_spec, server.url, model, LoadPoint(concurrency=1), next(seeds))
                        measured = generator_args(spec, server.url, model, point, next(seeds))
                        subprocess.run([*client, env.python, "-c", BY_HAND, json.dumps([warm, measured]), str(out)],
                                       check=True, capture_output=True, timeout=900, cwd=ROOT)
                        sides[side].append(json.loads(out.read_text()))
                    print(f"round {i} {side:8}: {sides[side][-1]['output_throughput']:8.1f} tokens/s, "
                          f"TTFT p50 {sides[side][-1]['p50_ttft_ms']:6.2f} ms", flush=True)
        finally:
            server.stop()
    for metric, label in (("output_throughput", "output tokens/s"), ("p50_ttft_ms", "TTFT p50 (ms)")):
        ratios = [p[metric] / h[metric] for p, h in zip(sides["product"], sides["by hand"], strict=True)]
        print(f"{label:16} product {statistics.median(p[metric] for p in sides['product']):9.2f}  by hand "
              f"{statistics.median(h[metric] for h in sides['by hand']):9.2f}  product/by hand per round "
              f"{', '.join(f'{r:.3f}' for r in ratios)}  median {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
