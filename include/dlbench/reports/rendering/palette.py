"""One colour per platform, everywhere: the HTML report, its PNG figures, the explorer's SVG charts.

A reader compares charts by colour; bare metal blue in one and orange in another makes them
compare the wrong bars. Every drawing asks :func:`platform_color`; nothing else names a platform
colour. Series that are not platforms (a trend's cases, a metric) take :data:`SERIES` in order.
The four platform colours are seaborn's "deep" palette (readable on white, distinct in greyscale
print); :data:`SERIES` avoids them so a non-platform series is never mistaken for a platform.
"""

from __future__ import annotations

PLATFORM_COLORS: dict[str, str] = {
    "bare_metal": "#4c72b0",
    "container_on_bare_metal": "#55a868",
    "virtual_machine": "#dd8452",
    "container_on_vm": "#c44e52",
}
"""The hosting options of the core study, in its order."""

OTHER_PLATFORM = "#8c8c8c"
"""A platform outside the four (a user's own label)."""

SERIES = ["#8172b3", "#937860", "#da8bc3", "#ccb974", "#64b5cd", "#1b1b1b", "#17becf", "#7f7f7f"]
"""Non-platform series, in order (cycled)."""

CHANGE_POINT = "#d62728"


def platform_color(platform: str) -> str:
    """The platform's colour (the same in every chart, table swatch and figure)."""
    return PLATFORM_COLORS.get(platform, OTHER_PLATFORM)


def series_color(index: int) -> str:
    """The ``index``-th non-platform series' colour."""
    return SERIES[index % len(SERIES)]
