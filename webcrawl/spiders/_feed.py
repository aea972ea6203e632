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
unknown method (``webcrawl/feed/invalid``, one WARNING per run naming the first).

Whoever can write to the crawl's Redis can push, so an entry's ``meta`` may set only the keys of
an allowlist, each with a value of its type: :data:`ALLOWED_META` (a cookie session, no cache,
no retry, a referrer policy: nothing that lifts a limit, binds an address, routes through a
proxy, changes download sizes or timeouts, or sets a key webcrawl's scheduler and pipelines
trust), and the project's own keys named in ``WEBCRAWL_FEED_META_KEYS`` (a job id, say: a list
of names, none of them Scrapy's or webcrawl's, checked at start-up). Any other key, or a value
of the wrong type, is dropped and counted (``webcrawl/feed/meta_dropped``, one WARNING per run
naming the first). The SSRF guard and robots.txt judge a pushed URL like any other. Stats:
``webcrawl/feed/read`` (entries taken), ``webcrawl/feed/requests`` (requests made of them and
handed to the engine).
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
from webcrawl.settingtypes import get_list
from webcrawl.state.errors import StateError
from webcrawl.state.feed import DEFAULT_KEY, FeedEntry, FeedError, StartUrlsFeed, feed_key, parse_entry

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

__all__ = ["ALLOWED_META", "SCRAPY_META", "Feed", "project_meta_keys", "safe_meta"]

logger = logging.getLogger(__name__)

STATS = "webcrawl/feed/"
#: Scrapy's ``meta`` keys a pushed entry may set, with the value types each takes.
ALLOWED_META: dict[str, tuple[type, ...]] = {
    "cookiejar": (str, int),  # which cookie session (cookies on: the site file's choice)
    "dont_cache": (bool,),
    "dont_retry": (bool,),
    "referrer_policy": (str,),
}
#: Scrapy's own ``meta`` keys (its documented special keys and those its components read), which
#: ``WEBCRAWL_FEED_META_KEYS`` may not open to feeders: most lift a limit or reroute a request.
SCRAPY_META = frozenset({
    "allow_offsite", "autothrottle_dont_adjust_delay", "bindaddress", "cache_timestamp",
    "cached_response", "cookiejar", "depth", "depth_reset", "dont_cache", "dont_merge_cookies",
    "dont_obey_robotstxt", "dont_proxy", "dont_redirect", "dont_retry", "download_fail_on_dataloss",
    "download_latency", "download_maxsize", "download_slot", "download_timeout",
    "download_warnsize", "ftp_local_filename", "ftp_passive", "ftp_password", "ftp_user",
    "handle_httpstatus_all", "handle_httpstatus_list", "http_auth_domain", "http_pass",
    "http_user", "is_secure", "is_start_request", "max_retry_times", "priority_adjust", "proxy",
    "redirect_reasons", "redirect_times", "redirect_ttl", "redirect_urls", "referrer_policy",
    "retry_times", "rule", "verbatim_url"})


def project_meta_keys(names: Iterable[str]) -> frozenset[str]:
    """``WEBCRAWL_FEED_META_KEYS``, checked: the project's own keys only."""
    keys = frozenset(names) - ALLOWED_META.keys()  # those are taken anyway, type-checked
    refused = sorted(k for k in keys if k in SCRAPY_META or k.startswith(("webcrawl_", "_")))
    if refused:
        raise ValueError(
            f"WEBCRAWL_FEED_META_KEYS names {', '.join(map(repr, refused))}: it lists the "
            "project's own meta keys that pushed URLs may set (a job id, say); Scrapy's and "
            "webcrawl's keys are never taken from the feed, except "
            f"{', '.join(ALLOWED_META)}, which always are")
    return keys


def safe_meta(meta: dict[str, Any], own: frozenset[str] = frozenset(),
              ) -> tuple[dict[str, Any], list[str]]:
    """The feeder's ``meta`` reduced to :data:`ALLOWED_META` (with values of their types) and
    the project's ``own`` keys, and the keys dropped."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in meta.items():
        types = ALLOWED_META.get(key)
        if key in own or (types is not None and isinstance(value, types)):
            kept[key] = value
        else:
            dropped.append(key)
    return kept, dropped


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
        self.own_meta = project_meta_keys(get_list(settings, "WEBCRAWL_FEED_META_KEYS"))
        if self.batch < 1 or self.period <= 0 or (self.idle_wait is not None and self.idle_wait < 0):
            raise ValueError(
                f"REDIS_START_URLS_BATCH_SIZE={self.batch!r}, WEBCRAWL_FEED_SECONDS="
                f"{self.period!r}, MAX_IDLE_TIME_BEFORE_CLOSE={wait!r}: expected a batch of at "
                "least 1, seconds > 0 and an idle time >= 0")
        self._feed: StartUrlsFeed | None = None
        self._idle_since: float | None = None
        self._warned = False
        self._warned_meta = False
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
            meta, dropped = safe_meta(entry.meta, self.own_meta)
            if dropped:
                self._meta_dropped(dropped)
            request = self.make_request(FeedEntry(entry.url, entry.method, meta, entry.formdata))
            engine.crawl(request)
            self._inc("requests")
            scheduled += 1
        if scheduled:
            self._idle_since = time.monotonic()
        return scheduled

    def _meta_dropped(self, keys: list[str]) -> None:
        self._inc("meta_dropped", len(keys))
        if not self._warned_meta:
            self._warned_meta = True
            logger.warning(
                "Dropped the meta key %r of a URL pushed to %r: pushed URLs may set only %s and "
                "the project's own keys listed in WEBCRAWL_FEED_META_KEYS, with values of their "
                "types (counted in webcrawl/feed/meta_dropped)", keys[0], self.key,
                ", ".join(ALLOWED_META))

    def _inc(self, name: str, count: int = 1) -> None:
        stats = self.crawler.stats
        assert stats is not None
        stats.inc_value(STATS + name, count)
