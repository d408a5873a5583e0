"""Disk: dd sequential writes, ioping latency and random reads (study 001), fio (modern standard).

Run on the directory the real-data path reads from, so "real data is slower in a container on a
VM" can be traced to the storage it reads.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from dlbench.workloads.micro.tools import ToolOutputError, run_tool, tool_version
from dlbench.workloads.profiles import DiskSpec
from dlbench.workloads.result import ResultDocument

_DD = re.compile(r"^(\d+) bytes .* copied, ([0-9.eE+-]+) s, .*$")
BLOCK_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3}


def block_bytes(block: str) -> int:
    match = re.fullmatch(r"(\d+)([kmg]?)", block.lower())
    if not match:
        raise ValueError(f"dd block size {block!r}: expected a number with optional k/m/g")
    return int(match.group(1)) * BLOCK_UNITS.get(match.group(2), 1)


def parse_dd(stderr: str) -> tuple[int, float]:
    """(bytes, seconds) from dd's summary line."""
    for line in stderr.splitlines():
        if "copied" in line:
            match = _DD.match(line.strip())
            if not match:
                raise ToolOutputError("dd", line, "'N bytes (...) copied, S s, R'")
            return int(match.group(1)), float(match.group(2))
    raise ToolOutputError("dd", stderr.strip().splitlines()[-1] if stderr.strip() else "", "a 'copied' line")


def parse_ioping_batch(stdout: str) -> dict[str, float]:
    """ioping -B raw statistics: count runtime iops speed min avg max mdev requests total (times in ns, 1.2+)."""
    lines = [line for line in stdout.strip().splitlines() if line.strip()]
    if not lines:
        raise ToolOutputError("ioping", "", "one line of 10 numbers (-B batch mode)")
    fields = lines[-1].split()
    if len(fields) < 8 or not all(re.fullmatch(r"-?\d+(\.\d+)?", f) for f in fields[:8]):
        raise ToolOutputError("ioping", lines[-1], "10 numbers (-B batch mode)")
    count, runtime_ns, iops, speed, min_ns, avg_ns, max_ns, mdev_ns = (float(f) for f in fields[:8])
    return {"count": count, "iops": iops, "bytes_per_s": speed, "min_us": min_ns / 1e3, "avg_us": avg_ns / 1e3,
            "max_us": max_ns / 1e3, "mdev_us": mdev_ns / 1e3, "runtime_s": runtime_ns / 1e9}


def parse_fio(stdout: str) -> dict[str, dict[str, float]]:
    """Per job: bandwidth, IOPS and completion-latency percentiles from fio's JSON output."""
    start = stdout.find("{")
    try:
        data = json.loads(stdout[start:]) if start >= 0 else None
    except json.JSONDecodeError as exc:
        raise ToolOutputError("fio", stdout[start:start + 200], f"JSON ({exc.msg})") from None
    if not data or "jobs" not in data:
        raise ToolOutputError("fio", stdout[:200], "JSON with a 'jobs' list (--output-format=json)")
    results = {}
    for job in data["jobs"]:
        direction = "read" if job["read"]["io_bytes"] > 0 else "write"
        stats = job[direction]
        percentiles = stats.get("clat_ns", {}).get("percentile", {})
        results[job["jobname"]] = {
            "bandwidth": stats["bw_bytes"] / 1e6, "iops": stats["iops"],
            "lat_mean_us": stats["lat_ns"]["mean"] / 1e3,
            **{f"clat_p{p}_us": percentiles.get(f"{p}.000000", float("nan")) / 1e3 for p in (50, 99)},
        }
    return results


def run(doc: ResultDocument, spec: DiskSpec, directory: str | None) -> None:
    base = Path(directory or tempfile.gettempdir())
    if not base.is_dir():
        raise FileNotFoundError(f"disk benchmark directory {base} does not exist")
    doc.environment.versions.update({"dd": tool_version(["dd", "--version"]), "ioping": tool_version(["ioping", "-v"]),
                                     "fio": tool_version(["fio", "--version"])})
    with tempfile.TemporaryDirectory(prefix="dlbench-disk-", dir=base) as work:
        block = block_bytes(spec.dd_block)
        for count in spec.dd_counts:
            target = os.path.join(work, "bigfile")
            proc = run_tool(["dd", "if=/dev/zero", f"of={target}", f"bs={spec.dd_block}", f"count={count}",
                             "conv=fdatasync"], timeout=1800)
            size, seconds = parse_dd(proc.stderr)
            if size != block * count:
                raise ToolOutputError("dd", proc.stderr.strip().splitlines()[-1], f"{block * count} bytes copied")
            os.unlink(target)
            doc.add("dd_write_bandwidth", size / seconds / 1e6, "MB/s", size_mb=round(size / 1e6, 1),
                    block=spec.dd_block)
        variants = {
            "latency": ["-c", str(spec.ioping_count)],
            "cached_random": ["-C", "-R", "-w", str(spec.ioping_seconds)],
            "direct_random": ["-D", "-R", "-w", str(spec.ioping_seconds)],
        }
        for name, args in variants.items():
            stats = parse_ioping_batch(run_tool(["ioping", "-B", "-q", *args, work], timeout=600).stdout)
            doc.add("ioping_latency", stats["avg_us"], "us", variant=name, statistic="avg")
            doc.add("ioping_latency_mdev", stats["mdev_us"], "us", variant=name)
            doc.add("ioping_iops", stats["iops"], "IOPS", variant=name)
        for name, rw, bs in (("seq_read", "read", "1m"), ("seq_write", "write", "1m"),
                             ("rand_read", "randread", "4k"), ("rand_write", "randwrite", "4k")):
            proc = run_tool(["fio", f"--name={name}", f"--directory={work}", f"--rw={rw}", f"--bs={bs}",
                             f"--size={spec.fio_size_mb}m", "--direct=1", "--ioengine=psync",
                             f"--runtime={spec.fio_runtime_s}", "--time_based", "--output-format=json"], timeout=1800)
            stats = parse_fio(proc.stdout)[name]
            doc.add("fio_bandwidth", stats["bandwidth"], "MB/s", job=name, block=bs)
            doc.add("fio_iops", stats["iops"], "IOPS", job=name, block=bs)
            doc.add("fio_latency", stats["lat_mean_us"], "us", job=name, statistic="mean")
            for p in (50, 99):
                value = stats[f"clat_p{p}_us"]
                if value == value:
                    doc.add("fio_latency", value, "us", job=name, statistic=f"p{p}")
