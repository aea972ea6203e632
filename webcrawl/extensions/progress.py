"""The crawl's progress: one INFO line per ``WEBCRAWL_PROGRESS_INTERVAL_SECONDS`` (30), e.g.::

    Progress: cycle 3: spent 1.21 MB of 50.00 MB (2.4%), 311 fetches, 42 changes found, cost per change 28.81 KB, 12 new pages

The figures are the current cycle's, from the cycle ledger in Redis, so they cover every process
of the crawl; without a cycle (no planner), this process's own stats (``webcrawl/cost/total``,
``webcrawl/cost/attempts``, ``webcrawl/records/changed``). A last line is logged when the spider
closes.

Besides, in a crawl with a budget: the spend rate against the budget rate over the last interval
and the model's estimated freshness of the copy (what the allocator last published).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import create_looping_call

from webcrawl.state.errors import StateError
from webcrawl.runtime import CrawlRuntime

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

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
                 runtime: CrawlRuntime | None = None) -> None:
        self.stats = stats
        self.interval = interval
        self.unit = unit
        self.runtime = runtime
        self._task: Any = None
        self._last: tuple[float, float] | None = None  # (time, booked) at the previous line

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_PROGRESS_ENABLED", True):
            raise NotConfigured("the progress line is off: set WEBCRAWL_PROGRESS_ENABLED = True")
        interval = settings.getfloat("WEBCRAWL_PROGRESS_INTERVAL_SECONDS", 30.0)
        if not interval > 0:
            raise ValueError(f"WEBCRAWL_PROGRESS_INTERVAL_SECONDS={interval!r}: expected seconds > 0")
        assert crawler.stats is not None
        runtime = CrawlRuntime.of(crawler)
        ext = cls(crawler.stats, interval=interval, unit=UNITS[runtime.billing.value], runtime=runtime)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self) -> None:
        self._task = create_looping_call(self.log)
        self._task.start(self.interval, now=False)

    def spider_closed(self) -> None:
        if self._task is not None and self._task.running:
            self._task.stop()
        if self.runtime is None or not self.runtime.failed:
            self.log()

    def line(self) -> tuple[str, tuple[object, ...]]:
        """The progress message and its %-arguments (the current cycle's, or this process's)."""
        runtime = self.runtime
        cycle = runtime.ledger.current() if runtime is not None and runtime.cycle is not None else None
        args: tuple[object, ...]
        extra = ""
        if cycle is None or runtime is None:
            spent = float(self.stats.get_value("webcrawl/cost/total", 0))
            fetches = float(self.stats.get_value("webcrawl/cost/attempts", 0))
            changes = float(self.stats.get_value("webcrawl/records/changed", 0))
            new = float(self.stats.get_value("webcrawl/records/new", 0))
            head, args = "Progress (this process, no cycle): spent %s", (format_cost(spent, self.unit),)
        else:
            numbers = runtime.ledger.numbers(cycle.id)
            spent, fetches = numbers.get("booked", 0.0), _sum(numbers, "fetches:")
            changes, new = _sum(numbers, "changed:"), _sum(numbers, "new:")
            share = spent / cycle.budget if cycle.budget > 0 else 0.0
            head = "Progress: cycle %d: spent %s of %s (%.1f%%)"
            args = (cycle.id, format_cost(spent, self.unit), format_cost(cycle.budget, self.unit),
                    100 * share)
            now = runtime.clock.time()
            rate = numbers.get("rate", 0.0)
            if self._last is not None and now > self._last[0] and rate > 0 and spent >= self._last[1]:
                extra += ", spend rate %.2f of the budget rate" % (
                    (spent - self._last[1]) / (now - self._last[0]) / rate)
            self._last = (now, spent)
            published = runtime.published()
            if "freshness_value" in published:
                extra += ", estimated freshness %.3f" % published["freshness_value"]
        per_change = format_cost(spent / changes, self.unit) if changes else "-"
        message = head + ", %d fetches, %d changes found, cost per change %s, %d new pages" + extra
        return message, (*args, fetches, changes, per_change, new)

    def log(self) -> None:
        try:
            message, args = self.line()
        except StateError:
            return  # an outage: the scheduler says so; the next line catches up
        logger.info(message, *args)
