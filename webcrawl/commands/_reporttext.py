"""The report's words and tables: what each metric means, how figures are written, the tables by
page type and by cycle, and the whole report as plain text."""

from __future__ import annotations

import time
from collections.abc import Sequence

from webcrawl.commands._reportdata import CycleFigures, Row

__all__ = ["METRICS", "TYPE_HEADER", "cycle_table", "format_cost", "freshness_note", "percent",
           "render_text", "type_table", "utc"]

#: One sentence per metric, shown on the page and in docs/report.md.
METRICS: dict[str, str] = {
    "fetches": "Requests the crawl paid for in the cycle, failed ones included.",
    "new": "Fetches of pages the crawl had never fetched before.",
    "changes": "Fetches that found the page's record different from the stored copy: the changes detected.",
    "no change": "Fetches that found nothing new or changed: unchanged records, 304 Not Modified answers, "
                 "failures, robots.txt and sitemaps.",
    "no-change share": "No change divided by fetches: the part of the fetches that bought no news.",
    "cost": "What the fetches cost, in the site's billing unit.",
    "cost/change": "Cost divided by changes detected: what one detected change cost.",
    "est. freshness": "The revisit model's estimate of the share of stored pages still identical to the "
                      "live ones.",
    "spent": "The cost booked by the cycle's fetches.",
    "budget": "What the cycle was allowed to spend.",
    "idle share": "Budget the cycle left unused because no fetch was due, as a share of its budget.",
    "coverage": "URLs the crawl knows at the cycle's close: fetched at least once, or never fetched "
                "and waiting in a frontier (refused URLs wait in the crawl state until met again).",
}

TYPE_HEADER = ("page type", "fetches", "new", "changes", "no change", "no-change share", "cost",
               "cost/change", "est. freshness")


def format_cost(value: float | None, unit: str) -> str:
    """A cost in ``unit``: bytes as B / KB / MB / GB (powers of 1000), others as numbers."""
    if value is None:
        return "-"
    if unit == "bytes":
        for scale, suffix in ((1e9, " GB"), (1e6, " MB"), (1e3, " KB")):
            if abs(value) >= scale:
                return f"{value / scale:.2f}{suffix}"
        return f"{value:.0f} B"
    return f"{value:,.2f}" if value != int(value) else f"{value:,.0f}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def utc(seconds: float | None, with_date: bool = True) -> str:
    if not seconds:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S", time.gmtime(seconds))


def type_table(rows: dict[str, Row], unit: str) -> list[list[str]]:
    """One line per page type (``total`` last), columns as :data:`TYPE_HEADER`."""
    return [[name, f"{r.fetches:.0f}", f"{r.new:.0f}", f"{r.changed:.0f}", f"{r.no_change:.0f}",
             percent(r.no_change_share), format_cost(r.cost, unit), format_cost(r.cost_per_change, unit),
             "-" if r.freshness is None else f"{percent(r.freshness)} ({r.pages} pages)"]
            for name, r in rows.items()]


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def cycle_table(cycles: Sequence[CycleFigures], unit: str) -> tuple[list[str], list[list[str]]]:
    """One line per cycle; idle share and coverage columns only if some cycle recorded them."""
    idle = any(c.idle_share is not None for c in cycles)
    coverage = any(c.has_coverage for c in cycles)
    header = ["cycle", "started (UTC)", "budget", "spent", *(["idle share"] if idle else []),
              "fetches", "changes", "no-change share", "cost/change", "est. freshness",
              *(["known", "fetched", "waiting"] if coverage else [])]
    rows = []
    for c in cycles:
        t = c.total
        rows.append([str(c.id), utc(c.started), format_cost(c.budget, unit), format_cost(c.spent, unit),
                     *([percent(c.idle_share)] if idle else []), f"{t.fetches:.0f}", f"{t.changed:.0f}",
                     percent(t.no_change_share), format_cost(t.cost_per_change, unit), percent(t.freshness),
                     *([_count(c.coverage_known), _count(c.coverage_fetched), _count(c.coverage_waiting)]
                       if coverage else [])])
    return header, rows


def freshness_note(cycles: Sequence[CycleFigures], now: float | None, now_at: float | None) -> str | None:
    """Why the freshness estimated now differs from the last cycle's, or None if it does not."""
    if now is None or now_at is None or not cycles:
        return None
    last = cycles[-1]
    then = last.total.freshness
    if then is None or abs(now - then) < 0.0005 or last.freshness_at == now_at:
        return None
    when = f"estimated now ({utc(now_at)} UTC)"
    if now < then:
        return (f"Freshness {when} is {percent(now)}, below the {percent(then)} of cycle {last.id}'s close: "
                "pages keep changing after a cycle ends, and the copy ages until the next cycle fetches them.")
    return (f"Freshness {when} is {percent(now)}, above the {percent(then)} of cycle {last.id}'s close: "
            "it is estimated again from the change histories as they are now.")


def _columns(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    return ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                      for i, (c, w) in enumerate(zip(line, widths, strict=True)))
            for line in [list(header), *rows]]


def render_text(title: str, rows: dict[str, Row], cycles: Sequence[CycleFigures], unit: str,
                notes: Sequence[str] = ()) -> str:
    """The report as text: the table by page type, notes, and a line per cycle when several."""
    lines = [title, "", *_columns(TYPE_HEADER, type_table(rows, unit))]
    lines += ["", *notes] if notes else []
    if len(cycles) > 1:
        lines += ["", "per cycle:", *_columns(*cycle_table(cycles, unit))]
    if cycles and not any(c.has_coverage for c in cycles):
        lines += ["", "coverage (known, fetched, waiting URLs): not recorded"]
    if cycles and all(c.idle_share is None for c in cycles):
        lines += ["idle share: not recorded"]
    return "\n".join(lines) + "\n"

