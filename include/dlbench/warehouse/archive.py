"""The raw result archive: ``$DLBENCH_HOME/results/<run_id>/<job_id>.json``, plus one
``run.info.json`` per run (its request, DAG, provider and tags: the archive describes itself).

Executors write every document here *before* it is loaded, so the warehouse can always be
rebuilt from files (after a migration, on another database, after a failed load). This module
is the one place that knows the layout; writers and :func:`reload_archive` both use it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dlbench import paths


def _component(kind: str, value: str) -> str:
    """Refuse ids that would escape the archive directory (they become file names)."""
    if not value or value in (".", "..") or "/" in value or "\\" in value or "\0" in value:
        raise ValueError(f"{kind} {value!r} cannot be used as an archive file name "
                         "(empty, '.', '..' or containing a path separator)")
    return value


def archive_root() -> Path:
    """Where every run's documents live."""
    return paths.results_dir()


def archive_dir(run_id: str) -> Path:
    """The directory holding one run's documents (not created here)."""
    return archive_root() / _component("run_id", run_id)


def archive_path(run_id: str, job_id: str) -> Path:
    """Where the document of ``job_id`` in ``run_id`` is archived."""
    return archive_dir(run_id) / f"{_component('job_id', job_id)}.json"


RUN_INFO = "run.info.json"
"""Per run: ``{"run_id", "dag_id", "provider", "profile", "scheduled", "request", "tags"}``."""


def write_run_info(run_id: str, info: dict[str, Any]) -> Path:
    """Archive what the controller knows about a run (no secrets: request and tags only),
    atomically (write then rename), so ``reload-archive`` rebuilds the run row completely."""
    path = archive_dir(run_id) / RUN_INFO
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"run_id": run_id, **info}, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
    return path


def read_run_info(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    path = Path(run_dir) / RUN_INFO
    return json.loads(path.read_text()) if path.exists() else None


def archive_files(path: str | os.PathLike[str]) -> list[Path]:
    """Every archived document under ``path`` (one file, one run's directory or the whole tree).

    Hidden files are skipped: ``ResultDocument.write`` writes ``.<name>.tmp`` first and renames,
    so a half-written document is never picked up; so is the run's ``run.info.json``.
    """
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise FileNotFoundError(f"no result archive at {root}")
    return sorted(p for p in root.rglob("*.json") if not p.name.startswith(".") and p.name != RUN_INFO)
