"""The report as one self-contained HTML page: tables, and line charts over the cycles drawn as
inline SVG (no script, no external file, no plotting library). The page is well-formed XML
(XHTML syntax), so any XML parser can check it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape

__all__ = ["Chart", "line_chart", "page"]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
TOTAL_COLOUR = "#222222"
WIDTH, HEIGHT = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 24, 36

Series = Mapping[str, Sequence[float | None]]  # name -> one value (or gap) per x


def _nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at least ``value`` (an axis that ends on a round number)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value * (1 - 1e-12))


def _number(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e6 or abs(value) < 1e-3:
        return f"{value:.2g}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def line_chart(title: str, xs: Sequence[int], series: Series, *, percent: bool = False) -> str:
    """One ``<svg>`` line chart: a line per series (``total`` drawn thick and dark), gaps where a
    value is ``None``, y from 0 to a round maximum, x the cycle ids."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    values = [v for vs in series.values() for v in vs if v is not None and math.isfinite(v)]
    top = 1.0 if percent else _nice_max(max(values, default=0.0))
    span = max(len(xs) - 1, 1)

    def x_at(i: int) -> float:
        return LEFT + (plot_w * i / span if len(xs) > 1 else plot_w / 2)

    def y_at(v: float) -> float:
        return TOP + plot_h * (1 - min(max(v / top, 0.0), 1.0))

    fmt: Callable[[float], str] = (lambda v: f"{v:.0%}") if percent else _number
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">'),
           f'<text x="{LEFT}" y="{TOP - 8}" class="title">{escape(title)}</text>']
    for k in range(5):
        tick = top * k / 4
        y = y_at(tick)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(fmt(tick))}</text>')
    step = max(1, math.ceil(len(xs) / 12))
    for i, x in enumerate(xs):
        if i % step == 0 or i == len(xs) - 1:
            out.append(f'<text x="{x_at(i):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{x}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 4}" text-anchor="middle">cycle</text>')
    for n, (name, vs) in enumerate(series.items()):
        colour = TOTAL_COLOUR if name == "total" else PALETTE[n % len(PALETTE)]
        width = 2.5 if name == "total" else 1.5
        segment: list[str] = []
        for i, v in enumerate([*vs, None]):
            if v is not None and math.isfinite(v):
                segment.append(f"{x_at(i):.1f},{y_at(v):.1f}")
                out.append(f'<circle cx="{x_at(i):.1f}" cy="{y_at(v):.1f}" r="2.5" fill="{colour}">'
                           f'<title>{escape(name)}, cycle {xs[i]}: {escape(fmt(v))}</title></circle>')
            elif segment:
                out.append(f'<polyline points="{" ".join(segment)}" fill="none" stroke="{colour}" '
                           f'stroke-width="{width}"/>')
                segment = []
        y = TOP + 14 * n + 6
        out.append(f'<line x1="{WIDTH - RIGHT + 12}" y1="{y}" x2="{WIDTH - RIGHT + 30}" y2="{y}" '
                   f'stroke="{colour}" stroke-width="{width}"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 36}" y="{y + 4}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


Chart = tuple[str, Series, bool]  # title, series, percent axis


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, summary: Sequence[str], tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[str]]]],
         xs: Sequence[int], charts: Sequence[Chart]) -> str:
    """The whole page: a heading, summary lines, captioned tables, then the charts."""
    parts = [
        '<!DOCTYPE html>',
        '<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head><meta charset="utf-8"/>',
        f"<title>{escape(title)}</title>",
        ("<style>body{font:14px system-ui,sans-serif;margin:2em;color:#222}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
        "text-align:right}td:first-child,th:first-child{text-align:left}"
        "svg text{font:11px system-ui,sans-serif;fill:#333}svg .title{font-weight:bold;font-size:13px}"
        "svg .grid{stroke:#e4e4e4}figure{display:inline-block;margin:0 1em 1em 0}</style>"),
        "</head><body>", f"<h1>{escape(title)}</h1>",
    ]
    parts += [f"<p>{escape(line)}</p>" for line in summary]
    for caption, header, rows in tables:
        parts.append(f"<h2>{escape(caption)}</h2>")
        parts.append(_table(header, rows))
    if len(xs) and charts:
        parts.append("<h2>Over the cycles</h2>")
        parts += [f"<figure>{line_chart(t, xs, s, percent=p)}</figure>" for t, s, p in charts]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
