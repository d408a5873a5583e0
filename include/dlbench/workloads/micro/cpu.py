"""CPU: HPL (and DGEMM, STREAM, PTRANS, RandomAccess) through Debian's ``hpcc`` reference
package, and HPCG through our implementation of the published algorithm (``hpcg.c``).

HPL runs once per problem size of study 001, skipping sizes whose matrix (8 N^2 bytes) would
exceed the configured share of memory, with one MPI rank per allowed CPU.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from dlbench.workloads import environment
from dlbench.workloads.micro.tools import ToolError, ToolOutputError, run_tool, tool_version
from dlbench.workloads.profiles import CpuSpec
from dlbench.workloads.result import ResultDocument

HPCG_SOURCE = Path(__file__).with_name("hpcg.c")
HPCC_TEMPLATE = Path(__file__).with_name("hpccinf.template")
HPCC_METRICS = {
    # hpccoutf.txt key: (sample metric, unit, scale)
    "HPL_Tflops": ("hpl", "GFLOPS", 1000.0),
    "StarDGEMM_Gflops": ("dgemm", "GFLOPS", 1.0),
    "SingleSTREAM_Triad": ("stream_triad", "GB/s", 1.0),
    "StarSTREAM_Triad": ("stream_triad_per_rank", "GB/s", 1.0),
    "PTRANS_GBs": ("ptrans", "GB/s", 1.0),
    "MPIRandomAccess_GUPs": ("random_access", "GUP/s", 1.0),
}
_KV = re.compile(r"^(\w+)=(\S+)$")


def hpl_input(n: int, block: int, ranks: int) -> str:
    """hpccinf.txt for one HPL size on a P x Q grid as square as the rank count allows."""
    p = max(d for d in range(1, int(ranks**0.5) + 1) if ranks % d == 0)
    q = ranks // p
    template = HPCC_TEMPLATE.read_text()  # hpcc's example input (Debian docs may be stripped in images)
    lines = template.splitlines()
    lines[5], lines[7], lines[10], lines[11] = f"{n}         Ns", f"{block}           NBs", f"{p}            Ps", \
        f"{q}            Qs"
    return "\n".join(lines) + "\n"


def parse_hpcc(text: str) -> dict[str, float]:
    """The summary block of hpccoutf.txt (key=value lines between the Begin/End markers)."""
    if "Begin of Summary section." not in text:
        raise ToolOutputError("hpcc", text.strip().splitlines()[-1] if text.strip() else "", "a Summary section")
    block = text.split("Begin of Summary section.", 1)[1].split("End of Summary section.", 1)[0]
    values = {}
    for line in block.strip().splitlines():
        match = _KV.match(line.strip())
        if not match:
            raise ToolOutputError("hpcc", line, "key=value")
        try:
            values[match.group(1)] = float(match.group(2))
        except ValueError:
            continue  # text-valued keys (versions, dates)
    if values.get("Failure", 0) or not values.get("Success", 0):
        raise ToolError(f"hpcc reported failure (Success={values.get('Success')}, Failure={values.get('Failure')})")
    return values


def run_hpl(doc: ResultDocument, spec: CpuSpec) -> None:
    ranks = max(1, len(os.sched_getaffinity(0)))
    memory = environment.container_info().memory_limit_bytes or environment.memory_bytes() or 0
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}  # no CMA inside unprivileged containers
    for n in spec.hpl_sizes:
        if 8 * n * n > spec.hpl_memory_fraction * memory:
            doc.add("hpl_skipped_size", n, "N", reason="matrix exceeds memory share")
            continue
        with tempfile.TemporaryDirectory(prefix="dlbench-hpcc-") as work:
            Path(work, "hpccinf.txt").write_text(hpl_input(n, spec.hpl_block, ranks))
            run_tool(["mpirun", "--oversubscribe", "-np", str(ranks), "hpcc"], timeout=6 * 3600, cwd=work, env=env)
            values = parse_hpcc(Path(work, "hpccoutf.txt").read_text())
        for key, (metric, unit, scale) in HPCC_METRICS.items():
            if key in values:
                doc.add(metric, values[key] * scale, unit, n=n, ranks=ranks, tool="hpcc")


def hpcg_binary() -> Path:
    """The compiled HPCG: prebuilt in the image, else compiled once per source version with gcc."""
    prebuilt = Path("/opt/dlbench/bin/dlbench-hpcg")
    if prebuilt.exists():
        return prebuilt
    digest = hashlib.sha256(HPCG_SOURCE.read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dlbench"
    binary = cache / f"dlbench-hpcg-{digest}"
    if not binary.exists():
        if shutil.which("gcc") is None:
            raise ToolError("gcc is needed to build HPCG (Debian package: gcc)")
        cache.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_suffix(".tmp")
        subprocess.run(["gcc", "-O3", "-o", str(tmp), str(HPCG_SOURCE), "-lm"], check=True, capture_output=True)
        tmp.replace(binary)
    return binary


def parse_hpcg(stdout: str) -> dict[str, float]:
    line = next((ln for ln in stdout.splitlines() if ln.startswith("hpcg ")), "")
    fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
    try:
        return {k: float(fields[k]) for k in ("n", "gflops", "seconds", "sets", "relative_residual", "max_error")}
    except (KeyError, ValueError):
        raise ToolOutputError("dlbench-hpcg", line or stdout[:200], "'hpcg n=.. gflops=.. ...'") from None


def run_hpcg(doc: ResultDocument, spec: CpuSpec) -> None:
    binary = hpcg_binary()
    proc = run_tool([str(binary), str(spec.hpcg_dimension), str(spec.hpcg_seconds)],
                    timeout=spec.hpcg_seconds * 2 + 600)
    result = parse_hpcg(proc.stdout)
    if result["max_error"] > 1e-6:
        raise ToolError(f"HPCG did not converge (max error {result['max_error']:.3g})")
    doc.add("hpcg", result["gflops"], "GFLOPS", n=spec.hpcg_dimension, implementation="dlbench-reference")
    doc.add("hpcg_cg_sets", result["sets"], "count", n=spec.hpcg_dimension)


def run(doc: ResultDocument, spec: CpuSpec) -> None:
    doc.environment.versions.update({"hpcc": tool_version(["dpkg-query", "-W", "-f=${Version}", "hpcc"]) or "unknown",
                                     "mpirun": tool_version(["mpirun", "--version"])})
    run_hpl(doc, spec)
    run_hpcg(doc, spec)
