"""Tiny inline-SVG charts (stacked bars, line charts) for a report that needs no network."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

__all__ = ["line_chart", "stacked_bars"]

PALETTE = {
    "data": "#d62728", "collective": "#9467bd", "h2d": "#ff7f0e", "optimizer": "#2ca02c",
    "backward": "#1f77b4", "forward": "#17becf", "other": "#bbbbbb",
}
_SERIES = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return 10 * exp


def _axes(w: int, h: int, left: int, bottom: int, ymax: float, ylabel: str,
          xlabels: Sequence[tuple[float, str]]) -> list[str]:
    out = [f'<line x1="{left}" y1="10" x2="{left}" y2="{h - bottom}" stroke="#444"/>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - 10}" y2="{h - bottom}" stroke="#444"/>']
    for i in range(5):
        val = ymax * i / 4
        y = h - bottom - (h - bottom - 10) * i / 4
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - 10}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="11">'
                   f'{val:g}</text>')
    out.append(f'<text x="12" y="{(h - bottom) / 2:.0f}" font-size="11" '
               f'transform="rotate(-90 12 {(h - bottom) / 2:.0f})" text-anchor="middle">'
               f'{escape(ylabel)}</text>')
    for x, label in xlabels:
        out.append(f'<text x="{x:.1f}" y="{h - bottom + 14}" text-anchor="middle" '
                   f'font-size="11">{escape(label)}</text>')
    return out


def _legend(items: Sequence[tuple[str, str]], x: int, y: int) -> list[str]:
    out = []
    for name, color in items:
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{x + 14}" y="{y}" font-size="11">{escape(name)}</text>')
        x += 14 + 7 * len(name) + 14
    return out


def stacked_bars(rows: Sequence[dict[str, float]], order: Sequence[str], *,
                 labels: Sequence[str] | None = None, marks: Sequence[str] | None = None,
                 title: str = "", ylabel: str = "ms", width: int = 900, height: int = 300) -> str:
    """One stacked bar per row (a step), segments in ``order``; ``marks`` tints a bar's label."""
    left, bottom = 56, 40
    ymax = _nice_max(max((sum(r.get(k, 0.0) for k in order) for r in rows), default=1.0))
    n = max(1, len(rows))
    plot_w = width - left - 10
    bw = plot_w / n
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img"><title>{escape(title)}</title>']
    step_every = max(1, n // 20)
    xl = [(left + bw * (i + 0.5), labels[i] if labels else str(i)) for i in range(0, n, step_every)]
    parts += _axes(width, height, left, bottom, ymax, ylabel, xl)
    scale = (height - bottom - 10) / ymax
    for i, r in enumerate(rows):
        y = float(height - bottom)
        x = left + bw * i + bw * 0.1
        tip_rows = [f"step {labels[i] if labels else i}"
                    + (f" ({marks[i]})" if marks and marks[i] else "")]
        for k in order:
            v = r.get(k, 0.0)
            if v <= 0:
                continue
            hh = v * scale
            y -= hh
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw * 0.8:.1f}" height="{hh:.1f}" '
                         f'fill="{PALETTE.get(k, "#888")}"'
                         + (' opacity="0.45"' if marks and marks[i] else "") + "/>")
            tip_rows.append(f"{k}: {v:.2f} ms")
        parts.append(f'<rect x="{left + bw * i:.1f}" y="10" width="{bw:.1f}" '
                     f'height="{height - bottom - 10}" fill="transparent"><title>'
                     f'{escape(chr(10).join(tip_rows))}</title></rect>')
    parts += _legend([(k, PALETTE.get(k, "#888")) for k in order], left, height - 8)
    parts.append("</svg>")
    return "".join(parts)


def line_chart(series: Sequence[tuple[str, Sequence[float], Sequence[float | None]]], *,
               title: str = "", ylabel: str = "", xlabel: str = "s", ymax: float | None = None,
               shade: Sequence[tuple[float, float]] = (), width: int = 900, height: int = 220,
               integer_x: bool = False) -> str:
    """Lines sharing one x axis (seconds); ``None`` values leave gaps; ``shade`` marks spans;
    ``integer_x`` puts ticks on whole numbers only (step indices)."""
    left, bottom = 56, 40
    xs_all = [x for _, xs, _ in series for x in xs]
    ys_all = [y for _, _, ys in series for y in ys if y is not None]
    x0, x1 = (min(xs_all), max(xs_all)) if xs_all else (0.0, 1.0)
    if x1 <= x0:
        x1 = x0 + 1.0
    top = ymax if ymax is not None else _nice_max(max(ys_all, default=1.0))
    plot_w, plot_h = width - left - 10, height - bottom - 10

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return height - bottom - min(y, top) / top * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img"><title>{escape(title)}</title>']
    for a, b in shade:
        parts.append(f'<rect x="{px(max(a, x0)):.1f}" y="10" width="{max(0.5, px(min(b, x1)) - px(max(a, x0))):.1f}" '
                     f'height="{plot_h}" fill="#fde0dc" opacity="0.6"/>')
    if integer_x:
        every = max(1, math.ceil((x1 - x0) / 5))
        first = math.ceil(x0)
        ticks = [(px(float(v)), f"{v}{xlabel}") for v in range(first, math.floor(x1) + 1, every)]
    else:
        ticks = [(px(x0 + (x1 - x0) * i / 5), f"{x0 + (x1 - x0) * i / 5:.1f}{xlabel}") for i in range(6)]
    parts += _axes(width, height, left, bottom, top, ylabel, ticks)
    legend = []
    for i, (name, xs, ys) in enumerate(series):
        color = _SERIES[i % len(_SERIES)]
        legend.append((name, color))
        path: list[str] = []
        pen = False
        for x, y in zip(xs, ys, strict=False):
            if y is None:
                pen = False
                continue
            path.append(f"{'L' if pen else 'M'}{px(x):.1f},{py(y):.1f}")
            pen = True
        if path:
            parts.append(f'<path d="{" ".join(path)}" fill="none" stroke="{color}" '
                         f'stroke-width="1.5"/>')
    parts += _legend(legend, left, height - 8)
    parts.append("</svg>")
    return "".join(parts)
