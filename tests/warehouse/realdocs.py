"""Result documents written by the REAL TF runner, made once per test process.

Two platforms (labelled with ``--platform``) x two repetitions of AlexNet on the smoke profile
(fewer steps: the numbers only need to be real, not stable). Shared by the warehouse and report
tests through a cache, so the ~50 s of runner time is paid once per session.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

RUN_ID = "real-run"
PLATFORMS = ("bare_metal", "container_on_bare_metal")
REPETITIONS = (0, 1)


@functools.cache
def real_run_dir() -> Path:
    """An archive-shaped directory ``<DLBENCH_HOME>/test-archive/real-run/<job_id>.json``."""
    out = Path(os.environ["DLBENCH_HOME"]) / "test-archive" / RUN_ID
    jobs = [(platform, rep) for platform in PLATFORMS for rep in REPETITIONS]
    for pair in (jobs[i:i + 2] for i in range(0, len(jobs), 2)):  # two at a time: two CPU cores
        procs = []
        for platform, rep in pair:
            job_id = f"{platform}-alexnet-r{rep}"
            procs.append((job_id, subprocess.Popen(
                [sys.executable, "-m", "dlbench.workloads", "tf-cnn", "--model", "alexnet", "--profile", "smoke",
                 "--platform", platform, "--run-id", RUN_ID, "--job-id", job_id, "--repetition", str(rep),
                 "--warmup-steps", "1", "--measured-steps", "3", "--out", str(out / f"{job_id}.json")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        for job_id, proc in procs:
            _, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, f"runner failed for {job_id}: {err[-1500:]}"
    return out


def raw_samples(directory: Path, metric: str) -> dict[str, list[float]]:
    """Per platform, the values of ``metric`` read straight from the JSON files (no dlbench code)."""
    values: dict[str, list[float]] = {}
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text())
        if data["status"] != "ok":
            continue
        for sample in data["samples"]:
            if sample["metric"] == metric:
                values.setdefault(data["environment"]["platform"], []).append(sample["value"])
    return values
