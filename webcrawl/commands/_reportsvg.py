"""Inline SVG charts over the cycles for the report page: stacked bars, lines with markers, and
a panel that says why a chart has nothing to show. No script, no external file.

Every chart is one ``<svg class="chart" data-chart=KEY>`` with a ``<title>`` and a ``<desc>`` it
is labelled by (screen readers read them), a visible title, a legend when it has several series,
y tick labels, one x label per cycle (thinned when crowded), and one ``<g data-series=NAME>`` per
series holding its marks, each mark with a tooltip. Bars and lines share the same x bands, so the
cycles line up from chart to chart. Count axes tick on whole numbers only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["LARGE", "SMALL", "Axis", "Frame", "Series", "amount_axis", "bar_chart", "count_axis",
           "empty_chart", "fraction_axis", "line_chart"]


@dataclass(frozen=True)
class Frame:
    """A chart's size and margins (pixels); the legend sits between the title and the plot."""

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int

    @property
    def plot_w(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> float:
        return self.height - self.top - self.bottom


LARGE = Frame(560, 260, 56, 16, 58, 36)
SMALL = Frame(300, 176, 44, 10, 54, 30)


@dataclass(frozen=True)
class Axis:
    """A y axis from 0 to ``top``, its ticks and how a value is written."""

    top: float
    ticks: tuple[float, ...]
    label: Callable[[float], str]


@dataclass(frozen=True)
class Series:
    name: str
    colour: str
    values: Sequence[float | None]  #: one per cycle; None: nothing to draw there


def _steps() -> list[float]:
    return [m * 10.0 ** k for k in range(-4, 13) for m in (1, 2, 5)]


def _axis(largest: float, label: Callable[[float], str], smallest_step: float) -> Axis:
    largest = largest if largest > 0 and math.isfinite(largest) else smallest_step
    step = next(s for s in _steps() if s >= smallest_step and math.ceil(largest / s - 1e-9) <= 5)
    intervals = max(math.ceil(largest / step - 1e-9), 1)
    return Axis(step * intervals, tuple(step * k for k in range(intervals + 1)), label)


def count_axis(largest: float) -> Axis:
    """Whole-number ticks (a step of 1, 2, 5 x 10^k, at least 1) up to at most 5 intervals."""
    return _axis(largest, lambda v: f"{v:,.0f}", 1.0)


def amount_axis(largest: float, label: Callable[[float], str]) -> Axis:
    """Round ticks for amounts that need not be whole (costs in bytes or credits)."""
    return _axis(largest, label, 1e-4)


def fraction_axis() -> Axis:
    return Axis(1.0, (0.0, 0.25, 0.5, 0.75, 1.0), lambda v: f"{v:.0%}")


def _open(key: str, title: str, desc: str, frame: Frame, extra: str = "") -> list[str]:
    ident = f"chart-{key}"
    return [
        (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{ident}" data-chart="{escape(key)}"'
         f' width="{frame.width}" height="{frame.height}" viewBox="0 0 {frame.width} {frame.height}"'
         f' role="img" aria-labelledby="{ident}-t {ident}-d"{extra}>'),
        f'<title id="{ident}-t">{escape(title)}</title><desc id="{ident}-d">{escape(desc)}</desc>',
        f'<text x="4" y="16" class="title">{escape(title)}</text>',
    ]


def _legend(series: Sequence[Series], frame: Frame) -> list[str]:
    out, x = ['<g class="legend">'], 4.0
    for s in series:
        out.append(f'<g data-legend="{escape(s.name)}"><rect x="{x:.0f}" y="25" width="10" height="10" '
                   f'fill="{s.colour}"/><text x="{x + 14:.0f}" y="34">{escape(s.name)}</text></g>')
        x += 24 + 6.2 * len(s.name)
    return [*out, "</g>"]


def _y(axis: Axis, frame: Frame, value: float) -> float:
    return frame.top + frame.plot_h * (1 - min(max(value / axis.top, 0.0), 1.0))


def _grid(axis: Axis, frame: Frame, xs: Sequence[str]) -> list[str]:
    """Y ticks with grid lines, and the x labels under the band centres (thinned if crowded)."""
    out = ['<g class="axis">']
    for tick in axis.ticks:
        y = _y(axis, frame, tick)
        out.append(f'<line x1="{frame.left}" y1="{y:.1f}" x2="{frame.width - frame.right}" '
                   f'y2="{y:.1f}" class="grid"/><text x="{frame.left - 5}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{escape(axis.label(tick))}</text>')
    every = max(1, math.ceil(len(xs) / max(frame.plot_w // 34, 1)))
    base = frame.top + frame.plot_h
    for i, x in enumerate(xs):
        if i % every == 0 or i == len(xs) - 1:
            out.append(f'<text x="{_centre(frame, len(xs), i):.1f}" y="{base + 15}" '
                       f'text-anchor="middle" class="x">{escape(x)}</text>')
    out.append(f'<text x="{frame.left + frame.plot_w / 2:.1f}" y="{frame.height - 3}" '
               f'text-anchor="middle" class="axis-name">cycle</text>')
    return [*out, "</g>"]


def _ink(fill: str) -> str:
    """Text colour that reads on ``fill`` (``#rrggbb``): dark on light fills, white on dark."""
    r, g, b = (int(fill[k:k + 2], 16) for k in (1, 3, 5))
    return "#222" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#fff"


def _centre(frame: Frame, bands: int, i: int) -> float:
    return frame.left + frame.plot_w * (i + 0.5) / max(bands, 1)


def bar_chart(key: str, title: str, desc: str, xs: Sequence[str], stacks: Sequence[Series],
              axis: Axis, frame: Frame = LARGE, *, outline: Series | None = None,
              top_labels: Sequence[str] | None = None) -> str:
    """Stacked bars, one per cycle (``stacks`` bottom up); ``outline`` draws a dashed box per
    cycle behind the bar (a budget); ``top_labels`` are written above each bar."""
    band = frame.plot_w / max(len(xs), 1)
    width = max(min(band * 0.7, 60), 2)
    room = band >= 26  # values inside the bars only where they fit
    out = [*_open(key, title, desc, frame), *_legend([*stacks, *([outline] if outline else [])], frame),
           *_grid(axis, frame, xs)]
    if outline is not None:
        out.append(f'<g data-series="{escape(outline.name)}" class="outline">')
        for i, v in enumerate(outline.values):
            if v is not None and v > 0:
                y = _y(axis, frame, v)
                out.append(f'<rect x="{_centre(frame, len(xs), i) - width / 2 - 3:.1f}" y="{y:.1f}" '
                           f'width="{width + 6:.1f}" height="{_y(axis, frame, 0) - y:.1f}" fill="none" '
                           f'stroke="{outline.colour}" stroke-dasharray="4 3"><title>cycle {escape(xs[i])}, '
                           f'{escape(outline.name)}: {escape(axis.label(v))}</title></rect>')
        out.append("</g>")
    base = [0.0] * len(xs)
    for s in stacks:
        out.append(f'<g data-series="{escape(s.name)}">')
        for i, v in enumerate(s.values):
            if v is None or v <= 0:
                continue
            y0, y1 = _y(axis, frame, base[i]), _y(axis, frame, base[i] + v)
            x = _centre(frame, len(xs), i) - width / 2
            height = max(y0 - y1, 1.0)  # a small count stays visible
            out.append(f'<rect x="{x:.1f}" y="{y0 - height:.1f}" width="{width:.1f}" height="{height:.1f}" '
                       f'fill="{s.colour}"><title>cycle {escape(xs[i])}, {escape(s.name)}: '
                       f'{escape(axis.label(v))}</title></rect>')
            if room and height >= 14:
                out.append(f'<text x="{x + width / 2:.1f}" y="{y0 - height / 2 + 4:.1f}" style="fill:{_ink(s.colour)}" '
                           f'text-anchor="middle" class="inside">{escape(axis.label(v))}</text>')
            base[i] += v
        out.append("</g>")
    if top_labels is not None and band >= 30:
        out.append('<g class="values">')
        for i, text in enumerate(top_labels):
            top = max(base[i], (outline.values[i] or 0.0) if outline is not None else 0.0)
            out.append(f'<text x="{_centre(frame, len(xs), i):.1f}" y="{_y(axis, frame, top) - 4:.1f}" '
                       f'text-anchor="middle">{escape(text)}</text>')
        out.append("</g>")
    return "\n".join([*out, "</svg>"])


def line_chart(key: str, title: str, desc: str, xs: Sequence[str], series: Sequence[Series],
               axis: Axis, frame: Frame = LARGE, *, extra: Series | None = None) -> str:
    """Lines with a marker on every value and the value written by it (when the cycles leave
    room); gaps where a value is None. ``extra`` is one more point in a band of its own after
    the last cycle (its name is that band's label), drawn hollow and joined by a dotted line."""
    labels = [*xs, *([extra.name] if extra is not None else [])]
    bands, room = len(labels), frame.plot_w / max(len(labels), 1) >= 30
    out = [*_open(key, title, desc, frame)]
    if len(series) > 1:
        out += _legend(series, frame)
    out += _grid(axis, frame, labels)
    last: tuple[float, float] | None = None
    for s in series:
        out.append(f'<g data-series="{escape(s.name)}">')
        points: list[tuple[float, float] | None] = [
            None if v is None or not math.isfinite(v) else (_centre(frame, bands, i), _y(axis, frame, v))
            for i, v in enumerate(s.values)]
        run: list[str] = []
        for p in [*points, None]:
            if p is not None:
                run.append(f"{p[0]:.1f},{p[1]:.1f}")
            elif run:
                if len(run) > 1:
                    out.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{s.colour}" '
                               f'stroke-width="2"/>')
                run = []
        for i, p in enumerate(points):
            if p is None:
                continue
            value = axis.label(s.values[i])  # type: ignore[arg-type]
            out.append(f'<circle cx="{p[0]:.1f}" cy="{p[1]:.1f}" r="3.5" fill="{s.colour}">'
                       f'<title>cycle {escape(xs[i])}, {escape(s.name)}: {escape(value)}</title></circle>')
            if room:
                out.append(f'<text x="{p[0]:.1f}" y="{p[1] - 8:.1f}" text-anchor="middle">{escape(value)}</text>')
            last = p
        out.append("</g>")
    if extra is not None and extra.values and extra.values[0] is not None:
        v = extra.values[0]
        x, y = _centre(frame, bands, bands - 1), _y(axis, frame, v)
        out.append(f'<g data-series="{escape(extra.name)}">')
        if last is not None:
            out.append(f'<line x1="{last[0]:.1f}" y1="{last[1]:.1f}" x2="{x:.1f}" y2="{y:.1f}" '
                       f'stroke="{extra.colour}" stroke-dasharray="2 3"/>')
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="#fff" stroke="{extra.colour}" '
                   f'stroke-width="2"><title>{escape(extra.name)}: {escape(axis.label(v))}</title></circle>'
                   f'<text x="{x:.1f}" y="{y + 18 if y + 18 < frame.top + frame.plot_h - 2 else y - 9:.1f}" '
                   f'text-anchor="middle">{escape(axis.label(v))}</text></g>')
    return "\n".join([*out, "</svg>"])


def empty_chart(key: str, title: str, message: str, frame: Frame = LARGE) -> str:
    """A chart's frame with ``message`` (why there is nothing to draw) in place of its marks."""
    out = _open(key, title, message, frame, ' data-empty="true"')
    out.append(f'<rect x="{frame.left}" y="{frame.top}" width="{frame.plot_w:.0f}" height="{frame.plot_h:.0f}" '
               f'fill="#f6f6f6" stroke="#ccc" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{frame.left + frame.plot_w / 2:.1f}" y="{frame.top + frame.plot_h / 2 + 4:.1f}" '
               f'text-anchor="middle" class="message">{escape(message)}</text>')
    return "\n".join([*out, "</svg>"])
