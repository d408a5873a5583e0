"""Which GPUs a workload gets, decided once per machine from what the machine really has.

The user's request is one value per provider (``gpus`` in its settings):

- ``auto`` (default): every GPU the machine has, on every platform; none where it has none;
- ``none``: a CPU-only comparison: host processes get ``CUDA_VISIBLE_DEVICES=""``, containers no
  device request;
- ``all``: every GPU, and a machine without one cannot run the job (a visible skip naming why);
- ``N``: the first N GPUs on every platform (``CUDA_VISIBLE_DEVICES=0..N-1`` for processes,
  ``--gpus N`` / a device request of N for containers); fewer than N is a skip.

Bare metal and containers on one machine always get the same allotment: a comparison in which
the container silently ran on the CPU while the host process used the GPU would be worthless.
So a container platform on a machine whose engine cannot hand GPUs to containers (no NVIDIA
runtime) is skipped with the fix in the reason, never run without its GPUs.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from dlbench.grammar import GPU_REQUEST
from dlbench.workloads.environment import nvidia_gpus

log = logging.getLogger(__name__)


_PROBE = ('n=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c .); '
          'echo "gpus=${n:-0}"; '
          'if command -v "$1" >/dev/null 2>&1; then echo "runtimes=$("$1" info --format "{{json .Runtimes}}" '
          '2>/dev/null | tr -d "\\n")"; fi; true')
"""Shell probe run on a machine: its GPU count (nvidia-smi) and its engine's runtimes ($1: the engine)."""


@dataclass(frozen=True)
class GpuFacts:
    """What a machine offers: its NVIDIA GPUs and whether its container engine can pass them on."""

    count: int = 0
    engine_passes_gpus: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "engine_passes_gpus": self.engine_passes_gpus}


@dataclass(frozen=True)
class Allotment:
    """The decision for one machine: the access's ``gpus`` value per runtime and skip reasons.

    ``host``/``container`` are ``ContainerLimits.gpus``-style values: ``None`` (nothing asked:
    processes see every GPU, containers none), ``"all"``, or a count (``"0"`` hides every GPU
    from a process)."""

    host: str | None = None
    container: str | None = None
    host_skip: str | None = None
    container_skip: str | None = None
    count: int = 0
    """GPUs the workload will use (the ``gpus`` label of its documents)."""


def runtimes_pass_gpus(runtimes: Any) -> bool:
    """An engine passes GPUs to ``--gpus`` when the NVIDIA runtime is registered (the NVIDIA
    Container Toolkit's ``nvidia-ctk runtime configure``)."""
    return isinstance(runtimes, dict) and any("nvidia" in str(name).lower() for name in runtimes)


def parse_probe(output: str) -> GpuFacts:
    count, passes = 0, False
    for line in output.splitlines():
        key, _, value = line.strip().partition("=")
        if key == "gpus" and value.strip().isdigit():
            count = int(value)
        elif key == "runtimes" and value.strip():
            try:
                passes = runtimes_pass_gpus(json.loads(value))
            except json.JSONDecodeError:
                passes = False
    return GpuFacts(count=count, engine_passes_gpus=passes)


def probe_argv(engine: str = "docker") -> list[str]:
    return ["sh", "-c", _PROBE, "sh", engine]


def local_facts() -> GpuFacts:
    """This host: nvidia-smi's GPUs and the local Docker engine's runtimes."""
    gpus, _ = nvidia_gpus()
    passes = False
    if gpus and shutil.which("docker"):
        proc = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True,
                              timeout=30, check=False)
        if proc.returncode == 0:
            try:
                passes = runtimes_pass_gpus(json.loads(proc.stdout or "null"))
            except json.JSONDecodeError:
                passes = False
    return GpuFacts(count=len(gpus), engine_passes_gpus=passes)


def allot(request: str | int, facts: GpuFacts, machine: str) -> Allotment:
    """The one rule (see the module docstring); ``machine`` names the machine in skip reasons.
    An int is a provider's own GPU count (Nova's ``gpus``: PCI-passthrough GPUs per VM): N > 0
    asks for N, 0 means ``auto`` (a flavor without GPUs gives none)."""
    if isinstance(request, int):
        request = str(request) if request > 0 else "auto"
    if not GPU_REQUEST.match(request):
        raise ValueError(f"gpus: {request!r} is not one of auto, none, all or a count 1..999")
    have = facts.count
    if request == "none":
        return Allotment(host="0" if have else None)
    if request == "auto" and not have:
        return Allotment()
    if have == 0 or (request.isdigit() and have < int(request)):
        why = (f"gpus={request} asks for {'GPUs' if request == 'all' else request + ' GPU(s)'} but {machine} has "
               f"{have or 'none'} (nvidia-smi)")
        return Allotment(host_skip=why, container_skip=why)
    value = "all" if request in ("auto", "all") else request
    count = have if value == "all" else int(value)
    container_skip = None
    if not facts.engine_passes_gpus:
        container_skip = (f"{machine} has {have} GPU(s) but its container engine has no NVIDIA runtime, so a "
                          f"container would run without them: install the NVIDIA Container Toolkit "
                          f"(nvidia-ctk runtime configure), or set gpus: none for a CPU-only comparison")
    return Allotment(host=None if value == "all" else value, container=value, container_skip=container_skip,
                     count=count)


def process_env(gpus: str | None) -> dict[str, str]:
    """Environment of a host process for an access's ``gpus``: a count hides the other GPUs."""
    if gpus is None or gpus == "all":
        return {}
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(int(gpus)))}
