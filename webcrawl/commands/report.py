"""``scrapy report <site> [--cycle N] [--html FILE]``: where the budget went and what it found.

Per page type and in total (revisit-model.md section 7): fetches (attempts booked in the cycle
ledger, failures included), new pages, changes detected (fetches whose record had changed), fetches
that found no change (fetches - new - changed: unchanged records, 304s, failures, robots.txt and
sitemaps) and their share, cost in the site's unit, cost per detected change, and the model's
estimate of the copy's freshness (:mod:`webcrawl.state.freshness`). By default over all cycles with
the freshness estimated now, and one line per cycle; ``--cycle N`` shows one cycle, with the
freshness kept at its close (or estimated now for the current cycle). ``--html FILE`` writes the
same as one self-contained page with charts over the cycles. docs/report.md shows an example.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader

from webcrawl.commands._reporthtml import page
from webcrawl.config import StateConfig
from webcrawl.revisit import GammaPrior
from webcrawl.state.client import RedisUnavailable, open_handle
from webcrawl.state.clearing import layout_of
from webcrawl.state.freshness import TOTAL, Freshness, current as current_freshness, read_snapshot
from webcrawl.state.layout import CrawlLayout as CrawlKeys
from webcrawl.state.ledger import OUTCOMES, LedgerStore

if TYPE_CHECKING:
    import redis
    from scrapy.settings import BaseSettings

__all__ = ["Command", "CycleReport", "Row", "cycle_report", "render_html", "render_text", "rows_from"]

_FIELDS = ("fetches", "cost", *OUTCOMES)
HEADER = ("page type", "fetches", "new", "changes", "no change", "share", "cost", "cost/change",
          "est. freshness")


@dataclass
class Row:
    fetches: float = 0.0
    cost: float = 0.0
    new: float = 0.0
    changed: float = 0.0
    unchanged: float = 0.0
    freshness: float | None = None
    pages: int = 0

    @property
    def no_change(self) -> float:
        return max(self.fetches - self.new - self.changed, 0.0)

    @property
    def share(self) -> float | None:
        return self.no_change / self.fetches if self.fetches else None

    @property
    def cost_per_change(self) -> float | None:
        return self.cost / self.changed if self.changed else None

    def add(self, other: Row) -> None:
        for name in _FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class CycleReport:
    id: int
    started: float
    ends: float
    budget: float
    booked: float
    refused: int
    rows: dict[str, Row] = field(default_factory=dict)  #: page type ("total" last) -> row

    @property
    def total(self) -> Row:
        return self.rows["total"]


def rows_from(numbers: dict[str, float]) -> dict[str, Row]:
    """Ledger fields ``fetches:<page type>`` etc. as rows, with a ``total`` row last."""
    rows: dict[str, Row] = {}
    for key, value in numbers.items():
        name, _, kind = key.partition(":")
        if name in _FIELDS and kind:
            row = rows.setdefault("(none)" if kind == "-" else kind, Row())
            setattr(row, name, getattr(row, name) + value)
    total = Row()
    for row in rows.values():
        total.add(row)
    return {**dict(sorted(rows.items())), "total": total}


def with_freshness(rows: dict[str, Row], freshness: Freshness | None) -> dict[str, Row]:
    if freshness is not None:
        for kind, mean in freshness.mean.items():
            name = "total" if kind == TOTAL else "(none)" if kind == "-" else kind
            row = rows.get(name)
            if row is None:  # pages known from earlier cycles, not fetched in this one
                row = rows[name] = Row()
                rows["total"] = rows.pop("total")
            row.freshness, row.pages = mean, freshness.pages.get(kind, 0)
    return rows


def cycle_report(client: redis.Redis, keys: CrawlKeys, cycle_id: int) -> CycleReport:
    n = LedgerStore(client, keys).numbers(cycle_id)
    rows = with_freshness(rows_from(n), read_snapshot(client, keys, cycle_id))
    return CycleReport(cycle_id, n.get("started", 0.0), n.get("ends", 0.0), n.get("budget", 0.0),
                       n.get("booked", 0.0), int(n.get("refused", 0)), rows)


def _cost(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        for scale, suffix in ((1e9, " GB"), (1e6, " MB"), (1e3, " KB")):
            if abs(value) >= scale:
                return f"{value / scale:.2f}{suffix}"
        return f"{value:.0f} B"
    return f"{value:,.2f}" if value != int(value) else f"{value:,.0f}"


def table_rows(rows: dict[str, Row], unit: str) -> list[list[str]]:
    return [[name, f"{r.fetches:.0f}", f"{r.new:.0f}", f"{r.changed:.0f}", f"{r.no_change:.0f}",
             "-" if r.share is None else f"{r.share:.1%}", _cost(r.cost, unit),
             _cost(r.cost_per_change, unit),
             "-" if r.freshness is None else f"{r.freshness:.3f} ({r.pages} pages)"]
            for name, r in rows.items()]


def _columns(header: tuple[str, ...] | list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    return ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
            for line in [list(header), *rows]]


def cycle_lines(cycles: list[CycleReport], unit: str) -> tuple[list[str], list[list[str]]]:
    header = ["cycle", "started (UTC)", "budget", "spent", "fetches", "changes", "no change share",
              "cost/change", "est. freshness"]
    rows = [[str(c.id), time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(c.started)), _cost(c.budget, unit),
             _cost(c.booked, unit), f"{c.total.fetches:.0f}", f"{c.total.changed:.0f}",
             "-" if c.total.share is None else f"{c.total.share:.1%}", _cost(c.total.cost_per_change, unit),
             "-" if c.total.freshness is None else f"{c.total.freshness:.3f}"] for c in cycles]
    return header, rows


def render_text(title: str, rows: dict[str, Row], cycles: list[CycleReport], unit: str) -> str:
    lines = [title, "", *_columns(HEADER, table_rows(rows, unit))]
    if len(cycles) > 1:
        lines += ["", "per cycle:", *_columns(*cycle_lines(cycles, unit))]
    return "\n".join(lines) + "\n"


def render_html(title: str, rows: dict[str, Row], cycles: list[CycleReport], unit: str) -> str:
    xs = [c.id for c in cycles]
    names = sorted({n for c in cycles for n in c.rows if n != "total"}) + ["total"]

    def series(get: Any) -> dict[str, list[float | None]]:
        return {n: [get(c.rows[n]) if n in c.rows else None for c in cycles] for n in names}

    charts = [
        ("Fetches", series(lambda r: r.fetches), False),
        ("Changes detected", series(lambda r: r.changed), False),
        ("Share of fetches that found no change", series(lambda r: r.share), True),
        (f"Cost ({unit})", series(lambda r: r.cost), False),
        (f"Cost per detected change ({unit})", series(lambda r: r.cost_per_change), False),
        ("Estimated freshness of the copy", series(lambda r: r.freshness), True),
    ]
    tables = [("By page type", list(HEADER), table_rows(rows, unit)),
              ("By cycle", *cycle_lines(cycles, unit))]
    return page(title, [f"Costs in {unit}."], tables, xs, charts)  # type: ignore[arg-type]


UNITS = {"bandwidth": "bytes", "credits": "credits", "requests": "requests"}


def _site(settings: BaseSettings, name: str) -> Any:
    try:
        return getattr(get_spider_loader(settings).load(name), "site", None)
    except KeyError:
        return None


class Command(ScrapyCommand):
    requires_project = True
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<site> [--cycle N] [--html FILE]"

    def short_desc(self) -> str:
        return "Report fetches, changes, cost per change and estimated freshness per page type"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--cycle", type=int, help="one cycle (default: all cycles)")
        parser.add_argument("--html", metavar="FILE", help="also write the report with charts as HTML")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name one site (or crawl)")
        assert self.settings is not None
        settings = self.settings
        try:
            config = StateConfig.from_settings(settings, args[0])
            handle = open_handle(config.redis_url, config.data_dir)
        except (ValueError, RedisUnavailable) as exc:
            raise UsageError(str(exc), print_help=False) from exc
        try:
            self._report(handle.client, layout_of(handle.client, config.crawl_name), args[0], opts,
                         settings)
        finally:
            if handle.embedded is not None:
                handle.embedded.release(handle.client)

    def _report(self, client: redis.Redis, keys: CrawlKeys, name: str, opts: argparse.Namespace,
                settings: BaseSettings) -> None:
        site = _site(settings, name)
        unit = UNITS[site.budget.billing] if site is not None else "cost units"
        ledger = LedgerStore(client, keys)
        ids = ledger.cycle_ids()
        if opts.cycle is not None and opts.cycle not in ids:
            raise UsageError(f"crawl {keys.crawl!r} has no cycle {opts.cycle} (cycles: "
                             f"{', '.join(map(str, ids)) or 'none yet'})", print_help=False)
        cycles = [cycle_report(client, keys, i) for i in ids]
        current = ledger.current()
        now = current_freshness(client, keys)
        for c in cycles:  # the current cycle has no snapshot yet: its freshness is today's
            if c.total.freshness is None and current is not None and current.id == c.id:
                c.rows = with_freshness(c.rows, now)
        if opts.cycle is not None:
            chosen = next(c for c in cycles if c.id == opts.cycle)
            rows, scope = chosen.rows, f"cycle {chosen.id}"
        else:
            rows = {"total": Row()}
            for c in cycles:
                for kind, row in c.rows.items():
                    if kind != "total":
                        rows.setdefault(kind, Row()).add(row)
                        rows["total"].add(row)
            rows = with_freshness({**dict(sorted((k, v) for k, v in rows.items() if k != "total")),
                                   "total": rows["total"]}, now)
            scope = f"{len(cycles)} cycle{'s' if len(cycles) != 1 else ''}"
        title = f"webcrawl report: crawl {keys.crawl!r}, {scope}, costs in {unit}"
        print(render_text(title, rows, cycles, unit), end="")
        if opts.html:
            Path(opts.html).write_text(render_html(title, rows, cycles, unit), encoding="utf-8")
            print(f"wrote {opts.html}")
