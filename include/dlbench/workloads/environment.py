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
from dataclasses import dataclass
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


CGROUP_CONTROLLERS_V1 = ("cpuacct", "cpu", "memory", "blkio")
"""The v1 hierarchies the counters read: CPU time, throttling, memory events, block I/O."""
UNIFIED = "unified"
"""The key of the one cgroup v2 directory in :func:`cgroup_dirs`."""


@dataclass(frozen=True)
class CgroupDir:
    """Where one hierarchy's counters of this process are read, and whose they are.

    ``own``: the process's cgroup as /proc/self/cgroup names it. ``path``: the cgroup whose files
    are in ``directory`` (the same as ``own`` unless that one is not visible here). ``kind``:
    ``own``; ``namespace root`` (a private cgroup namespace shows the container's own cgroup as
    ``/``: its own, and correct); ``machine root`` (the real root: whole-machine counters); or
    ``not visible`` (the own cgroup is outside what is mounted here: the mount's cgroup is read).
    """

    controller: str
    version: int
    own: str
    path: str
    directory: Path
    kind: str

    def describe(self) -> str:
        """The cgroup read, as a label: exactly what the counters cover."""
        if self.kind == "machine root":
            return "/ (root: counters include the whole machine)"
        if self.kind == "namespace root":
            return "/ (cgroup namespace root: the container's own cgroup)"
        if self.kind == "not visible":
            return f"{self.path} (the mounted cgroup; own cgroup {self.own} not visible here)"
        return f"{self.path} (own cgroup)"


def _mounts(mountinfo: str) -> list[tuple[str, str, str, set[str]]]:
    """cgroup mounts of /proc/self/mountinfo: (fstype, root in the hierarchy, mount point, options)."""
    mounts = []
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, extra = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(extra) < 3 or extra[0] not in ("cgroup", "cgroup2"):
            continue
        root, point = (f.replace("\\040", " ") for f in fields[3:5])
        mounts.append((extra[0], root, point, set(extra[2].split(","))))
    return mounts


def _own_paths(proc_cgroup: str) -> tuple[dict[str, str], str | None]:
    """/proc/self/cgroup: v1 controller -> path, and the v2 path (``0::``)."""
    v1: dict[str, str] = {}
    unified = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            unified = parts[2]
        for controller in parts[1].split(","):
            if controller:
                v1[controller] = parts[2]
    return v1, unified


def _locate(controller: str, version: int, own: str, root: str, point: str) -> CgroupDir:
    """The directory of ``own`` under a mount of the hierarchy whose root is ``root``."""
    base = root.rstrip("/")
    if own == root or own.startswith(base + "/"):
        directory = Path(point) / own[len(base):].lstrip("/")
        if directory.is_dir():
            # The real root has no cgroup.type (v2) and is the only one with cgroup.sane_behavior (v1).
            at_root = (not (directory / "cgroup.type").exists() if version == 2
                       else (directory / "cgroup.sane_behavior").exists())
            kind = "machine root" if at_root else "namespace root" if own == "/" else "own"
            return CgroupDir(controller, version, own, own, directory, kind)
    return CgroupDir(controller, version, own, root, Path(point), "not visible")


def cgroup_dirs(proc_cgroup: str | None = None, mountinfo: str | None = None) -> dict[str, CgroupDir]:
    """The directories of this process's own cgroups, per v1 controller or :data:`UNIFIED` (v2).

    Why not /sys/fs/cgroup itself: on a host (and in a container sharing the host's cgroup
    namespace) that is the root of the hierarchy, whose counters are the whole machine's. The own
    cgroup is located through /proc/self/cgroup and /proc/self/mountinfo (what part of the
    hierarchy is mounted where: a container's v1 mounts start at its own cgroup). A controller
    with a v1 hierarchy is read there (a hybrid host's v2 mount has no controllers); otherwise
    the v2 mount is. Empty when neither file can be read (not Linux).
    """
    proc_cgroup = _read("/proc/self/cgroup") if proc_cgroup is None else proc_cgroup
    mountinfo = _read("/proc/self/mountinfo") if mountinfo is None else mountinfo
    if not proc_cgroup or not mountinfo:
        return {}
    mounts = _mounts(mountinfo)
    v1_paths, unified = _own_paths(proc_cgroup)
    dirs: dict[str, CgroupDir] = {}
    for controller in CGROUP_CONTROLLERS_V1:
        for fstype, root, point, options in mounts:
            if fstype == "cgroup" and controller in options and controller in v1_paths:
                dirs[controller] = _locate(controller, 1, v1_paths[controller], root, point)
                break
    if not dirs and unified is not None:
        v2 = [m for m in mounts if m[0] == "cgroup2"]
        v2.sort(key=lambda m: m[2] != "/sys/fs/cgroup")  # the standard mount point first
        if v2:
            _, root, point, _ = v2[0]
            dirs[UNIFIED] = _locate(UNIFIED, 2, unified, root, point)
    return dirs


def cgroup_labels(dirs: dict[str, CgroupDir]) -> dict[str, str]:
    """``cgroup``: whose counters (one description, or one per controller when they differ, as
    on a v1 host whose memory hierarchy has a cgroup per job but whose cpu one does not);
    ``cgroup_source``: the directories read."""
    if not dirs:
        return {"cgroup": "unknown (no cgroup hierarchy found)", "cgroup_source": "none"}
    described = {name: d.describe() for name, d in dirs.items()}
    whose = (next(iter(described.values())) if len(set(described.values())) == 1
             else "; ".join(f"{name}={text}" for name, text in described.items()))
    version = next(iter(dirs.values())).version
    sources = ", ".join(str(d.directory) if name == UNIFIED else f"{name}={d.directory}" for name, d in dirs.items())
    return {"cgroup": whose, "cgroup_source": f"v{version}: {sources}"}


def container_info(dirs: dict[str, CgroupDir] | None = None) -> ContainerInfo:
    """Are we in a container, and what do its cgroup limits allow?

    The limits are read from the process's own cgroup (:func:`cgroup_dirs`), where a container's
    ``--cpus``/``--memory`` are; at the machine's root there are none."""
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
    dirs = cgroup_dirs() if dirs is None else dirs
    if UNIFIED in dirs:
        info.cgroup_version = 2
        cpu_max = (_read(dirs[UNIFIED].directory / "cpu.max") or "").split()
        if len(cpu_max) == 2 and cpu_max[0] != "max":
            info.cpu_limit_cores = int(cpu_max[0]) / int(cpu_max[1])
        mem_max = (_read(dirs[UNIFIED].directory / "memory.max") or "").strip()
        if mem_max.isdigit():
            info.memory_limit_bytes = int(mem_max)
    elif dirs:
        info.cgroup_version = 1
        if "cpu" in dirs:
            quota = (_read(dirs["cpu"].directory / "cpu.cfs_quota_us") or "").strip()
            period = (_read(dirs["cpu"].directory / "cpu.cfs_period_us") or "").strip()
            if quota.lstrip("-").isdigit() and int(quota) > 0 and period.isdigit():
                info.cpu_limit_cores = int(quota) / int(period)
        if "memory" in dirs:
            limit = (_read(dirs["memory"].directory / "memory.limit_in_bytes") or "").strip()
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
