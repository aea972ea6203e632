"""Event consumers that fall behind: a stat, and a warning before the record trims what they missed.

The crawl state keeps each change event ``WEBCRAWL_EVENTS_RETENTION_SECONDS`` (7 days) and then
trims it, read or not (docs/events.md). Every ``WEBCRAWL_EVENTS_WATCH_SECONDS`` (60) this extension
asks how far behind each consumer group of the crawl's event record is
(:meth:`webcrawl.state.eventlog.EventLog.lag`: the age of the oldest event it has not
acknowledged), off the reactor thread, and sets ``webcrawl/events/lag_seconds/<group>``. A group
lagging past ``WEBCRAWL_EVENTS_LAG_WARN_SHARE`` (0.8) of the retention gets one WARNING (again
each time it crosses that line anew): its oldest events are close to being trimmed unread.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import create_looping_call
from twisted.internet import threads

from webcrawl.runtime import CrawlRuntime

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from webcrawl.state.eventlog import EventLog

logger = logging.getLogger(__name__)

__all__ = ["EventLagWatch"]

STAT = "webcrawl/events/lag_seconds/"


class EventLagWatch:
    """Watches the lag of the event record's consumers (module docstring)."""

    def __init__(self, log: EventLog, stats: StatsCollector, *, retention: float,
                 interval: float = 60.0, warn_share: float = 0.8) -> None:
        if not interval > 0:
            raise ValueError(f"WEBCRAWL_EVENTS_WATCH_SECONDS={interval!r}: expected seconds > 0")
        if not 0 < warn_share <= 1:
            raise ValueError(f"WEBCRAWL_EVENTS_LAG_WARN_SHARE={warn_share!r}: expected 0 < share <= 1")
        self.log = log
        self.stats = stats
        self.retention = retention
        self.interval = interval
        self.warn_after = retention * warn_share
        self._warned: set[str] = set()
        self._loop = create_looping_call(self.check)
        self._busy = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_EVENTS_WATCH_ENABLED", True):
            raise NotConfigured("event consumers are not watched: set WEBCRAWL_EVENTS_WATCH_ENABLED")
        assert crawler.stats is not None
        runtime = CrawlRuntime.of(crawler)
        ext = cls(runtime.events, crawler.stats, retention=runtime.config.events_retention,
                  interval=settings.getfloat("WEBCRAWL_EVENTS_WATCH_SECONDS", 60.0),
                  warn_share=settings.getfloat("WEBCRAWL_EVENTS_LAG_WARN_SHARE", 0.8))
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self) -> None:
        self._loop.start(self.interval, now=False)

    def spider_closed(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def check(self) -> None:
        """Ask for the lags from a thread (a few commands a shard); record them when answered."""
        if self._busy:
            return
        self._busy = True
        d = threads.deferToThread(self.log.lag)
        d.addCallbacks(self.record, self._failed)

    def _failed(self, failure: object) -> None:
        self._busy = False
        logger.debug("could not read the event consumers' lag: %s", failure)

    def record(self, lags: dict[str, float]) -> None:
        self._busy = False
        for group, seconds in lags.items():
            self.stats.set_value(STAT + group, round(seconds, 3))
            if seconds >= self.warn_after:
                if group not in self._warned:
                    self._warned.add(group)
                    logger.warning(
                        "Event consumer %r is %.0f s behind: events older than "
                        "WEBCRAWL_EVENTS_RETENTION_SECONDS (%.0f s) are trimmed unread; start it "
                        "or raise the retention", group, seconds, self.retention)
            else:
                self._warned.discard(group)
