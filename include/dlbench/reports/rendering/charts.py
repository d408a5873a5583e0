"""Inline SVG charts drawn on the server (no JavaScript library, no CDN: the explorer works offline).

What a chart must never do, because a reader believes it: draw a point or bar outside its axes
(the axis is chosen from the data *and* its intervals, and its last tick is at or above the
largest of them: :func:`axis`), colour a platform differently from another chart (every platform
colour comes from :func:`dlbench.reports.rendering.palette.platform_color`), or put a higher-is-better and
a lower-is-better metric on one normalized axis without saying which way is good (a bar chart
takes one :class:`~dlbench.reports.analysis.metrics.Direction` and says it on the chart).

Every chart marks its plot area (``rect.plot-area``) and its data marks (``.point``, ``.bar``,
``.whisker``), each with ``data-series``, so tests can check in a real browser that every mark
lies inside the plot area and that a platform has one colour everywhere.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dlbench.reports.analysis.capacity import CapacityRow
from dlbench.reports.analysis.metrics import Direction
from dlbench.reports.rendering.palette import CHANGE_POINT, platform_color, series_color

DIRECTION_TEXT = {Direction.HIGHER: "↑ higher is better", Direction.LOWER: "↓ lower is better"}
FLAG_MARK = "⚠"


@dataclass(frozen=True)
class Bar:
    """One bar: its value, its interval (None: not stated, e.g. too few repetitions) and why not to
    trust it yet ("" when nothing is flagged; drawn as ⚠ above the bar, the reason as its tooltip)."""

    value: float
    low: float | None = None
    high: float | None = None
    flag: str = ""


def _finite(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def axis(values: Iterable[float | None], *, zero: bool = True, count: int = 5) -> list[float]:
    """Tick values for an axis that contains every value (None and NaN ignored): the first tick is
    at or below the smallest (and 0 when ``zero``), the last at or above the largest. The old rule
    (ticks up to the largest value × 1.05) stopped at the tick *below* it: a trend of 33.5 and 34.1
    got an axis ending at 30, a bar of 1.70 one ending at 1.5."""
    found = _finite(values)
    lo, hi = (min(found), max(found)) if found else (0.0, 1.0)
    if zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    span = hi - lo
    pad = span * 0.05 if span > 0 else (abs(hi) * 0.1 or 1.0)
    hi = hi + pad
    lo = lo - pad if lo < 0 or not zero else lo
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step + 1e-9) * step
    last = math.ceil(hi / step - 1e-9) * step
    ticks = [first + i * step for i in range(int(round((last - first) / step)) + 1)]
    return [round(t, 12) for t in ticks]


def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.3g}"


def _color(name: str, index: int, platforms: bool) -> str:
    return platform_color(name) if platforms else series_color(index)


def _empty(chart_id: str, width: int, note: str = "no data for this selection") -> str:
    return (f'<svg id="{chart_id}" class="chart empty" width="{width}" height="60" role="img">'
            f'<text x="10" y="30">{html.escape(note)}</text></svg>')


class _Frame:
    """The plot area of one chart and its y scale."""

    def __init__(self, width: int, height: int, left: int, right: int, top: int, bottom: int,
                 ticks: Sequence[float], inset: float = 0.0) -> None:
        self.left, self.top = left, top
        self.pw, self.ph = width - left - right, height - top - bottom
        self.y0, self.y1 = ticks[0], ticks[-1]
        self.ticks = ticks
        self.inset = inset
        """Pixels kept free at the top and bottom: a point (a circle) on the first or last tick is
        drawn whole inside the plot area, not half below it."""

    def y(self, value: float) -> float:
        span = self.ph - 2 * self.inset
        return self.top + self.inset + span - (value - self.y0) / ((self.y1 - self.y0) or 1) * span

    def open(self, chart_id: str, width: int, height: int, title: str, direction: Direction | None,
             y_label: str) -> list[str]:
        """The opening ``<svg>``, title, direction marker, plot area, y grid and y label."""
        out = [f'<svg id="{chart_id}" class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
               f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}"'
               + (f' data-direction="{direction.value}"' if direction else "") + ">",
               f'<text x="{self.left}" y="16" font-weight="bold">{html.escape(title)}</text>']
        if direction is not None:
            out.append(f'<text class="direction" data-direction="{direction.value}" x="{self.left + self.pw}" y="16" '
                       f'text-anchor="end" font-size="12" font-weight="bold">{DIRECTION_TEXT[direction]}</text>')
        out.append(f'<rect class="plot-area" x="{self.left}" y="{self.top}" width="{self.pw}" height="{self.ph}" '
                   f'fill="none" stroke="#bbb"/>')
        for t in self.ticks:
            y = self.y(t)
            out.append(f'<line x1="{self.left}" x2="{self.left + self.pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>'
                       f'<text x="{self.left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_fmt(t)}</text>')
        out.append(f'<text transform="translate(14,{self.top + self.ph / 2}) rotate(-90)" text-anchor="middle" '
                   f'font-size="12">{html.escape(y_label)}</text>')
        return out

    def legend(self, names: Sequence[str], colors: Sequence[str]) -> list[str]:
        out = []
        for i, (name, color) in enumerate(zip(names, colors, strict=True)):
            ly = self.top + 14 + i * 16
            out.append(f'<rect class="legend-swatch" data-series="{html.escape(name)}" x="{self.left + self.pw + 10}" '
                       f'y="{ly - 9}" width="10" height="10" fill="{color}"/>'
                       f'<text x="{self.left + self.pw + 24}" y="{ly}" font-size="11">{html.escape(name)}</text>')
        return out


def line_chart(series: Mapping[str, Sequence[tuple[float, float]]], *, x_label: str = "", y_label: str = "",
               title: str = "", width: int = 640, height: int = 300, x_names: Sequence[str] | None = None,
               marks: Mapping[str, Sequence[tuple[float, float]]] | None = None,
               intervals: Mapping[str, Sequence[tuple[float, float, float]]] | None = None,
               platforms: bool = True, zero: bool = True, direction: Direction | None = None,
               chart_id: str = "chart") -> str:
    """Lines with points; ``x_names`` labels integer x positions; ``marks`` (per series) are drawn
    as rings (change points); ``intervals`` (per series: x, low, high) as whiskers; ``direction``:
    which way is good for the metric drawn, said on the chart. ``platforms``:
    the series are platforms (their palette colours), else the non-platform series colours.
    Returns an ``<svg>`` element."""
    points = [p for s in series.values() for p in s]
    if not points:
        return _empty(chart_id, width)
    whiskers = [w for s in (intervals or {}).values() for w in s]
    xs = [p[0] for p in points]
    ticks = axis([p[1] for p in points] + [w[1] for w in whiskers] + [w[2] for w in whiskers], zero=zero)
    frame = _Frame(width, height, 64, 170, 28, 46, ticks, inset=5)
    x0, x1 = min(xs), max(xs)
    inset = frame.pw * 0.03  # a point on the first or last x is drawn whole, inside the plot area

    def px(x: float) -> float:
        if x0 == x1:
            return frame.left + frame.pw / 2
        return frame.left + inset + (x - x0) / (x1 - x0) * (frame.pw - 2 * inset)

    out = frame.open(chart_id, width, height, title, direction, y_label)
    base = frame.top + frame.ph
    if x_names is not None:
        step = max(1, math.ceil(len(x_names) / 8))
        out += [f'<text x="{px(i):.1f}" y="{base + 14}" text-anchor="middle" font-size="10">{html.escape(name)}</text>'
                for i, name in enumerate(x_names) if i % step == 0]
    else:
        out += [f'<text x="{px(t):.1f}" y="{base + 14}" text-anchor="middle" font-size="11">{_fmt(t)}</text>'
                for t in sorted(set(xs))]
    out.append(f'<text x="{frame.left + frame.pw / 2}" y="{height - 8}" text-anchor="middle" font-size="12">'
               f'{html.escape(x_label)}</text>')
    names = list(series)
    colors = [_color(name, i, platforms) for i, name in enumerate(names)]
    for name, color in zip(names, colors, strict=True):
        label = html.escape(name)
        for x, lo, hi in (intervals or {}).get(name, []):
            if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
                out.append(f'<line class="whisker" data-series="{label}" x1="{px(x):.1f}" x2="{px(x):.1f}" '
                           f'y1="{frame.y(hi):.1f}" y2="{frame.y(lo):.1f}" stroke="{color}" stroke-width="1.5"/>')
        pts = sorted(series[name])
        path = " ".join(f"{px(x):.1f},{frame.y(y):.1f}" for x, y in pts)
        out.append(f'<polyline class="series" data-series="{label}" fill="none" stroke="{color}" '
                   f'stroke-width="2" points="{path}"/>')
        out += [f'<circle class="point" data-series="{label}" cx="{px(x):.1f}" cy="{frame.y(y):.1f}" r="3" '
                f'fill="{color}"><title>{label}: {_fmt(y)}</title></circle>' for x, y in pts]
        out += [f'<circle class="change-point" data-series="{label}" cx="{px(x):.1f}" cy="{frame.y(y):.1f}" r="8" '
                f'fill="none" stroke="{CHANGE_POINT}" stroke-width="2"><title>change point</title></circle>'
                for x, y in (marks or {}).get(name, [])]
    out += frame.legend(names, colors)
    out.append("</svg>")
    return "".join(out)


def bar_chart(groups: Sequence[str], series: Mapping[str, Sequence[Bar | None]], *, y_label: str = "",
              title: str = "", reference: float | None = None, direction: Direction | None = None,
              width: int = 860, height: int = 380, platforms: bool = True, chart_id: str = "chart") -> str:
    """Grouped bars, one group per ``groups`` item and one bar per series (None: no bar), each with
    its interval as a whisker and ⚠ above it when flagged; a dashed line at ``reference`` (1.0 =
    bare metal on the normalized scale); ``direction``: which way is good for every metric drawn
    (one direction per chart: a caller with both draws two charts), said on the chart."""
    bars = [b for vs in series.values() for b in vs if b is not None]
    if not groups or not bars:
        return _empty(chart_id, width)
    ticks = axis([b.value for b in bars] + [b.low for b in bars] + [b.high for b in bars]
                 + ([reference] if reference is not None else []))
    frame = _Frame(width, height, 64, 190, 28, 140, ticks)
    names = list(series)
    colors = [_color(name, i, platforms) for i, name in enumerate(names)]
    group_w = frame.pw / len(groups)
    bar_w = max(2.0, group_w * 0.8 / max(1, len(names)))
    out = frame.open(chart_id, width, height, title, direction, y_label)
    zero_y = frame.y(max(frame.y0, 0.0))
    for g, group in enumerate(groups):
        gx = frame.left + g * group_w + group_w * 0.1
        for i, (name, color) in enumerate(zip(names, colors, strict=True)):
            bar = series[name][g]
            if bar is None:
                continue
            label, what = html.escape(name), html.escape(group)
            x = gx + i * bar_w
            top_y, base_y = sorted((frame.y(bar.value), zero_y))
            interval = ("" if bar.low is None or bar.high is None else f" [{bar.low:.3g}, {bar.high:.3g}]")
            flag = f" {FLAG_MARK} {html.escape(bar.flag)}" if bar.flag else ""
            out.append(f'<rect class="bar" data-series="{label}" data-group="{what}" x="{x:.1f}" y="{top_y:.1f}" '
                       f'width="{bar_w - 1:.1f}" height="{max(base_y - top_y, 0.5):.1f}" fill="{color}">'
                       f'<title>{what} / {label}: {bar.value:.3g}{interval}{flag}</title></rect>')
            cx, peak = x + (bar_w - 1) / 2, bar.value
            if bar.low is not None and bar.high is not None and math.isfinite(bar.low) and math.isfinite(bar.high):
                out.append(f'<line class="whisker" data-series="{label}" data-group="{what}" x1="{cx:.1f}" '
                           f'x2="{cx:.1f}" y1="{frame.y(bar.high):.1f}" y2="{frame.y(bar.low):.1f}" stroke="#222" '
                           f'stroke-width="1.2"/>')
                peak = max(peak, bar.high)
            if bar.flag:
                fy = max(frame.y(peak) - 3, frame.top + 11)
                out.append(f'<text class="flag" data-series="{label}" data-group="{what}" x="{cx:.1f}" y="{fy:.1f}" '
                           f'text-anchor="middle" font-size="11" fill="#a60">{FLAG_MARK}'
                           f'<title>{html.escape(bar.flag)}</title></text>')
        mid = frame.left + g * group_w + group_w / 2
        out.append(f'<text transform="translate({mid:.1f},{frame.top + frame.ph + 10}) rotate(30)" font-size="10">'
                   f'{html.escape(group if len(group) <= 44 else group[:43] + "…")}</text>')
    if reference is not None:
        out.append(f'<line class="reference" x1="{frame.left}" x2="{frame.left + frame.pw}" '
                   f'y1="{frame.y(reference):.1f}" y2="{frame.y(reference):.1f}" stroke="#333" '
                   f'stroke-dasharray="4 3"/>')
    out += frame.legend(names, colors)
    out.append("</svg>")
    return "".join(out)


def density_chart_svg(rows: Sequence[CapacityRow], width: int = 560, height: int = 300, title: str = "",
                      chart_id: str = "chart") -> str:
    """'density vs degradation' of one configuration: degradation (%) against instances per host,
    one line per platform (the palette's colours), the degradation's interval as whiskers."""
    series: dict[str, list[tuple[float, float]]] = {}
    whiskers: dict[str, list[tuple[float, float, float]]] = {}
    for r in rows:
        series.setdefault(r.platform, []).append((r.instances_per_host, r.degradation_pct))
        if r.degradation_ci_low is not None and r.degradation_ci_high is not None:
            whiskers.setdefault(r.platform, []).append((r.instances_per_host, r.degradation_ci_low,
                                                        r.degradation_ci_high))
    return line_chart(series, intervals=whiskers, x_label="instances per host", y_label="throughput degradation (%)",
                      width=width, height=height, title=title or "density vs degradation", chart_id=chart_id)
