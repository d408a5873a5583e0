"""Calibrate the loaded-machine flag: how often does it flag a quiet job, how often a loaded one?

Runs the flag's real job (tests/workloads/load_jobs.py: a tf_cnn AlexNet smoke job through the
CLI in a fresh process, as the local executor starts it) in interleaved rounds: quiet, then
beside each known competing load (processes of this script offering a fixed fraction of one CPU
each), then quiet again..., and judges every job with :func:`dlbench.reports.analysis.machine_load.load_flag`.
Prints each job's cores (other processes' and the job's own) and, per situation, the flag rate:
the false-flag rate on the quiet machine and the detection rate under each load.

    .venv/bin/python bench/load_flag.py --rounds 5
    .venv/bin/python bench/load_flag.py --rounds 3 --loads 1x1.0 2x1.0 1x0.5 1x0.25

Run it on the machine whose numbers you want (the devcloud up or not is part of "quiet"); the
figures this machine gave are in docs/statistics.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "include")]

from dlbench.reports.analysis import machine_load  # noqa: E402
from tests.workloads.load_jobs import competing_load, quiet_second, run_job  # noqa: E402


def parse_load(text: str) -> tuple[int, float]:
    """``COUNTxDUTY``: COUNT processes, each busy DUTY of one CPU (``2x1.0``: two busy loops)."""
    count, _, duty = text.partition("x")
    value = (int(count), float(duty or 1.0))
    if value[0] < 1 or not 0.0 < value[1] <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: COUNT >= 1 and 0 < DUTY <= 1, e.g. 1x0.5")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--measured-steps", type=int, default=60, help="a window of about 4 s here")
    parser.add_argument("--loads", type=parse_load, nargs="+", default=[(1, 1.0), (1, 0.5), (1, 0.25)],
                        help="competing loads, COUNTxDUTY each (default: 1x1.0 1x0.5 1x0.25)")
    args = parser.parse_args()
    situations: list[tuple[str, tuple[int, float] | None]] = [("quiet", None)]
    situations += [(f"{count} x {duty:.2f} CPU", (count, duty)) for count, duty in args.loads]
    results: dict[str, list[tuple[float, float, bool]]] = {name: [] for name, _ in situations}
    print(f"rule: other cores > max({machine_load.OTHER_CORES_FLOOR} cores, "
          f"{machine_load.OTHER_SHARE_OF_JOB:.0%} of the job's cores)")
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(args.rounds):
            for name, offered in situations:  # interleaved: A B C A B C ...
                quiet_second()
                with competing_load(*offered) if offered else nullcontext():
                    labels = run_job(Path(tmp), f"{round_no}-{len(results[name])}", args.measured_steps)
                use = machine_load.cpu_use(labels)
                assert use is not None and use.job_cores is not None, labels
                flagged = machine_load.load_flag(labels) is not None
                results[name].append((use.other_cores, use.job_cores, flagged))
                print(f"round {round_no + 1} {name:>14}: other {use.other_cores:.3f} cores, job "
                      f"{use.job_cores:.3f} cores, window {labels['host_window_s']} s -> "
                      f"{'FLAGGED' if flagged else 'not flagged'}", flush=True)
    print(f"\n{'situation':>14}  jobs  flagged  other cores (min-max)  job cores (min-max)")
    for name, rows in results.items():
        others, jobs, flags = zip(*rows, strict=True)
        print(f"{name:>14}  {len(rows):4d}  {sum(flags):3d} ({sum(flags) / len(rows):4.0%})  "
              f"{min(others):.3f}-{max(others):.3f}          {min(jobs):.3f}-{max(jobs):.3f}")


if __name__ == "__main__":
    main()
