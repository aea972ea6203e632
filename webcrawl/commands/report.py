"""``scrapy report <crawl> [--cycle N] [--html FILE]``: where the budget went and what it found.

Per page type and in total (revisit-model.md section 7): fetches (attempts booked in the cycle
ledger, failures included), new pages, changes detected (fetches whose record had changed), fetches
that found no change (fetches - new - changed: unchanged records, 304s, failures, robots.txt and
sitemaps) and their share of the fetches, cost in the site's unit, cost per detected change, and
the model's estimate of the copy's freshness (:mod:`webcrawl.state.freshness`). By default over all
cycles with the freshness estimated now, and one line per cycle; ``--cycle N`` shows one cycle,
with the freshness kept at its close (or estimated now for the current cycle). ``--html FILE``
writes the same as one self-contained page with charts. docs/report.md shows an example.

Cycles past the ledger's retention (``WEBCRAWL_CYCLE_RETENTION``) are rolled up: their amounts
count in the figures over all cycles (the table by page type, spent and budget), a note says
which cycles they were, and they have no line of their own (nor ``--cycle``).

A crawl with no cycle in Redis is an error: one ``scrapy: error:`` line naming the crawls that
have some, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.commands import ScrapyCommand
from scrapy.spiderloader import get_spider_loader

from webcrawl.commands._errors import fail
from webcrawl.commands._oneshot import command_redis
from webcrawl.commands._reportdata import (
    TOTAL_ROW,
    CycleFigures,
    RolledUp,
    Row,
    figures_from_ledger,
    ledger_for,
    rolled_from_ledger,
    rows_from,
    with_freshness,
    with_total,
)
from webcrawl.commands._reporthtml import page
from webcrawl.commands._reporttext import format_cost, freshness_note, render_text
from webcrawl.config import StateConfig
from webcrawl.state.clearing import layout_of
from webcrawl.state.freshness import TOTAL, Freshness, current as current_freshness, read_snapshot
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.ledger import crawls_with_cycles

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["Command", "CycleFigures", "Row", "crawls_with_cycles", "render_html", "render_text", "rows_from"]

UNITS = {"bandwidth": "bytes", "credits": "credits", "requests": "requests"}


def render_html(title: str, scope: str, rows: dict[str, Row], cycles: list[CycleFigures], unit: str,
                now: Freshness | None, rows_now: bool = True, rolled: RolledUp | None = None) -> str:
    """The page; ``now`` is the freshness estimated now, ``rows_now`` whether ``rows`` carry it,
    ``rolled`` the cycles rolled up (counted in ``rows``)."""
    total = now.mean.get(TOTAL) if now is not None else None
    return page(title, scope, rows, cycles, unit, total, now.at if total is not None and now else None,
                rows_now, rolled=rolled.figures if rolled is not None else None,
                rolled_note=rolled_note(rolled, unit) if rolled is not None else "")


def rolled_note(rolled: RolledUp, unit: str) -> str:
    """What the report says of the cycles rolled up."""
    f = rolled.figures
    which = f"Cycle {rolled.first}" if rolled.count == 1 else (
        f"Cycles {rolled.first} to {rolled.last} ({rolled.count:,} cycles)")
    return (f"{which} rolled up past the ledger's retention (WEBCRAWL_CYCLE_RETENTION): their "
            f"{f.total.fetches:,.0f} fetches and {format_cost(f.spent, unit)} spent of "
            f"{format_cost(f.budget, unit)} count in the figures over all cycles; they have no line "
            "of their own, coverage or freshness.")


def _site(settings: BaseSettings, name: str) -> Any:
    try:
        return getattr(get_spider_loader(settings).load(name), "site", None)
    except (KeyError, ValueError):
        return None


class Command(ScrapyCommand):
    requires_project = True
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<crawl> [--cycle N] [--html FILE]"

    def short_desc(self) -> str:
        return "Report fetches, changes, cost per change and estimated freshness per page type"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--cycle", type=int, help="one cycle (default: all cycles)")
        parser.add_argument("--html", metavar="FILE", help="also write the report with charts as one HTML page")
        parser.add_argument("--json", action="store_true",
                            help="print every cycle's recorded figures as one JSON object instead")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            fail("name one crawl", "scrapy report <crawl> [--cycle N] [--html FILE]")
        assert self.settings is not None
        with command_redis(self.settings, args[0], must_exist=True) as state:
            crawl = StateConfig.from_settings(self.settings, args[0]).crawl_name
            layout = layout_of(state.client, crawl)
            if opts.json:
                self._json(state.client, layout, state.where)
                return
            self._report(state.client, layout, args[0], opts, state.where)

    @staticmethod
    def _json(client: Any, layout: CrawlLayout, where: str) -> None:
        """Every cycle's ledger figures, for programs (``{"crawl": ..., "cycles": {id: {...}}}``)."""
        ledger = ledger_for(client, layout.crawl)
        ids = ledger.cycle_ids()
        if not ids:
            fail(f"no crawl {layout.crawl!r} with cycles in {where}")
        out: dict[str, Any] = {"crawl": layout.crawl, "cycles": {str(i): ledger.numbers(i) for i in ids}}
        rolled = ledger.rolled_up()
        if rolled:
            out["rolled_up"] = rolled
        print(json.dumps(out, sort_keys=True))

    def _report(self, client: Any, keys: CrawlLayout, name: str, opts: argparse.Namespace,
                where: str) -> None:
        settings = self.settings
        assert settings is not None
        ledger = ledger_for(client, keys.crawl)
        ids = ledger.cycle_ids()
        if not ids:
            known = crawls_with_cycles(client)
            fail(f"no crawl {keys.crawl!r} with cycles in {where}",
                 f"crawls there: {', '.join(known)}" if known else "no crawl has run there yet")
        rolled = rolled_from_ledger(ledger.rolled_up())
        if opts.cycle is not None and opts.cycle not in ids:
            if rolled is not None and rolled.first <= opts.cycle <= rolled.last:
                fail(f"cycle {opts.cycle} of crawl {keys.crawl!r} was rolled up with cycles "
                     f"{rolled.first} to {rolled.last}: they count in the report over all cycles",
                     f"cycles kept: {ids[0]} to {ids[-1]} (WEBCRAWL_CYCLE_RETENTION)")
            fail(f"crawl {keys.crawl!r} has no cycle {opts.cycle} (cycles: {', '.join(map(str, ids))})")
        site = _site(settings, name)
        unit = UNITS[site.budget.billing] if site is not None else "cost units"
        now = current_freshness(client, keys) or Freshness({}, {}, time.time())
        current = ledger.current()
        cycles = []
        for i in ids:  # the current cycle has no snapshot yet: its freshness is today's
            kept = read_snapshot(client, keys, i)
            if kept is None and current is not None and current.id == i:
                kept = now
            cycles.append(figures_from_ledger(i, ledger.numbers(i), kept))
        if opts.cycle is not None:
            chosen = next(c for c in cycles if c.id == opts.cycle)
            rows, scope = chosen.rows, f"cycle {chosen.id}"
        else:
            summed: dict[str, Row] = {}
            for c in [*cycles, *([rolled.figures] if rolled is not None else [])]:
                for kind, row in c.rows.items():
                    if kind != TOTAL_ROW:
                        summed.setdefault(kind, Row()).add(row)
            rows = with_freshness(with_total(summed), now if now.pages else None)
            count = len(cycles) + (rolled.count if rolled is not None else 0)
            scope = f"{count:,} cycle{'s' if count != 1 else ''}"
        total_now = now.mean.get(TOTAL) if now.pages else None
        notes = [rolled_note(rolled, unit)] if rolled is not None and opts.cycle is None else []
        note = freshness_note(cycles, total_now, now.at) if opts.cycle is None else None
        notes += [note] if note else []
        title = f"webcrawl report: crawl {keys.crawl!r}, {scope}, costs in {unit}"
        print(render_text(title, rows, cycles, unit, notes), end="")
        if opts.html:
            html = render_html(f"Crawl {keys.crawl!r}", scope, rows, cycles, unit, now if now.pages else None,
                               rows_now=opts.cycle is None, rolled=rolled)
            Path(opts.html).write_text(html, encoding="utf-8")
            print(f"wrote {opts.html}")
