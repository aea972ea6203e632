"""The report as one self-contained HTML page: headline figures, charts over the cycles, small
multiples per page type, then the tables, each metric explained in a sentence.

Inline SVG (:mod:`webcrawl.commands._reportsvg`) and inline CSS only: no script, no font, no
external file. The page is well-formed XML (XHTML syntax), so any XML parser can check it.
Figures a crawl did not record (coverage, idle share) are said to be "not recorded", never drawn
from invented numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from webcrawl.commands._reportdata import NO_TYPE, TOTAL_ROW, CycleFigures, Row
from webcrawl.commands._reportsvg import (
    SMALL,
    Axis,
    Series,
    amount_axis,
    bar_chart,
    count_axis,
    empty_chart,
    fraction_axis,
    line_chart,
)
from webcrawl.commands._reporttext import (
    METRICS,
    TYPE_HEADER,
    cycle_table,
    format_cost,
    freshness_note,
    percent,
    type_table,
    utc,
)

__all__ = ["page"]

NEW, CHANGED, NO_CHANGE = "#0072B2", "#E69F00", "#BBBBBB"  # Okabe-Ito: safe for colour blindness
SPENT, IDLE, BUDGET, FRESH, PRICE = "#009E73", "#F0E442", "#555555", "#0072B2", "#CC79A7"
FETCHED, WAITING, NEVER = "#0072B2", "#56B4E9", "#D5D5D5"

STYLE = (
    "body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1220px;padding:0 1em;color:#222}"
    "h1{font-size:1.6em;margin:0 0 .2em}h2{margin:1.6em 0 .4em;border-bottom:1px solid #ddd}"
    ".lead{color:#555;margin:0 0 1em}.tiles{display:flex;flex-wrap:wrap;gap:.8em;margin:1em 0}"
    ".tile{border:1px solid #ddd;border-radius:6px;padding:.5em .9em;min-width:9em}"
    ".tile b{display:block;font-size:1.5em}.tile span{color:#555}"
    ".grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(570px,100%),1fr));gap:1em}"
    ".small{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(310px,100%),1fr));gap:.6em 1em}"
    "figure{margin:0}figcaption{color:#444;max-width:560px;font-size:13px}"
    ".type h3{margin:.6em 0 .1em;font-size:1.05em}.type p{margin:0;color:#555;font-size:13px}"
    "table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:right}td:first-child,th:first-child{text-align:left}tr:last-child td{font-weight:bold}"
    "dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em;font-size:13px}dt{font-weight:bold}"
    "dd{margin:0}svg text{font:11px system-ui,sans-serif;fill:#333}svg .title{font-weight:bold;font-size:13px}"
    "svg .grid{stroke:#e6e6e6}svg text.inside{font-weight:bold}svg .message{font-size:13px;fill:#666}"
    "svg .axis-name{fill:#777}svg.chart{max-width:100%;height:auto}")


def _outcomes(rows: Sequence[Row | None]) -> list[Series]:
    def pick(get: str) -> list[float | None]:
        return [None if r is None else getattr(r, get) for r in rows]
    return [Series("new", NEW, pick("new")), Series("changed", CHANGED, pick("changed")),
            Series("no change", NO_CHANGE, pick("no_change"))]


def _money_axis(largest: float, unit: str) -> Axis:
    if unit in ("requests", "credits") and largest >= 5:
        return count_axis(largest)
    return amount_axis(largest, lambda v: format_cost(v, unit))


def _figure(svg: str, *sentences: str) -> str:
    caption = " ".join(escape(s) for s in sentences if s)
    return f"<figure>{svg}<figcaption>{caption}</figcaption></figure>"


def _cycle_figures(cycles: Sequence[CycleFigures], unit: str, now: float | None,
                   now_at: float | None) -> list[str]:
    xs = [str(c.id) for c in cycles]
    totals = [c.total for c in cycles]
    # Shares of each cycle's own budget: a discovery cycle's large budget does not flatten the rest.
    def share(c: CycleFigures, amount: float | None) -> float | None:
        return None if amount is None or not c.budget else amount / c.budget

    spent = [share(c, c.spent) for c in cycles]
    idle = [share(c, c.idle) for c in cycles]
    stacks = [Series("spent", SPENT, spent)]
    if any(i is not None for i in idle):
        stacks.append(Series("idle", IDLE, idle))
    spend = bar_chart("spend", "Spend against budget", "Each cycle's spend as a share of its budget.", xs, stacks,
                      fraction_axis(), outline=Series("budget", BUDGET, [1.0 if c.budget else None for c in cycles]),
                      top_labels=[f"{format_cost(c.spent, unit)} of {format_cost(c.budget, unit)}" for c in cycles])
    shares = [f"cycle {c.id} {percent(c.idle_share)}" for c in cycles if c.idle_share is not None]
    missing = [str(c.id) for c in cycles if c.idle_share is None]
    idle_note = (f"Idle share: {', '.join(shares)}" + (f"; not recorded for cycle(s) {', '.join(missing)}." if
                 missing else ".")) if shares else "Idle share: not recorded."
    out = [_figure(spend, METRICS["spent"], METRICS["budget"], f"Bars are shares of the cycle's budget, "
                   f"labels amounts in {unit}.", METRICS["idle share"], idle_note)]
    if any(c.has_coverage for c in cycles):
        fetched = [None if c.coverage_fetched is None else float(c.coverage_fetched) for c in cycles]
        waiting = [None if c.never_fetched is None else float(min(c.coverage_waiting or 0, c.never_fetched))
                   for c in cycles]
        other = [None if c.never_fetched is None or w is None else c.never_fetched - w
                 for c, w in zip(cycles, waiting, strict=True)]
        known = max((float(c.coverage_known or 0) for c in cycles), default=0.0)
        coverage = bar_chart("coverage", "Coverage: URLs the crawl knows", METRICS["coverage"], xs,
                             [Series("fetched", FETCHED, fetched), Series("waiting", WAITING, waiting),
                              Series("never fetched, not waiting", NEVER, other)], count_axis(known),
                             top_labels=[f"{c.coverage_known:,}" if c.has_coverage else "not recorded"
                                         for c in cycles])
        missing = [str(c.id) for c in cycles if not c.has_coverage]
        note = f"Not recorded for cycle(s) {', '.join(missing)}." if missing else ""
    else:
        coverage, note = empty_chart("coverage", "Coverage: URLs the crawl knows",
                                     "coverage not recorded for these cycles"), ""
    out.append(_figure(coverage, METRICS["coverage"], "Each bar's height is the URLs known at the "
                       "cycle's close.", note))
    found = bar_chart("found", "What the fetches found", "Fetches per cycle by what they found.", xs,
                      _outcomes(totals), count_axis(max((t.fetches for t in totals), default=0.0)),
                      top_labels=[f"{t.fetches:,.0f}" for t in totals])
    out.append(_figure(found, METRICS["fetches"], "Blue: new pages; orange: changes detected; grey: "
                       "no change.", METRICS["no-change share"]))
    prices = [t.cost_per_change for t in totals]
    if any(p is not None for p in prices):
        price = line_chart("cost-per-change", f"Cost per detected change ({unit})", METRICS["cost/change"],
                           xs, [Series("cost per change", PRICE, prices)],
                           _money_axis(max(p or 0.0 for p in prices), unit))
    else:
        price = empty_chart("cost-per-change", f"Cost per detected change ({unit})",
                            "no change detected in these cycles")
    out.append(_figure(price, METRICS["cost/change"], "A cycle without a detected change has no point."))
    fresh = [t.freshness for t in totals]
    now_note = freshness_note(cycles, now, now_at)
    extra = Series("now", FRESH, [now]) if now_note else None
    if any(f is not None for f in fresh) or extra is not None:
        chart = line_chart("freshness", "Estimated freshness of the copy", METRICS["est. freshness"], xs,
                           [Series("est. freshness", FRESH, fresh)], fraction_axis(), extra=extra)
    else:
        chart = empty_chart("freshness", "Estimated freshness of the copy", "no page history yet")
    out.append(_figure(chart, METRICS["est. freshness"], "Each point is taken at the cycle's close.",
                       (now_note + " The hollow point marks it.") if now_note else ""))
    return out


def _page_types(cycles: Sequence[CycleFigures], rows: dict[str, Row]) -> list[str]:
    """Page types with the most fetches first, fetches without a type last."""
    fetches: dict[str, float] = {}
    for c in cycles:
        for name, r in c.rows.items():
            fetches[name] = fetches.get(name, 0.0) + r.fetches
    names = (set(fetches) | set(rows)) - {TOTAL_ROW}
    return sorted(names, key=lambda n: (n == NO_TYPE, -fetches.get(n, 0.0), n))


def _type_panels(cycles: Sequence[CycleFigures], rows: dict[str, Row], rows_now: bool) -> list[str]:
    xs = [str(c.id) for c in cycles]
    names = _page_types(cycles, rows)
    axis = count_axis(max((r.fetches for c in cycles for n, r in c.rows.items() if n != TOTAL_ROW), default=0.0))
    out = []
    for i, name in enumerate(names):
        per = [c.rows.get(name) for c in cycles]
        key = f"type-{i}"
        bars = bar_chart(f"{key}-found", f"{name}: what the fetches found", f"Fetches of {name} pages per "
                         "cycle by what they found.", xs, _outcomes(per), axis, SMALL,
                         top_labels=["" if r is None else f"{r.fetches:,.0f}" for r in per])
        fresh = [None if r is None else r.freshness for r in per]
        row = rows.get(name) or Row()
        now = row.freshness if rows_now else None
        last = next((f for f in reversed(fresh) if f is not None), None)
        moved = now is not None and (last is None or abs(now - last) >= 0.0005)
        extra = Series("now", FRESH, [now]) if moved else None
        if any(f is not None for f in fresh) or extra is not None:
            line = line_chart(f"{key}-freshness", f"{name}: est. freshness", f"Estimated freshness of the "
                              f"{name} pages.", xs, [Series("est. freshness", FRESH, fresh)], fraction_axis(),
                              SMALL, extra=extra)
        else:
            line = empty_chart(f"{key}-freshness", f"{name}: est. freshness",
                               "no estimate: no page history", SMALL)
        facts = (f"{row.fetches:,.0f} fetches, {row.new:,.0f} new, {row.changed:,.0f} changes detected, "
                 f"est. freshness {percent(row.freshness)}")
        out.append(f'<section class="type" data-page-type="{escape(name)}"><h3>{escape(name)}</h3>'
                   f'<p>{escape(facts)}</p><div class="small">{bars}\n{line}</div></section>')
    return out


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f'<th scope="col">{escape(h)}</th>' for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _tiles(rows: dict[str, Row], cycles: Sequence[CycleFigures], unit: str, rows_now: bool) -> str:
    """``cycles``: those the figures cover (a rolled-up summary of old cycles among them)."""
    total = rows.get(TOTAL_ROW) or Row()
    spent = sum(c.spent or 0.0 for c in cycles)
    budget = sum(c.budget or 0.0 for c in cycles)
    tiles = [(f"{total.fetches:,.0f}", "fetches"), (f"{total.changed:,.0f}", "changes detected"),
             (format_cost(total.cost_per_change, unit), f"cost per change ({unit})"),
             (percent(total.freshness), "est. freshness now" if rows_now else "est. freshness"),
             (f"{format_cost(spent, unit)} / {format_cost(budget, unit)}", f"spent / budget ({unit}), all cycles")]
    return '<div class="tiles">' + "".join(
        f'<div class="tile"><b>{escape(v)}</b><span>{escape(k)}</span></div>' for v, k in tiles) + "</div>"


def page(title: str, scope: str, rows: dict[str, Row], cycles: Sequence[CycleFigures], unit: str,
         now: float | None, now_at: float | None, rows_now: bool = True,
         rolled: CycleFigures | None = None, rolled_note: str = "") -> str:
    """The whole page. ``rows`` are the figures by page type over ``scope`` (all cycles or one),
    ``cycles`` every cycle for the charts; ``now`` the total freshness estimated at ``now_at``;
    ``rows_now``: the freshness in ``rows`` is that estimate (not one kept at a cycle's close);
    ``rolled``: the cycles rolled up past the ledger's retention, counted in ``rows`` and the
    tiles but not charted, which ``rolled_note`` explains."""
    if not cycles:
        span = "no cycle yet"
    elif len(cycles) == 1:
        span = f"started {utc(cycles[0].started)} UTC"
    else:
        span = (f"cycles {cycles[0].id} to {cycles[-1].id} started {utc(cycles[0].started)} to "
                f"{utc(cycles[-1].started)} UTC")
    parts = ['<!DOCTYPE html>', '<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head>'
             '<meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/>',
             f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{escape(title)}</h1>",
             f'<p class="lead">{escape(scope)}; {escape(span)}. Costs in {escape(unit)}.</p>',
             *([f"<p>{escape(rolled_note)}</p>"] if rolled_note else []),
             _tiles(rows, [*cycles, *([rolled] if rolled is not None else [])], unit, rows_now)]
    if cycles:
        parts += ["<h2>Each cycle</h2>", '<div class="grid">', *_cycle_figures(cycles, unit, now, now_at), "</div>",
                  "<h2>By page type</h2>", f"<p>{escape(NO_TYPE)}: fetches without a page type (robots.txt, "
                  "sitemaps, pages no pattern matches). The bars share one scale.</p>",
                  *_type_panels(cycles, rows, rows_now)]
    parts += [f"<h2>By page type, {escape(scope)}</h2>", _table(TYPE_HEADER, type_table(rows, unit)),
              "<dl>", *(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in METRICS.items()), "</dl>"]
    if cycles:
        parts += ["<h2>By cycle</h2>", _table(*cycle_table(cycles, unit))]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
