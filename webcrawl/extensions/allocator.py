"""The allocator: cycles, the budget rate, and every known page's revisit interval
(revisit-model.md section 5; docs/allocator.md). This module is the Scrapy extension, the
reactor's side; the work is done on a worker thread by its parts:

| module | does |
| --- | --- |
| :mod:`._alloc_worker` | the worker thread, one job at a time; the jobs |
| :mod:`._alloc_cycles` | starting or joining a cycle, the bucket's terms, a cycle's close figures, retention |
| :mod:`._alloc_planner` | one allocation: the allocation lock, the table's sync, the plan, the intervals, what is published |
| :mod:`._alloc_reads` | the Redis reads besides the records (hosts' delays, holds, health, trust); the gain; the settings |
| :mod:`._alloc_plan`, :mod:`._alloc_table` | the plan itself (pure numpy); the page table |

The reactor only counts, times and applies: it beats the process's heartbeat on its cycle and
renews the allocation lock every tick, submits an allocation every ``WEBCRAWL_ALLOCATOR_SECONDS``
(the crawl goes on fetching meanwhile), closes a continuous cycle at its end and starts or joins
the next, and applies what the jobs answer (the cycle, stats). Starting or joining a cycle takes
the planning lock; while another process holds it, the reactor looks again
:data:`LOCK_RETRY_SECONDS` later (a timer, never a sleep), for up to :data:`LOCK_WAIT_SECONDS`
(then the spider closes, ``planning_lock_timeout``). The spider opens once its cycle is known; a
one-run crawl does not end before its first allocation is done (it pulls the revisits due within
the cycle's window forward).

Stats: ``webcrawl/allocator/runs``, ``.../pages``, ``.../intervals`` (pages rescheduled),
``.../verify``, ``.../seconds``, ``.../pulled``; ``webcrawl/cycles/started``, ``.../joined``,
``.../rolled_up``, ``.../dead_workers``.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import CloseSpider, DontCloseSpider, NotConfigured
from scrapy.utils.asyncio import call_later, create_looping_call
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from webcrawl.extensions._alloc_cycles import (
    BUCKET_SECONDS, HEARTBEAT_SECONDS, Begun, CycleKeeper, retention_of,
)
from webcrawl.extensions._alloc_planner import Planner
from webcrawl.extensions._alloc_reads import OVERDUE_SECONDS, PlanSettings
from webcrawl.extensions._alloc_worker import STATS, Jobs, PlanWorker
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.errors import StateError

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from webcrawl.extensions._alloc_table import PageTable
    from webcrawl.state.ledger import Cycle

logger = logging.getLogger(__name__)

__all__ = ["BUCKET_SECONDS", "LOCK_RETRY_SECONDS", "LOCK_WAIT_SECONDS", "OVERDUE_SECONDS", "Allocator"]

_SET_STATS = frozenset({STATS + "pages", STATS + "seconds"})
TICK_SECONDS = 1.0
#: How long a process waits for the planning lock to start or join a cycle, and how often it
#: looks again meanwhile.
LOCK_WAIT_SECONDS = 30.0
LOCK_RETRY_SECONDS = 0.05


class Allocator:
    """See the module docstring. Its state is the reactor's; the planner's and the cycle
    keeper's belong to the worker thread while a job runs."""

    lock_wait_seconds = LOCK_WAIT_SECONDS

    def __init__(self, runtime: CrawlRuntime, crawler: Crawler) -> None:
        settings = crawler.settings
        site = runtime.site
        assert site is not None
        self.runtime = runtime
        self.crawler = crawler
        self.stats = runtime.stats
        self.site = site
        policy = settings.get("WEBCRAWL_PLANNER_POLICY", "learned")
        if policy not in ("learned", "uniform"):
            raise ValueError(f"WEBCRAWL_PLANNER_POLICY={policy!r}: expected 'learned' or 'uniform'")
        terms = PlanSettings.of(settings, site)
        self.cycle_seconds, self.budget, self.period = terms.cycle_seconds, terms.budget, terms.period
        self.continuous = runtime.continuous()
        self.worker = uuid.uuid4().hex
        seeds = frozenset(runtime.canonical(u) or u for u in site.seeds)
        self.planner = Planner(runtime, terms, token=self.worker, policy=policy,
                               continuous=self.continuous, seeds=seeds)
        self.cycles = CycleKeeper(runtime, budget=self.budget, cycle_seconds=self.cycle_seconds,
                                  continuous=self.continuous, worker=self.worker,
                                  retention=retention_of(settings))
        self.jobs = PlanWorker()
        self.job = Jobs(self.planner, self.cycles)
        self.cycle: Cycle | None = None
        self._last_alloc = float("-inf")
        self._started = time.monotonic()
        self._cycles_here = 0
        self._rolling = False  # a cycle's close and the next one's start under way
        self._pulling = False  # a one-run cycle's first allocation under way
        self._closed = False
        self._loop = create_looping_call(self.tick)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not crawler.settings.getbool("WEBCRAWL_PLANNER_ENABLED", True):
            raise NotConfigured("the allocator is off: set WEBCRAWL_PLANNER_ENABLED = True")
        if getattr(crawler.spider, "site", None) is None:
            raise NotConfigured("the allocator needs a site-file spider (its budget and page types)")
        ext = cls(CrawlRuntime.of(crawler), crawler)
        crawler.signals.connect(ext._on_spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext._on_spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext.spider_idle, signal=signals.spider_idle)
        return ext

    @property
    def table(self) -> PageTable:
        return self.planner.table

    @property
    def holding(self) -> bool:
        """Whether this process holds the allocation lock."""
        return self.planner.holding

    # -- lifecycle -------------------------------------------------------------------------------

    async def _on_spider_opened(self) -> None:
        await maybe_deferred_to_future(self.spider_opened())

    async def _on_spider_closed(self) -> None:
        closing = self.spider_closed_soon()
        if closing is not None:
            await maybe_deferred_to_future(closing)

    def spider_opened(self) -> Deferred[None]:
        """Start or join a cycle (the spider opens once it is known), then plan in the background."""
        return self._begin_later().addCallback(self._opened).addErrback(self._open_failed)

    def _opened(self, begun: Begun) -> None:
        self._apply_begin(begun)
        self._loop.start(TICK_SECONDS, now=False)
        if self.continuous:
            self.plan_soon()
        else:  # a one-run crawl ends only after its first allocation pulled its revisits forward
            self._pulling = True
            self.plan_soon(pull_forward=True).addBoth(lambda _: setattr(self, "_pulling", False))
        try:
            self.runtime.spend.tick()
        except StateError as exc:
            self.runtime.fail(exc)

    def _open_failed(self, failure: Failure) -> Failure | None:
        if failure.check(StateError):
            self.runtime.fail(failure.value)  # type: ignore[arg-type]
            return None
        return failure  # planning_lock_timeout: the spider closes with that reason

    def spider_closed_soon(self) -> Deferred[None] | None:
        """The ``spider_closed`` signal: book the cycle's figures on the worker thread, after the
        job under way; the spider's close waits for it."""
        self._closed = True
        if self._loop.running:
            self._loop.stop()
        if self.runtime.failed or self.cycle is None:
            if not self.jobs.busy:
                self.jobs.close()
                return None
            waited = self.jobs.submit(lambda: None)
        else:
            self.runtime.flush()  # the costs of what landed, booked before they are read
            cycle, not_before = self.cycle, self.runtime.batch.not_before
            waited = self.jobs.submit(lambda: self.job.final(cycle, not_before))
            waited.addCallbacks(self._apply, self._close_failed)
        waited.addBoth(lambda _: self.jobs.close())
        return waited

    def spider_closed(self) -> None:
        """What the ``spider_closed`` signal does, on the caller's thread (tests and tools that
        drive an allocator without a running reactor)."""
        self._closed = True
        if self._loop.running:
            self._loop.stop()
        if self.runtime.failed or self.cycle is None:
            return
        try:
            self.runtime.flush()
            self._apply(self.job.final(self.cycle, self.runtime.batch.not_before))
        except StateError as exc:
            logger.error("Could not book the cycle's figures at close: %s", exc)

    def spider_idle(self) -> None:
        """A continuous crawl waits for work (revisits come due) instead of closing; a one-run
        crawl waits for its first allocation (it makes the revisits due within the cycle's
        window due now), not for later ones (its close waits for the one under way)."""
        if self.continuous:
            raise DontCloseSpider("waiting for due revisits and the next cycle")
        if self._pulling:
            raise DontCloseSpider("waiting for the first allocation")

    def tick(self) -> None:
        runtime = self.runtime
        if runtime.failed or self.cycle is None:
            return
        try:
            now = runtime.clock.time()
            runtime.ledger.heartbeat(self.cycle.id, self.worker, now + HEARTBEAT_SECONDS)
            self.planner.renew()
        except StateError as exc:
            runtime.fail(exc)
            return
        if not self.jobs.busy and not self._rolling:
            if self.continuous and now >= self.cycle.ends:
                self._roll()
            elif time.monotonic() - self._last_alloc >= self.period:
                self.plan_soon()
        self._check_stop()

    def _check_stop(self) -> None:
        b = self.site.budget
        if self.continuous and b.stop_after_seconds is not None and \
                time.monotonic() - self._started >= b.stop_after_seconds:
            self._stop("stop_after_seconds")

    def _enough_cycles(self) -> bool:
        """This process has seen ``stop_after_cycles`` cycles to their end."""
        n = self.site.budget.stop_after_cycles
        return n is not None and self._cycles_here >= n

    def _stop(self, reason: str) -> None:
        from scrapy.utils.defer import deferred_from_coro

        engine = self.crawler.engine
        if engine is not None and self._loop.running:
            self._loop.stop()
            logger.info("Stopping the continuous crawl (%s)", reason)
            deferred_from_coro(engine.close_spider_async(reason=reason))

    # -- cycles ----------------------------------------------------------------------------------

    def begin(self) -> Cycle:
        """Join the open cycle or start a new one now, on the caller's thread (tests and tools);
        CloseSpider when another process holds the planning lock."""
        begun = self.job.begin()
        if begun is None:
            raise CloseSpider("planning_lock_timeout")
        self._apply_begin(begun)
        assert self.cycle is not None
        return self.cycle

    def _begin_later(self) -> Deferred[Begun]:
        """Start or join a cycle on the worker thread; while another process holds the planning
        lock, try again :data:`LOCK_RETRY_SECONDS` later, for up to ``lock_wait_seconds``."""
        out: Deferred[Begun] = Deferred()
        deadline = time.monotonic() + self.lock_wait_seconds

        def attempt() -> None:
            if not self._closed:
                self.jobs.submit(self.job.begin).addCallbacks(answered, out.errback)

        def answered(begun: Begun | None) -> None:
            if begun is not None:
                out.callback(begun)
            elif time.monotonic() > deadline:
                out.errback(CloseSpider("planning_lock_timeout"))
            else:
                call_later(LOCK_RETRY_SECONDS, attempt)

        attempt()
        return out

    def _apply_begin(self, begun: Begun) -> None:
        cycle = self.cycle = begun.cycle
        if begun.started:
            self.stats.inc_value("webcrawl/cycles/started")
            logger.info("Cycle %d: budget %.6g over %.0f s (%s)", cycle.id, self.budget,
                        self.cycle_seconds, "continuous" if self.continuous else "one run")
        else:
            self.stats.inc_value("webcrawl/cycles/joined")
            logger.info("Joined cycle %d (started by another process)", cycle.id)
        self._cycles_here += 1
        self.runtime.cycle = cycle.id
        # A one-run cycle fetches a page at most once: what it fetches is due again only
        # after the cycle (the next run); a continuous crawl revisits on its intervals.
        self.runtime.batch.not_before = 0.0 if self.continuous else cycle.ends

    def _roll(self) -> None:
        """A continuous cycle ended: book it, then start or join the next one."""
        self._rolling = True
        self.runtime.flush()  # the costs of what landed, booked before they are read
        cycle, not_before = self.cycle, self.runtime.batch.not_before
        assert cycle is not None

        def closed(stats: dict[str, float]) -> Deferred[None] | None:
            self._apply(stats)
            if self._enough_cycles():
                self._stop("stop_after_cycles")
                return None
            return self._begin_later().addCallback(self._apply_begin)

        done = self.jobs.submit(lambda: self.job.close(cycle, not_before)).addCallback(closed)
        done.addErrback(self._failed)
        done.addBoth(lambda _: setattr(self, "_rolling", False))

    def _close_failed(self, failure: Failure) -> None:
        if failure.check(StateError):
            logger.error("Could not book the cycle's figures at close: %s", failure.value)
        else:
            self._failed(failure)

    # -- allocation ------------------------------------------------------------------------------

    def plan_soon(self, pull_forward: bool = False) -> Deferred[dict[str, float]]:
        """Allocate on the worker thread (after the job under way, if any); the Deferred fires on
        the reactor once the allocation's stats are counted."""
        self._last_alloc = time.monotonic()
        cycle, not_before = self.cycle, self.runtime.batch.not_before
        done = self.jobs.submit(lambda: self.job.plan(cycle, not_before, pull_forward))
        done.addCallback(self._apply)
        done.addErrback(self._failed)
        return done

    def allocate(self, force: bool = False) -> None:
        """One allocation now, on the caller's thread (tests, benchmarks and tools; the crawl
        allocates on the worker thread, :meth:`plan_soon`)."""
        if not force and time.monotonic() - self._last_alloc < self.period:
            return
        self._last_alloc = time.monotonic()
        self.runtime.flush()  # this process's writes, seen by the sync
        self._apply(self.job.plan(self.cycle, self.runtime.batch.not_before))

    def _apply(self, stats: dict[str, float]) -> dict[str, float]:
        for key, value in stats.items():
            if key in _SET_STATS:
                self.stats.set_value(key, value)
            else:
                self.stats.inc_value(key, value)  # type: ignore[arg-type]
        return stats

    def _failed(self, failure: Failure) -> None:
        if failure.check(CloseSpider):
            self._stop(failure.value.reason)  # type: ignore[union-attr]
        elif failure.check(StateError):
            self.runtime.fail(failure.value)  # type: ignore[arg-type]
        else:
            logger.error("The allocator failed: %s", failure.getErrorMessage(),
                         exc_info=(failure.type, failure.value, failure.getTracebackObject()))
