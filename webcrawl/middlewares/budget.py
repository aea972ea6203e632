"""Budget admission: a fetch starts only if the cycle can still afford it (revisit-model.md, 5.4).

``process_request`` admits each request against the current cycle's ledger
(:meth:`LedgerStore.admit <webcrawl.state.ledger.LedgerStore.admit>`) for its expected cost
(``meta["webcrawl_expected_cost"]``, set by the priority middleware or the planner; else the
default cost of the site's billing model), and notes the admission in ``meta["webcrawl_cycle"]``
and ``meta["webcrawl_reserved"]``: the cost middleware books the actual cost into that cycle as the
fetch lands, releasing the reservation once. A request the cost middleware never measures (refused
by robots.txt, or any other middleware, before going on the wire) has its reservation released here,
in ``process_exception``. So a cycle ends above its budget only by what the fetches already in
flight cost beyond their expectation, never by a fetch started after the budget was spent.

A planned visit (``meta["webcrawl_planned"]`` = the current cycle's id) draws on the plan's
reservation; anything else (discovery, listing-triggered visits, sitemaps) must fit beside it.
A planned visit of an earlier cycle is dropped: the current cycle's plan scored its page again.
robots.txt fetches are never refused (a refusal would read as "robots.txt unreachable" and
disallow the host for a while), so they are paid for in advance: the first request of each origin
in a cycle (per process) whose robots.txt answer is not in the shared cache reserves
``robots_cost`` more than its own expected cost, and the cost middleware books the robots.txt
fetch, unreserved, when it lands. (An answer that expires in the middle of a cycle is fetched again
unreserved: at most one robots.txt a host a day beyond the budget.)

What does not fit is not lost: it is written to ``{c}:deferred`` and pushed back into its frontier
when the next cycle starts, then ``IgnoreRequest`` (:class:`BudgetExhausted`, logged at DEBUG)
ends it here. In one-run-one-cycle mode a refusal also closes the spider (reason
``cycle_budget_spent``) once nothing planned is left to admit: what is still queued stays in the
frontiers for the next run. (A fetch outside the plan refused while planned visits still hold
their reservation is deferred, and the crawl goes on with the plan.) In
continuous mode the crawl goes on and the next cycle admits again.

Place it at 50 in ``DOWNLOADER_MIDDLEWARES``: after the SSRF guard (45), before robots.txt (100),
so a request the cycle cannot afford triggers no robots.txt fetch.

Stats: ``webcrawl/budget/admitted``, ``webcrawl/budget/refused``, ``webcrawl/budget/superseded``,
``webcrawl/budget/released``, ``webcrawl/budget/unbudgeted`` (no cycle that a live planner works
on: the planner is off, or has not started one).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.httpobj import urlparse_cached

from webcrawl import meta
from webcrawl.clock import SystemClock
from webcrawl.middlewares.robots import origin_of
from webcrawl.requestcodec import UnserializableRequest, encode
from webcrawl.revisit import BillingModel
from webcrawl.robots.cache import robots_key
from webcrawl.state.costs import cost_context
from webcrawl.state.frontier import Entry

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from webcrawl.clock import Clock
    from webcrawl.state.ledger import Cycle, LedgerStore

logger = logging.getLogger(__name__)

__all__ = ["BudgetExhausted", "BudgetMiddleware", "deferred_entry"]

STATS = "webcrawl/budget/"
META_CYCLE = meta.CYCLE
META_RESERVED = meta.RESERVED
CLOSE_REASON = "cycle_budget_spent"


class BudgetExhausted(IgnoreRequest):
    """The cycle cannot afford this fetch; it waits for the next cycle."""


def deferred_entry(payload: str) -> Entry | None:
    """The frontier entry of a deferred request (``None`` if the payload is unreadable)."""
    try:
        d = json.loads(payload)
        return Entry(str(d["domain"]), -float(d["priority"]), str(d["payload"]), None)
    except (ValueError, KeyError, TypeError):
        logger.error("Dropping an unreadable deferred request: %.200s", payload)
        return None


class BudgetMiddleware:
    """Admit fetches against the cycle ledger; see the module docstring."""

    def __init__(self, ledger: LedgerStore, stats: StatsCollector, *, default_cost: float,
                 spider: Spider | None = None, clock: Clock | None = None, continuous: bool = False,
                 close: Callable[[str], Any] | None = None, cache_seconds: float = 1.0,
                 robots_cost: float | None = None,
                 robots_cached: Callable[[str], bool] | None = None) -> None:
        self.ledger = ledger
        self.stats = stats
        self.default_cost = default_cost
        self.spider = spider
        self.clock = clock or SystemClock()
        self.continuous = continuous
        self.close = close
        self.cache_seconds = cache_seconds
        self._cycle: tuple[float, Cycle | None] = (float("-inf"), None)
        self._closing = False
        self.robots_cost = default_cost if robots_cost is None else robots_cost
        self._origins: tuple[int, set[str]] = (0, set())
        self.robots_cached = robots_cached or (lambda origin: False)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_BUDGET_ENABLED", True):
            raise NotConfigured("budget admission is off: set WEBCRAWL_BUDGET_ENABLED = True")
        from webcrawl.extensions._planner_settings import default_cost

        context = cost_context(crawler)
        if context.site is None:
            raise NotConfigured("budget admission needs a site-file spider (its budget)")
        assert crawler.stats is not None

        def close(reason: str) -> None:
            from scrapy.utils.defer import deferred_from_coro

            assert crawler.engine is not None
            deferred_from_coro(crawler.engine.close_spider_async(reason=reason))

        cost = default_cost(context.billing, settings)
        client = context.costs.client
        robots = settings.getfloat("WEBCRAWL_BUDGET_ROBOTS_COST", cost if context.billing is not BillingModel.BANDWIDTH
                                   else min(cost, 5_000.0))
        return cls(context.ledger, crawler.stats, default_cost=cost, spider=crawler.spider,
                   continuous=settings.getbool("WEBCRAWL_CYCLE_CONTINUOUS", False), close=close,
                   robots_cost=robots,
                   robots_cached=lambda origin: bool(client.exists(robots_key(origin))))

    def current(self) -> Cycle | None:
        """The cycle being worked on: the ledger's current one while some process's planner keeps
        its heartbeat (a cycle left over from an earlier run budgets nothing)."""
        at, cycle = self._cycle
        now = self.clock.time()
        if now - at >= self.cache_seconds or (cycle is not None and now >= cycle.ends and self.continuous):
            cycle = self.ledger.current()
            if cycle is not None and self.ledger.live_workers(cycle.id, now) == 0:
                cycle = None
            self._cycle = (now, cycle)
        return cycle

    def process_request(self, request: Request) -> None:
        meta = request.meta
        if meta.get("webcrawl_purpose") == "robots" or float(meta.get(META_RESERVED) or 0.0) > 0:
            return None
        cycle = self.current()
        if cycle is None:
            self.stats.inc_value(STATS + "unbudgeted")
            return None
        planned = meta.get("webcrawl_planned")
        if planned is not None and int(planned) < cycle.id:
            self.stats.inc_value(STATS + "superseded")
            raise BudgetExhausted(f"planned by cycle {planned}, superseded by cycle {cycle.id}")
        expected = float(meta.get("webcrawl_expected_cost") or self.default_cost)
        origin = origin_of(request) or "-"
        seen_cycle, origins = self._origins
        if seen_cycle != cycle.id:
            origins = set()
            self._origins = (cycle.id, origins)
        surcharge = 0.0
        if origin not in origins and self.robots_cost and not request.meta.get("dont_obey_robotstxt"):
            if self.robots_cached(origin):
                origins.add(origin)
            else:
                surcharge = self.robots_cost
        if self.ledger.admit(cycle.id, expected + surcharge, planned=planned == cycle.id):
            origins.add(origin)
            meta[META_CYCLE], meta[META_RESERVED] = cycle.id, expected + surcharge
            self.stats.inc_value(STATS + "admitted")
            return None
        self.stats.inc_value(STATS + "refused")
        self._defer(request, cycle)
        plan_pending = planned != cycle.id and self.ledger.reserved(cycle.id) > 0
        if not self.continuous and not self._closing and self.close is not None and not plan_pending:
            self._closing = True
            logger.info("Cycle %d has spent its budget (%.4g): closing; what is queued waits for "
                        "the next run", cycle.id, cycle.budget)
            self.close(CLOSE_REASON)
        raise BudgetExhausted(f"cycle {cycle.id} cannot afford {expected:.4g}")

    def process_exception(self, request: Request, exception: BaseException) -> None:
        reserved = float(request.meta.get(META_RESERVED) or 0.0)
        if reserved > 0 and request.meta.get(META_CYCLE) is not None:
            request.meta[META_RESERVED] = 0.0
            self.ledger.release(int(request.meta[META_CYCLE]), reserved)
            self.stats.inc_value(STATS + "released")
        return None

    def _defer(self, request: Request, cycle: Cycle) -> None:
        if request.meta.get("webcrawl_planned") is not None:
            return  # the next plan scores the page again: keeping this one would visit it twice
        meta = {k: v for k, v in request.meta.items() if k not in (META_CYCLE, META_RESERVED)}
        try:
            payload = encode(request.replace(meta=meta), self.spider)
        except UnserializableRequest as exc:
            logger.error("Cannot keep %s for the next cycle: %s", request, exc)
            self.stats.inc_value(STATS + "unserializable")
            return
        domain = urlparse_cached(request).hostname or "-"
        self.ledger.defer(cycle.id, [json.dumps({"domain": domain, "priority": request.priority,
                                                 "payload": payload})])
