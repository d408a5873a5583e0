"""Nova VMs: boot-to-SSH time per server, and K servers in parallel vs one.

Runs the real machine lifecycle (``MachineBackend`` + the Nova driver) against a Nova (default:
the devcloud's, cloud ``devcloud-nova``) and prints, from one run with interleaved rounds
(A B A B: these machines are noisy), median seconds per phase:

- ``create_to_active`` (create request -> ACTIVE, per server), ``reachable_over_ssh`` (ACTIVE ->
  SSH login works), ``delete`` (delete request -> gone): the PKB convention, a capacity planner's
  figure in its own right;
- wall time of acquire (create -> ACTIVE -> SSH -> prepare) and release for 1 server and for K
  servers, and the ratio K/1 (goal <= 1.1: servers are created and made ready in parallel).

    .venv/bin/python bench/nova_boot.py --servers 3 --rounds 2

On the devcloud the hypervisor is Nova's fake driver and a server becomes a machine (namespace)
when it goes ACTIVE: these numbers measure Nova's API, scheduler, conductor and our lifecycle,
not a guest kernel's boot (see docs/devcloud-nova.md; a real TCG guest is in docs/local-vm.md).
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


def lifecycle(count: int, args: argparse.Namespace) -> dict[str, float]:
    from dlbench.providers.base import Tags
    from dlbench.providers.registry import backend_for
    from dlbench.request import parse_request

    request = parse_request({
        "provider": "nova", "platforms": ["virtual_machine"], "suites": ["cpu"], "data": ["synthetic"],
        "nova": {"cloud": args.cloud, "clouds_file": args.clouds_file, "flavor": args.flavor, "image": args.image,
                 "network": args.network, "nodes": {"virtual_machine": count}, "poll_interval": args.poll}})
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
    out = {"acquire": acquired, "release": time.monotonic() - released_at}
    for phase in ("create_to_active", "reachable_over_ssh", "prepare"):
        out[phase] = statistics.median(t.timings.get(phase, 0.0) for t in targets)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=3, help="K: servers provisioned at once")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cloud", default="devcloud-nova")
    parser.add_argument("--clouds-file", default=str(ROOT / ".devcloud" / "clouds.yaml"))
    parser.add_argument("--flavor", default="dlbench.small")
    parser.add_argument("--image", default="dlbench-node")
    parser.add_argument("--network", default="devcloud-net")
    parser.add_argument("--poll", type=float, default=0.3)
    args = parser.parse_args()
    results: dict[int, list[dict[str, float]]] = {1: [], args.servers: []}
    for round_no in range(args.rounds):
        for count in (1, args.servers):  # interleaved: A B A B
            result = lifecycle(count, args)
            results[count].append(result)
            print(f"round {round_no + 1}, {count} server(s): " + ", ".join(f"{k} {v:.2f} s" for k, v in result.items()),
                  flush=True)
    med = {count: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for count, rs in results.items()}
    print(f"\nmedian of {args.rounds} rounds (s):")
    for count, values in med.items():
        print(f"  {count} server(s): " + ", ".join(f"{k} {v:.2f}" for k, v in values.items()))
    one, many = med[1], med[args.servers]
    print(f"acquire {args.servers} vs 1: ratio {many['acquire'] / one['acquire']:.2f} (goal <= 1.10); "
          f"release ratio {many['release'] / one['release']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
