"""BloomDupeFilter: the shared seen-URL filter as a Scrapy ``DUPEFILTER_CLASS``.

For projects that keep another scheduler (Scrapy's own, with ``JOBDIR``, say) but want webcrawl's
shared filter: one bloom filter per crawl in a Redis bitmap, canonical URLs (w3lib), a local cache
of URLs known seen, ``dont_filter`` honoured by the scheduler as usual. Each URL not in the local
cache costs one blocking round trip; webcrawl's own scheduler batches them instead.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.dupefilters import BaseDupeFilter
from w3lib.url import canonicalize_url

from webcrawl.context import crawl_context
from webcrawl.state.seen import BloomParams, SeenFilter

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from typing_extensions import Self

logger = logging.getLogger(__name__)


class BloomDupeFilter(BaseDupeFilter):
    """Request filter over a :class:`~webcrawl.state.seen.SeenFilter`."""

    def __init__(self, seen: SeenFilter, *, stats: StatsCollector | None = None,
                 cache_size: int = 500_000, debug: bool = False) -> None:
        self.seen = seen
        self.stats = stats
        self.cache_size = cache_size
        self.debug = debug
        self._known: set[int] = set()
        self._logged = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        context = crawl_context(crawler)
        config = context.config
        seen = SeenFilter(context.client, context.keys.seen,
                          BloomParams(config.bloom_capacity, config.bloom_error_rate))
        return cls(seen, stats=crawler.stats, cache_size=config.seen_cache_size,
                   debug=crawler.settings.getbool("DUPEFILTER_DEBUG"))

    def request_seen(self, request: Request) -> bool:
        canonical = canonicalize_url(request.url)
        key = hash(canonical)
        if key in self._known:
            return True
        if len(self._known) >= self.cache_size:
            self._known.clear()
        self._known.add(key)
        return self.seen.test_and_set(canonical)

    def log(self, request: Request, spider: object) -> None:
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request})
        elif not self._logged:
            logger.debug("Filtered duplicate request: %(request)s - no more duplicates will be "
                         "shown (see DUPEFILTER_DEBUG to show all duplicates)", {"request": request})
            self._logged = True
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")
