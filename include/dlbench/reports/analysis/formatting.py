"""Number formats shared by the report's text table and its HTML page, so both print a value,
an interval and a case's scenario the same way."""

from __future__ import annotations

import math

from dlbench.reports.analysis import compare


def fmt(value: float | None, digits: int = 4) -> str:
    """``digits`` significant digits; "-" for a missing value (None, NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}g}"


def ratio(value: float | None) -> str:
    """A ratio to bare metal (×BM) with 3 significant digits, trailing zeros kept (``1.00``, not
    ``1``: a reader compares 1.00 with 0.98 digit by digit); "-" when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:#.3g}"


def ci_text(low: float | None, high: float | None, digits: int = 3) -> str:
    """``[low, high]`` of an interval; "-" when either end is missing (None, NaN)."""
    if low is None or high is None or low != low or high != high:
        return "-"
    return f"[{low:.{digits}g}, {high:.{digits}g}]"


def scenario_note(scenario: str) -> str:
    """`` (shared)`` after a case of another scenario than single; nothing for single."""
    return "" if scenario == compare.SINGLE else f" ({scenario})"


def platform_index(platform: str) -> int:
    """The platform's place in the study's order (bare metal first), unknown platforms last."""
    order = compare.PLATFORM_ORDER
    return order.index(platform) if platform in order else len(order)
