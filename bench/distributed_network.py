"""Distributed training's network share: 1 PS + 2 workers on three devcloud nodes (1 Gbit/s links)
vs the same three processes on this host's loopback.

The devcloud's nodes are namespaces of this host, so both variants share the same CPU cores: the
difference between them is the network path (veth + 1 Gbit/s shaping + the nodes' own stacks vs
loopback), which is what the core study found distributed TensorFlow bound by. One run, interleaved
rounds (loopback, nodes, loopback, nodes: these machines are noisy), median cluster images/s:

    .venv/bin/python bench/distributed_network.py --rounds 2 --model alexnet --measured-steps 20

Prints both throughputs, the ratio nodes/loopback, the measured link (iperf3 between the worker
and parameter-server nodes) and the per-step time of each variant.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))


def cell(run_id: str, platform: str, args: argparse.Namespace):  # noqa: ANN201 - a Job
    from dlbench.jobs import Job, job_id_for
    from dlbench.workloads.profiles import Scenario
    from dlbench.workloads.result import Platform

    job_args = {"model": args.model, "data": "synthetic", "mode": args.mode, "measured_steps": args.measured_steps}
    return Job(job_id=job_id_for(run_id, platform, "tf_cnn", job_args, 0, Scenario.DISTRIBUTED), run_id=run_id,
               platform=Platform(platform), suite="tf_cnn", command="tf-cnn", args=job_args, profile="smoke",
               scenario=Scenario.DISTRIBUTED)


def measure(targets: list, run_id: str, platform: str, args: argparse.Namespace, out: Path) -> dict[str, float]:
    from dlbench.pipeline.scenarios import run_scenario
    from dlbench.workloads.result import Status

    job = cell(run_id, platform, args)
    doc = run_scenario(job, targets, 1800, lambda j: out / f"{j.job_id}.json")
    if doc.status is not Status.OK:
        raise SystemExit(f"{platform} distributed job failed: {doc.error}")
    steps = [s.value for s in doc.samples if s.metric == "worker_measured_time"]
    net = [s.value for s in doc.samples if s.metric == "network_tcp_throughput"]
    return {"throughput": doc.sample("throughput").value,
            "step": statistics.fmean(steps) / args.measured_steps if steps else float("nan"),
            "link": net[0] if net else float("nan")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", default="alexnet")
    parser.add_argument("--mode", default="distributed_replicated")
    parser.add_argument("--measured-steps", type=int, default=20)
    parser.add_argument("--node-image", default=f"file://{ROOT}/build/node-image/dlbench-node.tar.zst")
    parser.add_argument("--cloud", default="devcloud")
    parser.add_argument("--clouds-file", default=str(ROOT / ".devcloud" / "clouds.yaml"))
    parser.add_argument("--resource-class", default="dlbench-bm")
    args = parser.parse_args()

    from dlbench.pipeline import steps

    run = f"benchdist{uuid.uuid4().hex[:8]}"
    remote = steps.validate({
        "provider": "ironic", "platforms": ["bare_metal"], "suites": ["tf_cnn"], "scenarios": ["distributed"],
        "ironic": {"cloud": args.cloud, "clouds_file": args.clouds_file, "resource_class": args.resource_class,
                   "nodes": {"bare_metal": 3}, "image_source": args.node_image, "poll_interval": 0.2,
                   "expiry_hours": 1}})
    local = steps.validate({"platforms": ["bare_metal"], "suites": ["tf_cnn"], "scenarios": ["distributed"]})
    tags = steps.tags_for(run, "bench")
    nodes = steps.provision(remote, tags)
    here = steps.provision(local, tags)
    from dlbench.execution.targets import Target

    nodes_t, here_t = [Target.from_xcom(t) for t in nodes], [Target.from_xcom(t) for t in here]
    loop: list[dict[str, float]] = []
    link: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="dlbench-bench-") as tmp:
            for round_ in range(args.rounds):  # interleaved: loopback, nodes, loopback, nodes
                loop.append(measure(here_t, f"{run}-l{round_}", "bare_metal", args, Path(tmp)))
                link.append(measure(nodes_t, f"{run}-n{round_}", "bare_metal", args, Path(tmp)))
                print(f"round {round_ + 1}: loopback {loop[-1]['throughput']:.2f} images/s, "
                      f"devcloud nodes {link[-1]['throughput']:.2f} images/s", flush=True)
    finally:
        steps.release(remote, tags, nodes)
        steps.release(local, tags, here)
    lo = statistics.median(r["throughput"] for r in loop)
    hi = statistics.median(r["throughput"] for r in link)
    print(f"\n{args.model} {args.mode}, 1 PS + 2 workers, median of {args.rounds} interleaved rounds:")
    step_lo = statistics.median(r["step"] for r in loop)
    step_hi = statistics.median(r["step"] for r in link)
    print(f"  loopback (3 processes, this host): {lo:7.2f} images/s  step {step_lo:.3f} s")
    print(f"  3 devcloud nodes (1 Gbit/s links): {hi:7.2f} images/s  step {step_hi:.3f} s")
    print(f"  ratio nodes / loopback: {hi / lo:.2f}  "
          f"(the network's share of distributed throughput: {(1 - hi / lo) * 100:.0f} %)")
    print(f"  link worker -> parameter server: {statistics.median(r['link'] for r in link):.2f} Gbit/s (iperf3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
