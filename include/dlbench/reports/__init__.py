"""Reports: comparisons and plots built from the warehouse."""

from __future__ import annotations

from typing import Any


def build_report(*args: Any, **kwargs: Any) -> Any:
    """See :func:`dlbench.reports.render.build_report` (imported lazily: pandas, matplotlib)."""
    from dlbench.reports.render import build_report as build

    return build(*args, **kwargs)


def text_table(*args: Any, **kwargs: Any) -> Any:
    """See :func:`dlbench.reports.render.text_table`."""
    from dlbench.reports.render import text_table as table

    return table(*args, **kwargs)
