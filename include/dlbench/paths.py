"""Where dlbench keeps its state on this host: one place for every local path.

``DLBENCH_HOME`` (default: ``<repo>/data`` for a checkout, ``~/.dlbench`` otherwise) holds the
SQLite warehouse, generated datasets, and the staging copies of documents and reports. What
tasks hand to each other goes through the shared store (:mod:`dlbench.storage`, default
``file://`` this same directory) and run secrets (:mod:`dlbench.providers.run_secrets`).
"""

from __future__ import annotations

from pathlib import Path

from dlbench import settings


def home() -> Path:
    """``DLBENCH_HOME`` and its default (:func:`dlbench.settings.home`, docs/settings.md)."""
    return settings.home()


def results_dir() -> Path:
    """Raw result documents, archived before loading: ``results/<run_id>/<job_id>.json``."""
    return home() / "results"


def datasets_dir() -> Path:
    return home() / "datasets"


def reports_dir() -> Path:
    return home() / "reports"


def runs_dir() -> Path:
    """Legacy per-run local state; per-run state is now ``runs/<run>`` in the shared store and
    secrets are run secrets. Still removed by release, for runs started by an older version."""
    return home() / "runs"
