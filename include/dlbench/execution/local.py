"""Run a workload as a process on this host: the embedded ``bare_metal`` platform."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dlbench.config import Job
from dlbench.execution.base import Executor, finish, read_document
from dlbench.execution.targets import Target
from dlbench.workloads.result import ResultDocument

WORKLOAD_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "PYTHONPATH",
                "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "OMP_NUM_THREADS",
                "DLBENCH_TRACE_SYSCALLS")
WORKLOAD_ENV_PREFIXES = ("LC_", "TF_", "XLA_", "NCCL_")
"""What a workload may inherit from the worker: locale, paths, GPU and TensorFlow knobs. Never the
worker's wholesale environment (Airflow connections in AIRFLOW_CONN_*, cloud credentials in OS_*,
the warehouse URL...): a benchmark process has no business with them."""


def workload_environment(source: dict[str, str] | None = None) -> dict[str, str]:
    source = dict(os.environ if source is None else source)
    return {k: v for k, v in source.items() if k in WORKLOAD_ENV or k.startswith(WORKLOAD_ENV_PREFIXES)}


class LocalProcessExecutor(Executor):
    """``python -m dlbench.workloads ...`` in a fresh process, so elapsed time includes start-up."""

    def __init__(self, python: str | None = None, env: dict[str, str] | None = None) -> None:
        # None: the worker's own interpreter (it has dlbench.workloads and TensorFlow installed).
        self.python = python or sys.executable
        self.env = env

    def execute(self, job: Job, target: Target, archive_path: Path, timeout: float) -> ResultDocument:
        archive_path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="dlbench-job-") as tmp:
            out = Path(tmp) / "result.json"
            argv = [self.python, "-m", "dlbench.workloads", *job.workload_argv(str(out), target.data_dir)]
            env = {**workload_environment(), "TF_CPP_MIN_LOG_LEVEL": "2", **(self.env or {})}
            launched = time.monotonic()
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
                output, error = proc.stdout + proc.stderr, ""
                if proc.returncode != 0:
                    error = f"workload exited with status {proc.returncode}: {_last_line(output)}"
            except subprocess.TimeoutExpired as exc:
                output = _text(exc.stdout) + _text(exc.stderr)
                error = f"workload timed out after {timeout:.0f} s"
            doc, why = read_document(out)
            return finish(job, doc, archive_path, launched, error=error or (why if doc is None else ""), output=output)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else "(no output)"
