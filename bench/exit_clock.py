"""How late does the local executor see a workload's exit? ``Popen.wait`` polling vs the pidfd wait.

``launch_to_end_time`` ends when the executor sees the exit. The child records its own last
moment on CLOCK_MONOTONIC and exits; the lag is the executor's reading minus that. Rounds are
interleaved (poll, pidfd, poll, pidfd...) in one process; ``--busy N`` adds N busy-looping
processes for the whole run (a loaded host, bounded by the run). Prints median / 90th percentile
/ max lag per method and the ratio of medians; the product's clock tests allow 50 ms in all.

    .venv/bin/python bench/exit_clock.py --rounds 20 --busy 2
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dlbench.execution.local import wait_for_exit

CHILD = ("import os, sys, time; time.sleep(float(sys.argv[2])); "
         "open(sys.argv[1], 'w').write(repr(time.monotonic())); os._exit(0)")


def lag(method: str, sleep_s: float, probe: Path) -> float:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(probe), str(sleep_s)])
    if method == "poll":
        proc.wait(timeout=60)
    else:
        wait_for_exit(proc, 60)
    ended = time.monotonic()
    return ended - float(probe.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--sleep", type=float, default=0.3, help="the child's life in seconds")
    parser.add_argument("--busy", type=int, default=0, help="busy-looping processes while it runs")
    args = parser.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    lags: dict[str, list[float]] = {"poll": [], "pidfd": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.rounds):
                for method in ("poll", "pidfd") if i % 2 == 0 else ("pidfd", "poll"):
                    lags[method].append(lag(method, args.sleep, Path(tmp) / "exit"))
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    for method, values in lags.items():
        ms = sorted(v * 1000 for v in values)
        print(f"{method:6s} lag ms: median {statistics.median(ms):6.2f}  p90 {ms[int(0.9 * (len(ms) - 1))]:6.2f}  "
              f"max {ms[-1]:6.2f}  (n={len(ms)}, busy={args.busy})")
    print(f"ratio of medians pidfd / poll: {statistics.median(lags['pidfd']) / statistics.median(lags['poll']):.3f}")


if __name__ == "__main__":
    main()
