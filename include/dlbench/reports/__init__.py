"""Reports: comparisons and plots built from the warehouse.

One module per output format: :mod:`~dlbench.reports.text` (the fixed-width table printed at the
end of a run), :mod:`~dlbench.reports.html` (the self-contained page and :func:`build_report`),
:mod:`~dlbench.reports.rendering.figures` (PNG charts), :mod:`~dlbench.reports.rendering.exports` (comparison.csv and
.json); the study figures are :mod:`~dlbench.reports.sections.scenarios`, the numbers
:mod:`~dlbench.reports.analysis.compare` and :mod:`~dlbench.reports.analysis.stats`.

``build_report`` and ``text_table`` are found here, as callers always did, but loaded only when
first used (PEP 562): importing this package must not import pandas, matplotlib or SQLAlchemy,
which a CLI or a DAG file that never writes a report does not need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlbench.reports.html import build_report
    from dlbench.reports.text import text_table

_LAZY = {"build_report": "dlbench.reports.html", "text_table": "dlbench.reports.text"}
"""Name -> the module that defines it, imported on first access (heavy: pandas, SQLAlchemy)."""

__all__ = ["build_report", "text_table"]


def __getattr__(name: str) -> Any:
    """``dlbench.reports.build_report`` / ``text_table``: imported from their module on first use."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
