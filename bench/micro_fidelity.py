"""Does wrapping a benchmark tool change its figure? Each tool run directly vs through our suite.

For every wrapped tool (dd, ioping, fio, iperf3, hpcc's HPL/DGEMM/STREAM, our HPCG binary) the
same command line runs directly (output read with a few independent lines of parsing here, not
with the suite's parsers) and through the suite code inside ``harness.workload`` (counter hooks,
environment capture and the suite's parsers included), interleaved round by round because this
machine is shared and noisy. Prints per metric the median of each side, the median of the
per-round ratios wrapped / direct (goal 0.97-1.03) with their range, and the direct side's own
CV, so a ratio can be read against the noise. Then times the whole smoke micro-suite end to end through the CLI.

    .venv/bin/python bench/micro_fidelity.py --rounds 3
    .venv/bin/python bench/micro_fidelity.py --rounds 5 --suites disk,network --dir /data/imagenet

The sizes here sit between the smoke and paper profiles: long enough for steady figures,
short enough for a 2-core machine (about 1 minute per round).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from dlbench.workloads import cli, harness
from dlbench.workloads.micro import cpu, disk, network
from dlbench.workloads.profiles import CpuSpec, DiskSpec, NetworkSpec
from dlbench.workloads.result import Benchmark, ResultDocument

DISK = DiskSpec(dd_block="64k", dd_counts=[1600], ioping_count=10, ioping_seconds=2, fio_size_mb=64,
                fio_runtime_s=3)
CPU = CpuSpec(hpl_sizes=[2000], hpl_block=80, hpl_memory_fraction=0.5, hpcg_dimension=32, hpcg_seconds=3)
NETWORK = NetworkSpec(seconds=3, latency_samples=200)
PORT = 5461
Figures = dict[str, float]


def sh(argv: list[str], **kwargs) -> subprocess.CompletedProcess:  # noqa: ANN003
    return subprocess.run(argv, capture_output=True, text=True, check=True, **kwargs)


# ------------------------------------------------------------------------ direct runs

def direct_disk(base: Path) -> Figures:
    figures: Figures = {}
    with tempfile.TemporaryDirectory(prefix="fidelity-disk-", dir=base) as work:
        target = os.path.join(work, "bigfile")
        for count in DISK.dd_counts:
            err = sh(["dd", "if=/dev/zero", f"of={target}", f"bs={DISK.dd_block}", f"count={count}",
                      "conv=fdatasync"]).stderr
            size, seconds = re.search(r"(\d+) bytes .* copied, ([\d.]+) s", err).groups()
            figures[f"dd_write_bandwidth {round(int(size) / 1e6, 1)} MB"] = int(size) / float(seconds) / 1e6
            os.unlink(target)
        for name, args in (("latency", ["-c", str(DISK.ioping_count)]),
                           ("cached_random", ["-C", "-R", "-w", str(DISK.ioping_seconds)]),
                           ("direct_random", ["-D", "-R", "-w", str(DISK.ioping_seconds)])):
            fields = sh(["ioping", "-B", "-q", *args, work]).stdout.split()
            figures[f"ioping_iops {name}"] = float(fields[2])
            figures[f"ioping_latency_avg {name}"] = float(fields[5]) / 1e3
        for name, rw, bs in (("seq_read", "read", "1m"), ("seq_write", "write", "1m"),
                             ("rand_read", "randread", "4k"), ("rand_write", "randwrite", "4k")):
            job = json.loads(sh(["fio", f"--name={name}", f"--directory={work}", f"--rw={rw}", f"--bs={bs}",
                                 f"--size={DISK.fio_size_mb}m", "--direct=1", "--ioengine=psync",
                                 f"--runtime={DISK.fio_runtime_s}", "--time_based",
                                 "--output-format=json"]).stdout)["jobs"][0]
            side = job["read" if "read" in rw else "write"]
            figures[f"fio_bandwidth {name}"] = side["bw_bytes"] / 1e6
            figures[f"fio_iops {name}"] = side["iops"]
    return figures


def direct_cpu(_: Path) -> Figures:
    ranks = max(1, len(os.sched_getaffinity(0)))
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}
    figures: Figures = {}
    with tempfile.TemporaryDirectory(prefix="fidelity-hpcc-") as work:
        Path(work, "hpccinf.txt").write_text(cpu.hpl_input(CPU.hpl_sizes[0], CPU.hpl_block, ranks))
        sh(["mpirun", "--oversubscribe", "-np", str(ranks), "hpcc"], cwd=work, env=env)
        text = Path(work, "hpccoutf.txt").read_text()
    summary = dict(re.findall(r"^(\w+)=(\S+)$", text, re.M))
    figures["hpl GFLOPS"] = float(summary["HPL_Tflops"]) * 1000
    figures["dgemm GFLOPS"] = float(summary["StarDGEMM_Gflops"])
    figures["stream_triad GB/s"] = float(summary["SingleSTREAM_Triad"])
    line = sh([str(cpu.hpcg_binary()), str(CPU.hpcg_dimension), str(CPU.hpcg_seconds)]).stdout
    figures["hpcg GFLOPS"] = float(re.search(r"gflops=([\d.]+)", line).group(1))
    return figures


def direct_network(_: Path) -> Figures:
    server = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(PORT)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # -1: one client, so no readiness probe may connect first
        data = json.loads(sh(["iperf3", "-c", "127.0.0.1", "-p", str(PORT), "-t", str(NETWORK.seconds),
                              "-J"]).stdout)
    finally:
        server.terminate()
        server.wait()
    return {"tcp_throughput Gbit/s": data["end"]["sum_received"]["bits_per_second"] / 1e9}


# ------------------------------------------------------------------------ through our suites

def wrapped(suite: str, body: Callable[[ResultDocument], None]) -> ResultDocument:
    with tempfile.TemporaryDirectory(prefix="fidelity-doc-") as out, \
            harness.workload(Benchmark(suite=suite, name=suite), out=Path(out, "r.json")) as doc:
        body(doc)
    return doc


def wrapped_disk(base: Path) -> Figures:
    doc = wrapped("disk", lambda doc: disk.run(doc, DISK, str(base)))
    figures: Figures = {}
    for s in doc.samples:
        if s.metric == "dd_write_bandwidth":
            figures[f"dd_write_bandwidth {s.labels['size_mb']} MB"] = s.value
        elif s.metric == "ioping_iops":
            figures[f"ioping_iops {s.labels['variant']}"] = s.value
        elif s.metric == "ioping_latency" and s.labels.get("statistic") == "avg":
            figures[f"ioping_latency_avg {s.labels['variant']}"] = s.value
        elif s.metric in ("fio_bandwidth", "fio_iops"):
            figures[f"{s.metric} {s.labels['job']}"] = s.value
    return figures


def wrapped_cpu(_: Path) -> Figures:
    doc = wrapped("cpu", lambda doc: cpu.run(doc, CPU))
    names = {"hpl": "hpl GFLOPS", "dgemm": "dgemm GFLOPS", "stream_triad": "stream_triad GB/s", "hpcg": "hpcg GFLOPS"}
    return {names[s.metric]: s.value for s in doc.samples if s.metric in names}


def wrapped_network(_: Path) -> Figures:
    doc = wrapped("network", lambda doc: network.run(doc, NETWORK, None, PORT))
    return {"tcp_throughput Gbit/s": doc.sample("tcp_throughput").value}


SUITES = {"cpu": (direct_cpu, wrapped_cpu), "disk": (direct_disk, wrapped_disk),
          "network": (direct_network, wrapped_network)}


def smoke_suite_seconds() -> dict[str, float]:
    """Wall time of each smoke micro-suite through the CLI (a fresh interpreter each, as the DAG runs them)."""
    times = {}
    with tempfile.TemporaryDirectory(prefix="fidelity-smoke-") as out:
        for suite in ("cpu", "disk", "network", "gpu", "deepbench"):
            extra = ["--data-dir", out] if suite == "disk" else []
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "dlbench.workloads", suite, "--profile", "smoke", "--out",
                                   f"{out}/{suite}.json", *extra], capture_output=True, text=True, check=False)
            times[suite] = time.perf_counter() - start
            if proc.returncode != 0:
                print(f"  smoke {suite} FAILED: {proc.stderr.strip()[-300:]}")
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--suites", default="cpu,disk,network")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="directory for the disk tools")
    parser.add_argument("--no-smoke", action="store_true", help="skip timing the smoke micro-suite")
    args = parser.parse_args()
    cli.load_commands()  # registers the counter hooks, as the CLI does
    worst = 0.0
    for suite in args.suites.split(","):
        direct_fn, wrapped_fn = SUITES[suite]
        direct: dict[str, list[float]] = defaultdict(list)
        ours: dict[str, list[float]] = defaultdict(list)
        for round_ in range(args.rounds):
            first, second = (direct_fn, wrapped_fn) if round_ % 2 == 0 else (wrapped_fn, direct_fn)
            for fn in (first, second):
                target = direct if fn is direct_fn else ours
                for key, value in fn(args.dir).items():
                    target[key].append(value)
        print(f"\n{suite}: {args.rounds} interleaved rounds; ratio = median of the per-round wrapped/direct ratios")
        print(f"  {'metric':36} {'direct':>10} {'wrapped':>10} {'ratio':>7} {'ratio range':>13} {'direct CV%':>10}")
        for key in sorted(direct):
            if key not in ours or len(ours[key]) != len(direct[key]):
                print(f"  {key:36} {statistics.median(direct[key]):10.4g} {'missing':>10}")
                continue
            d, w = statistics.median(direct[key]), statistics.median(ours[key])
            cv = 100 * statistics.pstdev(direct[key]) / statistics.fmean(direct[key]) if len(direct[key]) > 1 else 0
            pairs = [b / a for a, b in zip(direct[key], ours[key], strict=True) if a]
            ratio = statistics.median(pairs) if pairs else float("nan")
            worst = max(worst, abs(ratio - 1))
            flag = "" if 0.97 <= ratio <= 1.03 else "  <- outside 0.97-1.03"
            spread = f"{min(pairs):.2f}-{max(pairs):.2f}" if pairs else "-"
            print(f"  {key:36} {d:10.4g} {w:10.4g} {ratio:7.3f} {spread:>13} {cv:10.1f}{flag}")
    print(f"\nlargest |ratio - 1|: {worst:.3f}")
    if not args.no_smoke:
        times = smoke_suite_seconds()
        print("\nsmoke micro-suite end to end through the CLI: "
              + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()) + f"; total {sum(times.values()):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
