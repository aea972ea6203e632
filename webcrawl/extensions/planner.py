"""The cycle planner: at the start of each cycle, the revisits the cycle's budget buys best.

One ``scrapy crawl <site>`` run is one cycle. With ``WEBCRAWL_CYCLE_CONTINUOUS`` the run goes on
(an idle crawl is kept open) and a new cycle starts every ``budget.cycle_seconds`` of the site file
(``WEBCRAWL_CYCLE_SECONDS``), planned by the tick that finds the cycle over. Starting a cycle, under
the planning lock (``SET NX PX`` with a token, released only by its holder) so that one process
plans while the others of the crawl join:

1. a cycle that some live process still works on (heartbeats in ``{c}:cycle:<id>:workers``; in
   continuous mode, one not yet ended) is joined, not planned again;
2. otherwise the previous cycle's unused plan reservation is dropped, a new cycle is opened in
   the ledger with the site's ``budget.amount_per_cycle``, the page index is brought up to date,
   every known page is scored (:mod:`webcrawl.extensions._planner_score`) and
   :func:`webcrawl.revisit.plan_cycle` picks the revisits, re-estimations and the verification
   sample within the budget, keeping the discovery allowance (capped by the discovery waiting in
   the frontiers) for new URLs;
3. the planned visits are enqueued (``engine.crawl``, ``dont_filter``, priority in the known-pages
   band, ``meta``: ``webcrawl_purpose``, ``webcrawl_page_type``, ``webcrawl_expected_cost``,
   ``webcrawl_priority``, ``webcrawl_planned`` = the cycle id) and their expected cost is reserved
   in the ledger, so fetches outside the plan get only what the plan left;
4. requests an earlier cycle could not afford (``{c}:deferred``) go back into their frontiers.

Sitemap dates of hosts whose ``lastmod`` earned trust (:mod:`webcrawl.state.sitemaps`) override
the model: a page dated after its last fetch is known to have changed and goes first; one dated
before it is known not to have, and is not revisited this cycle.

Spend is booked as fetches land (the cost middleware), and admitted before they start
(:class:`webcrawl.middlewares.budget.BudgetMiddleware`): a cycle stops at its budget.

The page index (:class:`webcrawl.state.pages.PageIndex`) follows the page histories through the
hooks of :class:`~webcrawl.extensions._planner_hooks.IndexHooks`, synced every tick.

Stats: ``webcrawl/planner/cycles`` (cycles planned here), ``webcrawl/planner/joined``,
``webcrawl/planner/pages`` (pages scored), ``webcrawl/planner/planned`` and
``webcrawl/planner/planned/{purpose}``, ``webcrawl/planner/plan_seconds``,
``webcrawl/planner/redelivered`` (deferred requests put back).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np
from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.utils.asyncio import create_looping_call

from webcrawl.clock import SystemClock
from webcrawl.extensions._planner_hooks import IndexHooks
from webcrawl.extensions._planner_score import Scoring, score_and_plan
from webcrawl.extensions._planner_settings import planner_parts
from webcrawl.middlewares.budget import deferred_entry
from webcrawl.revisit import Plan, Purpose

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from webcrawl.clock import Clock
    from webcrawl.state.frontier import Frontier
    from webcrawl.state.ledger import Cycle, LedgerStore
    from webcrawl.state.pages import PageColumns, PageIndex
    from webcrawl.state.sitemaps import SitemapStore

logger = logging.getLogger(__name__)

__all__ = ["CyclePlanner"]

STATS = "webcrawl/planner/"
KNOWN_BAND = 10_000  # the priority middleware's band of known pages (webcrawl.middlewares.priority)


class CyclePlanner:
    """Plans each cycle; see the module docstring. ``crawl`` enqueues a request (the engine's)."""

    def __init__(self, ledger: LedgerStore, index: PageIndex, frontier: Frontier, scoring: Scoring,
                 hooks: IndexHooks, stats: StatsCollector, *, crawl: Callable[[Request], Any],
                 clock: Clock | None = None, continuous: bool = False, tick_seconds: float = 1.0,
                 lock_seconds: float = 60.0, seed: int | None = None,
                 sitemaps: SitemapStore | None = None) -> None:
        self.ledger = ledger
        self.index = index
        self.frontier = frontier
        self.scoring = scoring
        self.hooks = hooks
        self.stats = stats
        self.crawl = crawl
        self.clock = clock or SystemClock()
        self.continuous = continuous
        self.tick_seconds = tick_seconds
        self.lock_seconds = lock_seconds
        self.rng = np.random.default_rng(seed)
        self.sitemaps = sitemaps
        self.worker = uuid.uuid4().hex
        self.cycle: Cycle | None = None
        self._loop = create_looping_call(self.tick)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not crawler.settings.getbool("WEBCRAWL_PLANNER_ENABLED", True):
            raise NotConfigured("the cycle planner is off: set WEBCRAWL_PLANNER_ENABLED = True")
        parts = planner_parts(crawler)
        assert crawler.stats is not None

        def crawl(request: Request) -> None:
            assert crawler.engine is not None
            crawler.engine.crawl(request)

        planner = cls(parts.ledger, parts.index, parts.frontier, parts.scoring, parts.hooks,
                      crawler.stats, crawl=crawl, continuous=parts.continuous,
                      tick_seconds=parts.tick_seconds, lock_seconds=parts.lock_seconds,
                      seed=parts.seed, sitemaps=parts.hooks.sitemaps)
        crawler.signals.connect(planner.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(planner.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(planner.spider_idle, signal=signals.spider_idle)
        parts.hooks.connect(crawler.signals)
        return planner

    # -- lifecycle -------------------------------------------------------------------------------

    def spider_opened(self) -> None:
        self.begin()
        self._loop.start(self.tick_seconds, now=False)

    def spider_closed(self) -> None:
        if self._loop.running:
            self._loop.stop()
        self.hooks.flush(self.clock.time(), settle=0.0)
        if self.cycle is not None:
            self.ledger.leave(self.cycle.id, self.worker)

    def spider_idle(self) -> None:
        """In continuous mode the crawl waits for its next cycle (the tick plans it) instead of
        closing: no work is fetched here."""
        if self.continuous:
            raise DontCloseSpider("waiting for the next cycle")

    def tick(self) -> None:
        """Heartbeat, index upkeep and, in continuous mode, the next cycle when this one ends."""
        now = self.clock.time()
        self.hooks.flush(now)
        if self.cycle is None:
            return
        self.ledger.heartbeat(self.cycle.id, self.worker, now + max(10 * self.tick_seconds, 30.0))
        if self.continuous and now >= self.cycle.ends:
            self.begin()

    def begin(self) -> Cycle:
        """Join the open cycle or plan a new one (under the lock); see the module docstring."""
        token = uuid.uuid4().hex
        deadline = time.monotonic() + self.lock_seconds
        # Planning takes seconds at most; another process holding the lock is planning now.
        while not self.ledger.lock(token, self.lock_seconds):
            if time.monotonic() > deadline:
                raise RuntimeError("the planning lock stayed taken past WEBCRAWL_PLANNER_LOCK_SECONDS")
            time.sleep(0.05)
        try:
            now = self.clock.time()
            current = self.ledger.current()
            if current is not None and self._open(current, now):
                self.cycle = current
                self.stats.inc_value(STATS + "joined")
                logger.info("Joined cycle %d (planned by another process)", current.id)
            else:
                if current is not None:
                    self.ledger.drop_reservation(current.id)
                self.cycle = self.ledger.start_cycle(self.scoring.budget, self.scoring.cycle_seconds, now)
                self.plan(self.cycle, now)
            self.ledger.heartbeat(self.cycle.id, self.worker, now + max(10 * self.tick_seconds, 30.0))
        finally:
            self.ledger.unlock(token)
        return self.cycle

    def _open(self, cycle: Cycle, now: float) -> bool:
        if not self.ledger.is_planned(cycle.id):
            return False
        if self.continuous:
            return now < cycle.ends
        return self.ledger.live_workers(cycle.id, now) > 0

    # -- planning --------------------------------------------------------------------------------

    def plan(self, cycle: Cycle, now: float) -> Plan:
        started = time.perf_counter()
        self.hooks.flush(now, settle=0.0)
        columns = self.index.load()
        waiting = self.frontier.counts().queued + self.ledger.deferred_count()
        plan, pages = score_and_plan(columns, self.scoring, now, self.rng,
                                     discovery_demand=waiting * self.scoring.default_cost,
                                     dated=self.trusted_dates(columns))
        seconds = time.perf_counter() - started
        rows = plan.indices()
        urls = self.index.urls(columns.ids[rows])
        names = {tid: name for name, tid in columns.types.items()}
        scores = pages.scores(self.scoring.objective)
        enqueued = 0
        for row, url, purpose in zip(rows, urls, plan.purposes()):
            if url is None:
                continue
            self.crawl(self._request(url, purpose.value, names.get(int(columns.records["type"][row])),
                                     float(pages.cost[row]), float(scores[row]), cycle.id))
            enqueued += 1
        counts = {p.value: 0 for p in plan.spend}
        for kind in plan.purposes():
            counts[kind.value] += 1
        fields: dict[str, float] = {f"planned:{p}": float(n) for p, n in counts.items()}
        fields.update({f"plan:{p.value}": v for p, v in plan.spend.items()})
        fields.update({"plan_seconds": seconds, "pages": len(columns), "plan:unspent": plan.unspent})
        self.ledger.set_plan(cycle.id, reserved=plan.total - plan.spend.get(Purpose.DISCOVERY, 0.0), fields=fields)
        redelivered = self.redeliver(now)
        self.stats.inc_value(STATS + "cycles")
        self.stats.inc_value(STATS + "pages", len(columns))
        self.stats.inc_value(STATS + "planned", enqueued)
        for name, n in counts.items():
            self.stats.inc_value(f"{STATS}planned/{name}", n)
        self.stats.set_value(STATS + "plan_seconds", seconds)
        logger.info("Cycle %d: %d known pages scored in %.2f s; planned %d visits (%s), expected "
                    "cost %.4g of %.4g; %d deferred requests put back", cycle.id, len(columns),
                    seconds, enqueued, ", ".join(f"{p} {n}" for p, n in counts.items() if n),
                    plan.total, cycle.budget, redelivered)
        return plan

    def trusted_dates(self, columns: PageColumns) -> np.ndarray | None:
        """Per page, its sitemap ``lastmod`` where its host's dates are trusted (NaN elsewhere)."""
        dates = self.sitemaps.all_dates() if self.sitemaps is not None else {}
        if not dates:
            return None
        hosts = {url: urlsplit(url).hostname or "" for url in dates}
        trusted = self.sitemaps.trusted_hosts(set(hosts.values())) if self.sitemaps is not None else set()
        urls = [u for u in dates if hosts[u] in trusted]
        if not urls:
            return None
        out = np.full(len(columns), np.nan)
        row_of = {int(i): r for r, i in enumerate(columns.ids)}
        for url, page_id in zip(urls, self.index.ids(urls)):
            if page_id is not None and page_id in row_of:
                out[row_of[page_id]] = dates[url]
        return out

    def _request(self, url: str, purpose: str, page_type: str | None, cost: float, score: float,
                 cycle_id: int) -> Request:
        step = 0 if not score > 0 else max(-2000, min(2000, round(100 * np.log10(score))))
        return Request(url, dont_filter=True, priority=KNOWN_BAND + int(step), meta={
            "webcrawl_purpose": purpose, "webcrawl_page_type": page_type,
            "webcrawl_expected_cost": cost, "webcrawl_priority": score,
            "webcrawl_planned": cycle_id, "webcrawl_canonical_url": url})

    def redeliver(self, now: float, batch: int = 10_000) -> int:
        """Put the requests earlier cycles could not afford back into their frontiers."""
        total = 0
        while True:
            payloads = self.ledger.peek_deferred(batch)
            if not payloads:
                return total
            entries = [e for e in map(deferred_entry, payloads) if e is not None]
            if entries:
                self.frontier.flush(entries, [], now)
            self.ledger.trim_deferred(len(payloads))
            total += len(entries)
            self.stats.inc_value(STATS + "redelivered", len(entries))
            if len(payloads) < batch:
                return total

