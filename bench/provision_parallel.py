"""Provisioning K machines in parallel vs one, and the prepare stage's cost per machine.

Runs the real machine lifecycle (``MachineBackend`` + the Ironic driver) against an Ironic
(default: the devcloud) and prints, from one run with interleaved rounds (A B A B: these machines
are noisy):

- wall time of acquire (deploy -> SSH -> prepare) and of release for 1 machine and for K
  machines, and the ratio K/1 (goal <= 1.1: machines are provisioned in parallel);
- the prepare stage per machine for the project's node image (detected: nothing to do) and for a
  stock image (workload package + dependencies pushed over SSH), median seconds.

    .venv/bin/python bench/provision_parallel.py --nodes 3 --rounds 2 \\
        --node-image file://$PWD/build/node-image/dlbench-node.tar.zst
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))


def lifecycle(count: int, image: str, args: argparse.Namespace) -> dict[str, float]:
    from dlbench.providers.base import Tags
    from dlbench.providers.registry import backend_for
    from dlbench.request import parse_request

    request = parse_request({
        "provider": "ironic", "platforms": ["bare_metal"], "suites": ["cpu"], "data": ["synthetic"],
        "ironic": {"cloud": args.cloud, "clouds_file": args.clouds_file, "resource_class": args.resource_class,
                   "nodes": {"bare_metal": count}, "image_source": image, "poll_interval": args.poll,
                   "prepare_timeout": 1800}})
    run_id = f"bench{uuid.uuid4().hex[:8]}"
    tags = Tags(run_id=run_id, dag_id="bench", dag_run_id=run_id, expires_at=datetime.now(UTC) + timedelta(hours=1))
    backend = backend_for(request.provider)
    started = time.monotonic()
    targets = []
    try:
        targets = backend.acquire(request, tags)
        acquired = time.monotonic() - started
    finally:
        released_at = time.monotonic()
        backend.release(request, tags, targets)
    return {"acquire": acquired, "release": time.monotonic() - released_at,
            "prepare": statistics.median(t.timings.get("prepare", 0.0) for t in targets)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3, help="K: machines provisioned at once")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--node-image", default=f"file://{ROOT}/build/node-image/dlbench-node.tar.zst")
    parser.add_argument("--stock-image", default="file:///tmp/dlbench-ironic-test-image.raw",
                        help="an image_source that boots the stock image (devcloud: any other file)")
    parser.add_argument("--skip-stock", action="store_true", help="do not measure the stock-image prepare")
    parser.add_argument("--cloud", default="devcloud")
    parser.add_argument("--clouds-file", default=str(ROOT / ".devcloud" / "clouds.yaml"))
    parser.add_argument("--resource-class", default="dlbench-bm")
    parser.add_argument("--poll", type=float, default=0.2)
    args = parser.parse_args()
    stock = Path(args.stock_image.removeprefix("file://"))
    if not stock.exists():
        stock.write_bytes(b"\0" * 4096)

    one: list[dict[str, float]] = []
    many: list[dict[str, float]] = []
    for round_ in range(args.rounds):  # interleaved: 1, K, 1, K ...
        one.append(lifecycle(1, args.node_image, args))
        many.append(lifecycle(args.nodes, args.node_image, args))
        print(f"round {round_ + 1}: 1 machine acquire {one[-1]['acquire']:.1f} s release {one[-1]['release']:.1f} s;"
              f" {args.nodes} machines acquire {many[-1]['acquire']:.1f} s release {many[-1]['release']:.1f} s",
              flush=True)
    med = {phase: (statistics.median(r[phase] for r in one), statistics.median(r[phase] for r in many))
           for phase in ("acquire", "release")}
    print(f"\nprovisioning {args.nodes} machines vs 1 (median of {args.rounds} interleaved rounds):")
    for phase, (a, b) in med.items():
        print(f"  {phase:8} 1: {a:6.1f} s   {args.nodes}: {b:6.1f} s   ratio {b / a:.2f}  (goal <= 1.10)")
    print(f"\nprepare per machine, node image: {statistics.median(r['prepare'] for r in one):.2f} s "
          "(detected: nothing to install)")
    if not args.skip_stock:
        cold = lifecycle(1, f"file://{stock}", args)
        print(f"prepare per machine, stock image: {cold['prepare']:.1f} s (workload package + pinned "
              f"dependencies pushed and installed over SSH; acquire total {cold['acquire']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
