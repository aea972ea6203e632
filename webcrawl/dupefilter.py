"""BloomDupeFilter: the shared seen-URL filter as a Scrapy ``DUPEFILTER_CLASS``.

For projects that keep another scheduler (Scrapy's own, with ``JOBDIR``, say) but want webcrawl's
shared filter: the crawl's bloom filter slices in Redis (one per shard, by host), canonical URLs
(w3lib), a local cache of URLs known seen, ``dont_filter`` honoured by the scheduler as usual. Each
URL not in the local cache costs one blocking round trip; webcrawl's own scheduler batches them
instead. Like the scheduler, it records the filter's size when the crawl's first user opens it and
refuses to use a filter sized otherwise (``WEBCRAWL_BLOOM_CAPACITY`` / ``WEBCRAWL_BLOOM_ERROR_RATE``
/ ``WEBCRAWL_SHARDS`` changed).

Every URL it finds new is counted in its slice (the count the scheduler's pushes keep too), and a
slice past its capacity grows another generation (:mod:`webcrawl.state.seen`). Stats, as the
scheduler's: ``dupefilter/seen/over_capacity`` (URLs past a slice's capacity, the largest over
the slices this process used) and ``dupefilter/seen/generations`` (the most generations any of
them has); a warning is logged each time a slice is seen with more generations than before.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.httpobj import urlparse_cached
from w3lib.url import canonicalize_url

from webcrawl.runtime import CrawlRuntime
from webcrawl.state.seen import SeenFilter

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from typing_extensions import Self

    from webcrawl.state.layout import CrawlLayout

logger = logging.getLogger(__name__)


class BloomDupeFilter(BaseDupeFilter):
    """Request filter over the crawl's :class:`~webcrawl.state.seen.SeenFilter` slices."""

    def __init__(self, filters: list[SeenFilter], layout: CrawlLayout, *,
                 stats: StatsCollector | None = None, cache_size: int = 500_000,
                 debug: bool = False) -> None:
        self.filters = filters
        self.layout = layout
        self.stats = stats
        self.cache_size = cache_size
        self.debug = debug
        self._known: set[int] = set()
        self._logged = False
        self._over = 0
        self._generations = 1

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        runtime = CrawlRuntime.of(crawler)
        # As the scheduler does: a filter sized otherwise would take every URL for a new one.
        runtime.queue.check_seen_filter(runtime.bloom)
        filters = [SeenFilter(runtime.client, shard.seen, runtime.bloom, shard.seen_meta)
                   for shard in runtime.layout.all_shards]
        return cls(filters, runtime.layout, stats=crawler.stats,
                   cache_size=runtime.config.seen_cache_size,
                   debug=crawler.settings.getbool("DUPEFILTER_DEBUG"))

    def request_seen(self, request: Request) -> bool:
        canonical = canonicalize_url(request.url)
        key = hash(canonical)
        if key in self._known:
            return True
        if len(self._known) >= self.cache_size:
            self._known.clear()
        self._known.add(key)
        host = urlparse_cached(request).hostname or "-"
        seen_filter = self.filters[self.layout.shard_index(host)]
        seen = seen_filter.test_and_set(canonical)
        if not seen:
            self._counted(seen_filter)
        return seen

    def _counted(self, seen_filter: SeenFilter) -> None:
        """A new URL went into ``seen_filter``: its slice's count and generations are news."""
        capacity = seen_filter.params.capacity
        over = seen_filter.count - capacity
        if over > self._over:
            self._over = over
            if self.stats is not None:
                self.stats.set_value("dupefilter/seen/over_capacity", over)
        if seen_filter.generations > self._generations:
            self._generations = seen_filter.generations
            if self.stats is not None:
                self.stats.set_value("dupefilter/seen/generations", self._generations)
            logger.warning(
                "The seen-URL filter of crawl %r passed its capacity in a shard (%d URLs, sized "
                "for %d each generation) and grew to %d generations: a new URL is now taken for a "
                "seen one with a chance of up to %.1f%%. See 'Growing the seen filter' in "
                "docs/scheduler.md", self.layout.crawl, seen_filter.count, capacity,
                self._generations,
                100 * seen_filter.params.false_positive_rate(self._generations))

    def log(self, request: Request, spider: object) -> None:
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request})
        elif not self._logged:
            logger.debug("Filtered duplicate request: %(request)s - no more duplicates will be "
                         "shown (see DUPEFILTER_DEBUG to show all duplicates)", {"request": request})
            self._logged = True
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")
