"""The crawl's progress: one INFO line per ``WEBCRAWL_PROGRESS_INTERVAL_SECONDS`` (30), e.g.::

    Progress: cycle 3: spent 1.21 MB of 50.00 MB (2.4%), 311 fetches, 42 changes found, cost per change 28.81 KB, 12 new pages

The figures are the current cycle's, from the cycle ledger in Redis, so they cover every process
of the crawl; without a cycle (no planner), this process's own stats (``webcrawl/cost/total``,
``webcrawl/cost/attempts``, ``webcrawl/records/changed``). A last line is logged when the spider
closes.

It also keeps each cycle's estimated freshness of the copy for the report
(:func:`webcrawl.state.freshness.store_snapshot`): at close for the current cycle, and, in a
continuous crawl, for a cycle as soon as the next one is seen. ``WEBCRAWL_PROGRESS_SNAPSHOT =
False`` turns that off (it reads up to ``WEBCRAWL_REPORT_MAX_PAGES`` page histories).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import create_looping_call

from webcrawl.config import DEFAULT_PRIOR, configured_prior
from webcrawl.clock import SystemClock
from webcrawl.revisit import GammaPrior
from webcrawl.state.costs import cost_context
from webcrawl.state.freshness import estimate_freshness, store_snapshot

if TYPE_CHECKING:
    from typing import Any, Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from webcrawl.clock import Clock
    from webcrawl.state.keys import CrawlKeys
    from webcrawl.state.ledger import LedgerStore

logger = logging.getLogger(__name__)

__all__ = ["ProgressLog", "format_cost"]

UNITS = {"bandwidth": "bytes", "credits": "credits", "requests": "requests"}


def format_cost(value: float, unit: str) -> str:
    """``1.21 MB`` for bytes, ``1,234`` or ``12.50`` credits / requests."""
    if unit == "bytes":
        for scale, suffix in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
            if abs(value) >= scale:
                return f"{value / scale:.2f} {suffix}"
        return f"{value:.0f} B"
    return f"{value:,.0f} {unit}" if value == int(value) else f"{value:,.2f} {unit}"


def _sum(numbers: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in numbers.items() if k.startswith(prefix))


class ProgressLog:
    """Logs the progress line; see the module docstring."""

    def __init__(self, stats: StatsCollector, *, interval: float = 30.0, unit: str = "bytes",
                 ledger: LedgerStore | None = None, client: Any = None, keys: CrawlKeys | None = None,
                 prior: GammaPrior | None = None, snapshot: bool = True, max_pages: int = 200_000,
                 clock: Clock | None = None) -> None:
        self.stats = stats
        self.interval = interval
        self.unit = unit
        self.ledger = ledger
        self.client = client
        self.keys = keys
        self.prior = prior or DEFAULT_PRIOR
        self.snapshot = snapshot and client is not None and keys is not None
        self.max_pages = max_pages
        self.clock = clock or SystemClock()
        self._cycle_id: int | None = None
        self._task: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_PROGRESS_ENABLED", True):
            raise NotConfigured("the progress line is off: set WEBCRAWL_PROGRESS_ENABLED = True")
        interval = settings.getfloat("WEBCRAWL_PROGRESS_INTERVAL_SECONDS", 30.0)
        if not interval > 0:
            raise ValueError(f"WEBCRAWL_PROGRESS_INTERVAL_SECONDS={interval!r}: expected seconds > 0")
        assert crawler.stats is not None
        context = cost_context(crawler)
        ledger = context.ledger
        prior = configured_prior(settings)
        ext = cls(crawler.stats, interval=interval, unit=UNITS[context.billing.value], ledger=ledger,
                  client=ledger.client, keys=ledger.keys, prior=prior,
                  snapshot=settings.getbool("WEBCRAWL_PROGRESS_SNAPSHOT", True),
                  max_pages=settings.getint("WEBCRAWL_REPORT_MAX_PAGES", 200_000))
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self) -> None:
        self._task = create_looping_call(self.log)
        self._task.start(self.interval, now=False)

    def spider_closed(self) -> None:
        if self._task is not None and self._task.running:
            self._task.stop()
        self.log()
        if self._cycle_id is not None:
            self.keep_freshness(self._cycle_id)

    def line(self) -> tuple[str, tuple[object, ...]]:
        """The progress message and its %-arguments (the current cycle's, or this process's)."""
        cycle = self.ledger.current() if self.ledger is not None else None
        args: tuple[object, ...]
        if cycle is None:
            spent = float(self.stats.get_value("webcrawl/cost/total", 0))
            fetches = float(self.stats.get_value("webcrawl/cost/attempts", 0))
            changes = float(self.stats.get_value("webcrawl/records/changed", 0))
            new = float(self.stats.get_value("webcrawl/records/new", 0))
            head, args = "Progress (this process, no cycle): spent %s", (format_cost(spent, self.unit),)
        else:
            if self._cycle_id is not None and self._cycle_id != cycle.id:
                self.keep_freshness(self._cycle_id)  # a continuous crawl moved on to a new cycle
            self._cycle_id = cycle.id
            numbers = self.ledger.numbers(cycle.id)  # type: ignore[union-attr]
            spent, fetches = numbers.get("booked", 0.0), _sum(numbers, "fetches:")
            changes, new = _sum(numbers, "changed:"), _sum(numbers, "new:")
            share = spent / cycle.budget if cycle.budget > 0 else 0.0
            head = "Progress: cycle %d: spent %s of %s (%.1f%%)"
            args = (cycle.id, format_cost(spent, self.unit), format_cost(cycle.budget, self.unit),
                    100 * share)
        per_change = format_cost(spent / changes, self.unit) if changes else "-"
        message = head + ", %d fetches, %d changes found, cost per change %s, %d new pages"
        return message, (*args, fetches, changes, per_change, new)

    def log(self) -> None:
        message, args = self.line()
        logger.info(message, *args)

    def keep_freshness(self, cycle_id: int) -> None:
        """Store the estimated freshness as ``cycle_id``'s (for the report's charts)."""
        if not self.snapshot:
            return
        assert self.client is not None and self.keys is not None
        freshness = estimate_freshness(self.client, self.keys, self.clock.time(), self.prior,
                                       max_pages=self.max_pages)
        if freshness.pages:
            store_snapshot(self.client, self.keys, cycle_id, freshness)
