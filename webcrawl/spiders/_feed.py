"""URLs pushed to a running crawl through Redis, scrapy-redis style, turned into requests.

A spider of webcrawl reads the key ``<spider>:start_urls`` on the crawl's Redis
(:mod:`webcrawl.state.feed`) every ``WEBCRAWL_FEED_SECONDS`` (1) and whenever it is idle, takes up
to ``REDIS_START_URLS_BATCH_SIZE`` entries (default ``CONCURRENT_REQUESTS``) and schedules one
request per entry through the crawl's queue. As with scrapy-redis's ``RedisSpider``, a pushed
URL is crawled even if the crawl met it before (``dont_filter``); the links of its page go
through the seen filter as usual.

scrapy-redis's settings keep their meaning: ``REDIS_START_URLS_KEY`` (``%(name)s:start_urls``),
``REDIS_START_URLS_AS_SET`` / ``REDIS_START_URLS_AS_ZSET``, ``REDIS_START_URLS_BATCH_SIZE``,
``REDIS_ENCODING``. ``MAX_IDLE_TIME_BEFORE_CLOSE`` (seconds) keeps a crawl with nothing left to
do open for pushed URLs that long (0: until stopped); unset, a one-run crawl ends when its work
is done, and a continuous crawl runs until its stop condition anyway. ``WEBCRAWL_FEED_ENABLED =
False`` turns the feed off.

Hostile entries are counted and skipped, never fatal: bad JSON, no or a non-http(s) URL, an
unknown method (``webcrawl/feed/invalid``, one WARNING per run naming the first). ``meta`` keys
that would change the crawl's policy are dropped (``webcrawl/feed/meta_dropped``): webcrawl's
own (``webcrawl_*``), ``dont_obey_robotstxt``, ``proxy`` and ``_auth_proxy``. The SSRF guard and
robots.txt judge a pushed URL like any other. Stats: ``webcrawl/feed/read`` (entries taken),
``webcrawl/feed/requests`` (requests scheduled).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.asyncio import create_looping_call

from webcrawl.runtime import CrawlRuntime
from webcrawl.state.errors import StateError
from webcrawl.state.feed import DEFAULT_KEY, FeedEntry, FeedError, StartUrlsFeed, feed_key, parse_entry

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

__all__ = ["RESERVED_META", "Feed", "safe_meta"]

logger = logging.getLogger(__name__)

STATS = "webcrawl/feed/"
RESERVED_META = ("dont_obey_robotstxt", "proxy", "_auth_proxy")


def safe_meta(meta: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The feeder's ``meta`` without the keys that would change the crawl's policy, and how many
    were dropped."""
    kept = {k: v for k, v in meta.items()
            if not (k.startswith("webcrawl_") or k in RESERVED_META)}
    return kept, len(meta) - len(kept)


class Feed:
    """One spider's feed (see the module docstring). ``make_request`` builds the spider's request
    for an entry (its ``meta`` already made safe)."""

    def __init__(self, crawler: Crawler, spider: Spider,
                 make_request: Callable[[FeedEntry], Request]) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.make_request = make_request
        self.key = feed_key(settings.get("REDIS_START_URLS_KEY") or DEFAULT_KEY, spider.name)
        if settings.getbool("REDIS_START_URLS_AS_SET"):
            self.kind = "set"
        elif settings.getbool("REDIS_START_URLS_AS_ZSET"):
            self.kind = "zset"
        else:
            self.kind = "list"
        self.batch = settings.getint("REDIS_START_URLS_BATCH_SIZE",
                                     settings.getint("CONCURRENT_REQUESTS", 16))
        self.encoding = settings.get("REDIS_ENCODING") or "utf-8"
        wait = settings.get("MAX_IDLE_TIME_BEFORE_CLOSE")
        self.idle_wait: float | None = None if wait in (None, "") else float(wait)
        self.period = settings.getfloat("WEBCRAWL_FEED_SECONDS", 1.0)
        if self.batch < 1 or self.period <= 0 or (self.idle_wait is not None and self.idle_wait < 0):
            raise ValueError(
                f"REDIS_START_URLS_BATCH_SIZE={self.batch!r}, WEBCRAWL_FEED_SECONDS="
                f"{self.period!r}, MAX_IDLE_TIME_BEFORE_CLOSE={wait!r}: expected a batch of at "
                "least 1, seconds > 0 and an idle time >= 0")
        self._feed: StartUrlsFeed | None = None
        self._idle_since: float | None = None
        self._warned = False
        self._loop: Any = None  # made when the spider opens: the reactor may not exist before
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @property
    def feed(self) -> StartUrlsFeed:
        if self._feed is None:
            self._feed = StartUrlsFeed(CrawlRuntime.of(self.crawler).client, self.key, self.kind)
        return self._feed

    def spider_opened(self) -> None:
        logger.info("Reading pushed URLs from the Redis %s %r (batch %d)", self.kind, self.key,
                    self.batch)
        self._loop = create_looping_call(self.poll)
        self._loop.start(self.period, now=True)

    def spider_closed(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def spider_idle(self) -> None:
        """Take what was pushed; keep the spider open while waiting for more, if asked to."""
        taken = self.poll()
        now = time.monotonic()
        if taken or self._idle_since is None:
            self._idle_since = now
        if taken:
            raise DontCloseSpider("scheduled pushed URLs")
        if self.idle_wait is not None and (self.idle_wait == 0 or
                                           now - self._idle_since < self.idle_wait):
            raise DontCloseSpider("waiting for pushed URLs")

    def poll(self) -> int:
        """Schedule a request per entry waiting (up to the batch); how many were scheduled."""
        engine = self.crawler.engine
        runtime = CrawlRuntime.of(self.crawler)
        if engine is None or runtime.failed:
            return 0
        try:
            entries = self.feed.take(self.batch)
        except StateError as exc:  # the crawl's own Redis handling says more; the feed waits
            logger.debug("Could not read pushed URLs from %r: %s", self.key, exc)
            return 0
        scheduled = 0
        for data in entries:
            self._inc("read")
            try:
                entry = parse_entry(data, self.encoding)
            except FeedError as exc:
                self._inc("invalid")
                if not self._warned:
                    self._warned = True
                    logger.warning("Skipped a pushed entry of %r: %s (counted in "
                                   "webcrawl/feed/invalid)", self.key, exc)
                continue
            meta, dropped = safe_meta(entry.meta)
            if dropped:
                self._inc("meta_dropped", dropped)
            request = self.make_request(FeedEntry(entry.url, entry.method, meta, entry.formdata))
            engine.crawl(request)
            self._inc("requests")
            scheduled += 1
        if scheduled:
            self._idle_since = time.monotonic()
        return scheduled

    def _inc(self, name: str, count: int = 1) -> None:
        stats = self.crawler.stats
        assert stats is not None
        stats.inc_value(STATS + name, count)
