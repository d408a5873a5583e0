"""The raw result archive: ``results/<run_id>/<job_id>.json`` in the shared store
(:mod:`dlbench.storage`; default ``$DLBENCH_HOME/results``), plus one ``run.info.json`` per run
(its request, DAG, provider and tags: the archive describes itself).

Executors write a document to this worker's staging path (:func:`archive_path`, under
``$DLBENCH_HOME/results``) and the job step publishes it to the store (:func:`publish`); with the
default ``file://$DLBENCH_HOME`` store both are the same file and publishing does nothing. Loads
read the store (:func:`run_documents`), so any worker loads what any other worker archived.

Executors write every document here *before* it is loaded, so the warehouse can always be
rebuilt from files (after a migration, on another database, after a failed load). This module
is the one place that knows the layout; writers and :func:`reload_archive` both use it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dlbench import paths, storage
from dlbench.workloads.result import ResultDocument


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


def archive_key(run_id: str, name: str) -> str:
    """The document's key in the store: ``results/<run_id>/<name>``."""
    return f"results/{_component('run_id', run_id)}/{_component('name', name)}"


def publish(run_id: str, path: str | os.PathLike[str]) -> str:
    """Put a staged document into the shared store (atomically: readers see all of it or nothing);
    the staged copy is dropped when the store is elsewhere. Returns where it is now."""
    source = Path(path)
    store = storage.store()
    key = archive_key(run_id, source.name)
    where = store.upload(source, key)
    if not store.holds_in_place(key, source):
        source.unlink(missing_ok=True)
    return where


def write_run_info(run_id: str, info: dict[str, Any]) -> str:
    """Archive what the controller knows about a run (no secrets: request and tags only) in the
    store, atomically, so ``reload-archive`` rebuilds the run row completely."""
    text = json.dumps({"run_id": run_id, **info}, indent=2, sort_keys=True, default=str) + "\n"
    return storage.store().write_text(archive_key(run_id, RUN_INFO), text)


def read_run_info(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    path = Path(run_dir) / RUN_INFO
    return json.loads(path.read_text()) if path.exists() else None


def run_info(run_id: str) -> dict[str, Any] | None:
    """The run's ``run.info.json`` from the store (None when it has none)."""
    try:
        return json.loads(storage.store().read_text(archive_key(run_id, RUN_INFO)))
    except FileNotFoundError:
        return None


def run_documents(run_id: str) -> list[Any]:
    """Every archived document of a run in the store: local paths on ``file://`` (the warehouse
    records where each came from), parsed :class:`ResultDocument` objects elsewhere."""
    store = storage.store()
    keys = [k for k in store.list(f"results/{_component('run_id', run_id)}", suffix=".json")
            if k.rsplit("/", 1)[-1] != RUN_INFO]
    if store.local:
        return [store.local_path(k) for k in keys]
    return [ResultDocument.parse(store.read_text(k)) for k in keys]


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
