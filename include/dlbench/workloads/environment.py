"""Collect the facts about the benchmarked machine that a fair comparison needs.

Everything here reads /proc, /sys and standard tools directly and never fails the workload:
a fact that cannot be read is left empty rather than guessed.
"""

from __future__ import annotations

import os
import platform as _platform
import re
import shutil
import socket
import subprocess
from pathlib import Path

from dlbench.workloads.result import ContainerInfo, Environment, GpuInfo, Platform


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else _platform.processor() or None


def memory_bytes() -> int | None:
    text = _read("/proc/meminfo") or ""
    match = re.search(r"^MemTotal:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def os_release() -> str | None:
    text = _read("/etc/os-release") or ""
    match = re.search(r'^PRETTY_NAME="?([^"\n]+)"?$', text, re.MULTILINE)
    return match.group(1) if match else None


def numa_nodes_for(cpus: list[int]) -> list[int]:
    """NUMA nodes the allowed CPUs belong to (study 003: placement changes host<->device bandwidth)."""
    nodes: set[int] = set()
    for cpu in cpus:
        for entry in Path(f"/sys/devices/system/cpu/cpu{cpu}").glob("node*"):
            nodes.add(int(entry.name[4:]))
    return sorted(nodes)


def container_info() -> ContainerInfo:
    """Are we in a container, and what do its cgroup limits allow?"""
    runtime = None
    if Path("/.dockerenv").exists():
        runtime = "docker"
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        runtime = "kubernetes"
    elif Path("/run/.containerenv").exists():
        runtime = "podman"
    else:
        cgroup = _read("/proc/1/cgroup") or ""
        for name in ("docker", "kubepods", "containerd", "lxc"):
            if name in cgroup:
                runtime = name
                break
    info = ContainerInfo(inside=runtime is not None, runtime=runtime)
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        info.cgroup_version = 2
        cpu_max = (_read("/sys/fs/cgroup/cpu.max") or "").split()
        if len(cpu_max) == 2 and cpu_max[0] != "max":
            info.cpu_limit_cores = int(cpu_max[0]) / int(cpu_max[1])
        mem_max = (_read("/sys/fs/cgroup/memory.max") or "").strip()
        if mem_max.isdigit():
            info.memory_limit_bytes = int(mem_max)
    elif Path("/sys/fs/cgroup/memory").exists():
        info.cgroup_version = 1
        quota = (_read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") or "").strip()
        period = (_read("/sys/fs/cgroup/cpu/cpu.cfs_period_us") or "").strip()
        if quota.lstrip("-").isdigit() and int(quota) > 0 and period.isdigit():
            info.cpu_limit_cores = int(quota) / int(period)
        limit = (_read("/sys/fs/cgroup/memory/memory.limit_in_bytes") or "").strip()
        if limit.isdigit() and int(limit) < 1 << 60:
            info.memory_limit_bytes = int(limit)
    return info


def nvidia_gpus() -> tuple[list[GpuInfo], dict[str, str]]:
    """GPUs as nvidia-smi reports them; empty when there is no NVIDIA driver."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return [], {}
    query = "index,name,memory.total,driver_version,pci.bus_id"
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return [], {}
    gpus: list[GpuInfo] = []
    versions: dict[str, str] = {}
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5:
            continue
        index, name, mem_mib, driver, bus = parts
        numa = _read(f"/sys/bus/pci/devices/{bus.lower()[4:] if len(bus) > 12 else bus.lower()}/numa_node")
        gpus.append(GpuInfo(
            index=int(index), name=name,
            memory_bytes=int(float(mem_mib)) * 1024 * 1024 if mem_mib.replace(".", "").isdigit() else None,
            driver=driver, pci_bus_id=bus,
            numa_node=int(numa) if numa and numa.strip().lstrip("-").isdigit() and int(numa) >= 0 else None,
        ))
        versions["nvidia_driver"] = driver
    return gpus, versions


def collect(platform: Platform | None = None, extra_versions: dict[str, str] | None = None) -> Environment:
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    gpus, gpu_versions = nvidia_gpus()
    uname = _platform.uname()
    versions = {"python": _platform.python_version(), **gpu_versions, **(extra_versions or {})}
    return Environment(
        hostname=socket.gethostname(),
        platform=platform,
        kernel=f"{uname.system} {uname.release}",
        os=os_release(),
        python=_platform.python_version(),
        cpu_model=cpu_model(),
        cpu_count=os.cpu_count(),
        memory_bytes=memory_bytes(),
        cpu_affinity=affinity,
        numa_nodes=numa_nodes_for(affinity),
        gpus=gpus,
        container=container_info(),
        versions=versions,
    )
