"""End a crawl within a bounded time, whatever its hosts do (see :mod:`webcrawl.stopping`).

Scrapy closes a spider by waiting for every request it holds: one dripping body (a byte now and
then) or a request waiting behind a long Crawl-delay keeps a stopping crawl alive until its own
end. This extension notices the moment the engine starts closing, whatever the reason
(``CLOSESPIDER_TIMEOUT``, SIGINT/SIGTERM, the end of a cycle), and then

- at once sends :data:`~webcrawl.stopping.stop_started`: requests not on the wire yet are given
  back;
- ``WEBCRAWL_STOP_GRACE_SECONDS`` later (default 10) sends :data:`~webcrawl.stopping.grace_over`:
  downloads still running are cancelled and given back.

So a stop takes at most the grace period plus the time the pipelines and the scheduler need to
close. Requests given back were not fetched: their leases go back to the queue for the next run.

Stats: ``webcrawl/stop/grace_over`` (1 when the grace period ran out with work in flight),
``webcrawl/stop/cancelled`` (downloads cancelled, counted by the download handler),
``webcrawl/stop/given_back`` (requests given back by the host spacing middleware), and
``webcrawl/stop/seconds`` (from the start of the close to ``spider_closed``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.utils.asyncio import CallLaterResult, call_later

from webcrawl import stopping

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class BoundedStop:
    """See the module docstring."""

    def __init__(self, crawler: Crawler, grace_seconds: float) -> None:
        if not grace_seconds >= 0:
            raise ValueError(f"WEBCRAWL_STOP_GRACE_SECONDS={grace_seconds!r}: expected seconds >= 0")
        self.crawler = crawler
        self.grace_seconds = grace_seconds
        self.started_at: float | None = None
        self._timer: CallLaterResult | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        stop = cls(crawler, crawler.settings.getfloat("WEBCRAWL_STOP_GRACE_SECONDS", 10.0))
        crawler.signals.connect(stop.engine_started, signal=signals.engine_started)
        crawler.signals.connect(stop.spider_closed, signal=signals.spider_closed)
        return stop

    def engine_started(self) -> None:
        # Scrapy has no signal for "the spider starts closing" (spider_closed comes after every
        # request ended): every way to close (timeout, signal, extensions, the engine itself)
        # goes through this one engine method, so it is wrapped on this engine.
        engine = self.crawler.engine
        assert engine is not None
        original = engine.close_spider_async

        async def close_spider_async(*, reason: str = "cancelled") -> None:
            self.closing(reason)
            await original(reason=reason)

        engine.close_spider_async = close_spider_async  # type: ignore[method-assign]

    def closing(self, reason: str) -> None:
        """The engine starts closing the spider: give back what waits, cancel later what runs."""
        if self.started_at is not None:
            return
        self.started_at = time.monotonic()
        engine = self.crawler.engine
        held = len(engine.downloader.active) if engine is not None else 0
        logger.info("Stopping (%s): %d request(s) in the downloader; downloads still running in "
                    "%g s are cancelled (WEBCRAWL_STOP_GRACE_SECONDS)", reason, held,
                    self.grace_seconds)
        self.crawler.signals.send_catch_log(stopping.stop_started)
        self._timer = call_later(self.grace_seconds, self.grace_over)

    def grace_over(self) -> None:
        self._timer = None
        assert self.crawler.stats is not None
        self.crawler.stats.set_value("webcrawl/stop/grace_over", 1)
        self.crawler.signals.send_catch_log(stopping.grace_over)

    def spider_closed(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        if self.started_at is not None and self.crawler.stats is not None:
            self.crawler.stats.set_value("webcrawl/stop/seconds",
                                         round(time.monotonic() - self.started_at, 3))
