"""BloomDupeFilter: the shared seen-URL filter as a Scrapy ``DUPEFILTER_CLASS``.

For projects that keep another scheduler (Scrapy's own, with ``JOBDIR``, say) but want webcrawl's
shared filter: the crawl's bloom filter slices in Redis (one per shard, by host), canonical URLs
(w3lib), a local cache of URLs known seen, ``dont_filter`` honoured by the scheduler as usual. Each
URL not in the local cache costs one blocking round trip; webcrawl's own scheduler batches them
instead. Like the scheduler, it opens the crawl's filter (the crawl's first user records its sizes,
``WEBCRAWL_BLOOM_CAPACITY`` / ``WEBCRAWL_BLOOM_ERROR_RATE``) and uses the sizes it records.

Every URL it finds new is counted in its slice (the count the scheduler's pushes keep too), and a
full generation is followed by a larger one (:mod:`webcrawl.state.seen`). Stats:
``dupefilter/seen/false_positive_rate`` (as the scheduler's: the chance a new URL is taken for a
seen one at the fill of the fullest slice this process used) and ``dupefilter/seen/generations``
(the most generations any of them has). A warning is logged once if that chance passes
``WEBCRAWL_BLOOM_ERROR_RATE`` (a slice of the layout before past its capacity, or one that
reached Redis's string limit).
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
        self._count = -1
        self._generations = 1
        self._warned = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        runtime = CrawlRuntime.of(crawler)
        # As the scheduler does: the sizes the crawl's filter records win over the settings.
        runtime.bloom = runtime.queue.check_seen_filter(runtime.bloom)
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
        """A new URL went into ``seen_filter``: its slice's fill and generations are news."""
        params = seen_filter.params
        if seen_filter.count > self._count:
            self._count = seen_filter.count
            rate = params.false_positive_rate_at(seen_filter.count)
            if self.stats is not None:
                self.stats.set_value("dupefilter/seen/false_positive_rate", round(rate, 6))
            if rate > params.error_rate and not self._warned:
                self._warned = True
                logger.warning(
                    "The seen-URL filter of crawl %r holds %d URLs in a shard and takes a new URL "
                    "for a seen one with a chance of %.2f%%, past WEBCRAWL_BLOOM_ERROR_RATE (%g%%): "
                    "see 'Growing the seen filter' in docs/scheduler.md", self.layout.crawl,
                    seen_filter.count, 100 * rate, 100 * params.error_rate)
        if seen_filter.generations > self._generations:
            self._generations = seen_filter.generations
            if self.stats is not None:
                self.stats.set_value("dupefilter/seen/generations", self._generations)
            logger.debug("The seen-URL filter of crawl %r grew to %d generations in a shard (%d "
                         "URLs)", self.layout.crawl, self._generations, seen_filter.count)

    def log(self, request: Request, spider: object) -> None:
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request})
        elif not self._logged:
            logger.debug("Filtered duplicate request: %(request)s - no more duplicates will be "
                         "shown (see DUPEFILTER_DEBUG to show all duplicates)", {"request": request})
            self._logged = True
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")
