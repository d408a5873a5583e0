"""Build and run the CUDA micro-benchmarks; record "not available" cleanly without a GPU.

The program is compiled once per source version with nvcc (cuBLAS when its headers exist,
otherwise a tiled GEMM kernel labelled ``implementation=tiled``). Sizes from the profile are
scaled down to the device's free memory, and the scaled size is recorded in each sample.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import TypedDict

from dlbench.workloads.micro.tools import ToolError, ToolOutputError, run_tool
from dlbench.workloads.profiles import GpuSpec
from dlbench.workloads.result import ResultDocument, Status

SOURCE = Path(__file__).with_name("microbench.cu")
NO_GPU_EXIT = 10


def find_nvcc() -> str | None:
    return shutil.which("nvcc") or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))), None)


def cublas_available(nvcc: str) -> bool:
    """cuBLAS headers where nvcc looks by default (nvcc may be a wrapper script outside the toolkit)."""
    cuda = Path(nvcc).resolve().parents[1]
    candidates = [cuda / "include", *map(Path, glob.glob("/usr/local/cuda*/include")),
                  *map(Path, glob.glob("/usr/local/cuda*/targets/*/include")), Path("/usr/include")]
    return any((d / "cublas_v2.h").exists() for d in candidates)


def build(cache: Path | None = None) -> tuple[Path, str]:
    """(binary, gemm implementation). Prebuilt in the GPU image, else nvcc into the cache."""
    prebuilt = Path("/opt/dlbench/bin/dlbench-gpu")
    if prebuilt.exists():
        return prebuilt, "prebuilt"
    nvcc = find_nvcc()
    if nvcc is None:
        raise ToolError("nvcc is not installed (CUDA toolkit): cannot build the GPU micro-benchmarks")
    with_cublas = cublas_available(nvcc)
    digest = hashlib.sha256(SOURCE.read_bytes() + str(with_cublas).encode()).hexdigest()[:12]
    cache = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dlbench"
    binary = cache / f"dlbench-gpu-{digest}"
    if not binary.exists():
        cache.mkdir(parents=True, exist_ok=True)
        flags = ["-lcublas"] if with_cublas else ["-DDLBENCH_NO_CUBLAS"]
        tmp = binary.with_suffix(".tmp")
        proc = subprocess.run([nvcc, "-O3", "-o", str(tmp), str(SOURCE), *flags], capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            raise ToolError(f"nvcc failed to build {SOURCE.name}: {proc.stderr[-800:]}")
        tmp.replace(binary)
    return binary, "cublas" if with_cublas else "tiled"


def parse_lines(stdout: str) -> list[tuple[str, float, str, dict[str, str]]]:
    results = []
    for line in stdout.strip().splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        try:
            metric, value, unit = fields.pop("metric"), float(fields.pop("value")), fields.pop("unit")
        except (KeyError, ValueError):
            raise ToolOutputError("dlbench-gpu", line, "metric=.. value=.. unit=..") from None
        results.append((metric, value, unit, fields))
    return results


class GpuSizes(TypedDict):
    """The sizes :func:`fit` chose for one device: each program's problem size."""

    conv: int
    gemm: tuple[int, int, int]
    histogram: int
    transpose: int
    bandwidth_mb: int


def fit(spec: GpuSpec, free_bytes: int) -> GpuSizes:
    """Scale the study's sizes down to 70% of the device's free memory (recorded per sample)."""
    budget = 0.7 * free_bytes
    conv = spec.conv_size
    while 2 * 4 * conv * conv > budget and conv > 256:
        conv //= 2
    m, k, n = spec.gemm  # A is m x k, B is k x n (the study's 23040x17280 x 17280x11520)
    while 4 * (m * k + k * n + m * n) > budget and min(m, n, k) > 256:
        m, k, n = m // 2, k // 2, n // 2
    values = spec.histogram_values
    while values > budget and values > 1 << 20:
        values //= 2
    transpose = spec.transpose_size
    while 2 * 4 * transpose * transpose > budget and transpose > 256:
        transpose //= 2
    bandwidth = min(spec.bandwidth_mb, max(1, int(budget / 2 / 2**20)))
    return {"conv": conv, "gemm": (m, k, n), "histogram": values, "transpose": transpose, "bandwidth_mb": bandwidth}


def run(doc: ResultDocument, spec: GpuSpec) -> None:
    if not doc.environment.gpus and shutil.which("nvidia-smi") is None:
        not_available(doc, "no NVIDIA GPU or driver on this machine")
        return
    binary, implementation = build()
    probe = subprocess.run([str(binary), "devices"], capture_output=True, text=True, timeout=120, check=False)
    if probe.returncode == NO_GPU_EXIT:
        not_available(doc, "CUDA reports no device")
        return
    if probe.returncode != 0:
        raise ToolError(f"dlbench-gpu devices failed: {probe.stderr.strip()[-300:]}")
    devices = parse_lines(probe.stdout)
    free = int(devices[0][3]["free_bytes"])
    sizes = fit(spec, free)
    doc.labels["gemm_implementation"] = implementation
    m, k, n = sizes["gemm"]
    commands = [
        ["bandwidth", str(sizes["bandwidth_mb"]), str(spec.iterations)],
        ["conv", str(sizes["conv"]), str(spec.iterations)],
        ["gemm", str(m), str(n), str(k), str(spec.iterations)],
        ["histogram", str(sizes["histogram"]), str(spec.iterations)],
        ["transpose", str(sizes["transpose"]), str(spec.iterations)],
    ]
    for args in commands:
        for metric, value, unit, labels in parse_lines(run_tool([str(binary), *args], timeout=3600).stdout):
            doc.add(f"gpu_{metric}", value, unit, **labels)


def not_available(doc: ResultDocument, reason: str) -> None:
    """No GPU: the suite says so (status skipped, reason recorded) and the run moves on."""
    doc.status = Status.SKIPPED
    doc.error = f"GPU suite not available: {reason}"
    doc.add("gpu_devices", 0, "count")
