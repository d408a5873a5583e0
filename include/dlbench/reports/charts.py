"""Inline SVG charts drawn on the server (no JavaScript library, no CDN: the explorer works offline)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"]


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    return [first + i * step for i in range(count + 2) if first + i * step <= hi + step * 0.001]


def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.3g}"


def _empty(chart_id: str, width: int) -> str:
    return (f'<svg id="{chart_id}" class="chart" width="{width}" height="60" role="img">'
            f'<text x="10" y="30">no data for this selection</text></svg>')


def _frame(chart_id: str, width: int, height: int, title: str, left: float, pw: float,
           ticks: Sequence[tuple[float, float]]) -> list[str]:
    """The opening ``<svg>``, the title and the y grid (value, pixel y) both charts share."""
    out = [f'<svg id="{chart_id}" class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">',
           f'<text x="{left}" y="16" font-weight="bold">{html.escape(title)}</text>']
    for t, y in ticks:
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_fmt(t)}</text>')
    return out


def line_chart(series: Mapping[str, Sequence[tuple[float, float]]], *, x_label: str = "", y_label: str = "",
               title: str = "", width: int = 640, height: int = 300, x_names: Sequence[str] | None = None,
               marks: Mapping[str, Sequence[tuple[float, float]]] | None = None, chart_id: str = "chart") -> str:
    """Lines with points; ``x_names`` labels integer x positions; ``marks`` (per series) are drawn
    as red rings (change points). Returns an ``<svg>`` element."""
    left, right, top, bottom = 64, 150, 28, 46
    points = [p for s in series.values() for p in s]
    if not points:
        return _empty(chart_id, width)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    yt = _ticks(min(0.0, min(ys)), max(ys) * 1.05 if max(ys) > 0 else 1.0)
    y0, y1 = yt[0], yt[-1]
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + ph - (y - y0) / ((y1 - y0) or 1) * ph

    out = _frame(chart_id, width, height, title, left, pw, [(t, py(t)) for t in yt])
    if x_names is not None:
        step = max(1, len(x_names) // 8)
        for i, name in enumerate(x_names):
            if i % step == 0:
                out.append(f'<text x="{px(i):.1f}" y="{top + ph + 14}" text-anchor="middle" font-size="10">'
                           f'{html.escape(name)}</text>')
    else:
        for t in sorted(set(xs)):
            out.append(f'<text x="{px(t):.1f}" y="{top + ph + 14}" text-anchor="middle" font-size="11">'
                       f'{_fmt(t)}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 8}" text-anchor="middle" font-size="12">'
               f'{html.escape(x_label)}</text>')
    out.append(f'<text transform="translate(14,{top + ph / 2}) rotate(-90)" text-anchor="middle" font-size="12">'
               f'{html.escape(y_label)}</text>')
    for i, (name, pts) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        pts = sorted(pts)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline class="series" data-series="{html.escape(name)}" fill="none" stroke="{color}" '
                   f'stroke-width="2" points="{path}"/>')
        out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}"><title>{html.escape(name)}: '
                f'{_fmt(y)}</title></circle>' for x, y in pts]
        for x, y in (marks or {}).get(name, []):
            out.append(f'<circle class="change-point" cx="{px(x):.1f}" cy="{py(y):.1f}" r="8" fill="none" '
                       f'stroke="#d62728" stroke-width="2"><title>change point</title></circle>')
        ly = top + 14 + i * 16
        out.append(f'<rect x="{left + pw + 10}" y="{ly - 9}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{left + pw + 24}" y="{ly}" font-size="11">{html.escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def bar_chart(groups: Sequence[str], series: Mapping[str, Sequence[float | None]], *, y_label: str = "",
              title: str = "", reference: float | None = None, width: int = 860, height: int = 380,
              chart_id: str = "chart") -> str:
    """Grouped bars: one group per ``groups`` item, one bar per series (None: no bar); a dashed
    line at ``reference`` (1.0 = bare metal on the normalized scale)."""
    values = [v for vs in series.values() for v in vs if v is not None]
    if not groups or not values:
        return _empty(chart_id, width)
    left, right, top, bottom = 64, 190, 28, 140
    pw, ph = width - left - right, height - top - bottom
    yt = _ticks(min(0.0, min(values)), max(max(values), reference or 0) * 1.08)
    y0, y1 = yt[0], yt[-1]

    def py(y: float) -> float:
        return top + ph - (y - y0) / ((y1 - y0) or 1) * ph

    names = list(series)
    group_w = pw / len(groups)
    bar_w = max(2.0, group_w * 0.8 / max(1, len(names)))
    out = _frame(chart_id, width, height, title, left, pw, [(t, py(t)) for t in yt])
    for g, group in enumerate(groups):
        gx = left + g * group_w + group_w * 0.1
        for i, name in enumerate(names):
            v = series[name][g]
            if v is None:
                continue
            top_y, base_y = sorted((py(v), py(max(y0, 0.0))))
            out.append(f'<rect class="bar" data-series="{html.escape(name)}" x="{gx + i * bar_w:.1f}" '
                       f'y="{top_y:.1f}" width="{bar_w - 1:.1f}" height="{max(base_y - top_y, 0.5):.1f}" '
                       f'fill="{COLORS[i % len(COLORS)]}"><title>{html.escape(group)} / {html.escape(name)}: '
                       f'{v:.3g}</title></rect>')
        cx = left + g * group_w + group_w / 2
        out.append(f'<text transform="translate({cx:.1f},{top + ph + 10}) rotate(30)" font-size="10">'
                   f'{html.escape(group if len(group) <= 44 else group[:43] + "…")}</text>')
    if reference is not None:
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{py(reference):.1f}" y2="{py(reference):.1f}" '
                   f'stroke="#333" stroke-dasharray="4 3"/>')
    out.append(f'<text transform="translate(14,{top + ph / 2}) rotate(-90)" text-anchor="middle" font-size="12">'
               f'{html.escape(y_label)}</text>')
    for i, name in enumerate(names):
        ly = top + 14 + i * 16
        out.append(f'<rect x="{left + pw + 10}" y="{ly - 9}" width="10" height="10" fill="{COLORS[i % len(COLORS)]}"/>'
                   f'<text x="{left + pw + 24}" y="{ly}" font-size="11">{html.escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)
