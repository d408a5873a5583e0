"""Where dlbench keeps its state on the controller: one place for every path.

``DLBENCH_HOME`` (default: ``<repo>/data`` for a checkout, ``~/.dlbench`` otherwise) holds the
SQLite warehouse, the raw result archive, generated datasets, reports and per-run secrets.
"""

from __future__ import annotations

import os
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]


def home() -> Path:
    env = os.environ.get("DLBENCH_HOME")
    if env:
        return Path(env)
    if (_REPO / "pyproject.toml").exists():
        return _REPO / "data"
    return Path.home() / ".dlbench"


def results_dir() -> Path:
    """Raw result documents, archived before loading: ``results/<run_id>/<job_id>.json``."""
    return home() / "results"


def datasets_dir() -> Path:
    return home() / "datasets"


def reports_dir() -> Path:
    return home() / "reports"


def runs_dir() -> Path:
    """Per-run private state (SSH keys...), never sent through XCom."""
    return home() / "runs"
