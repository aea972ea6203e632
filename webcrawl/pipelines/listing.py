"""Listing pages as change detectors (revisit-model.md section 6): one fetch of a category page
tells, item by item, which listed pages changed.

For each :class:`~webcrawl.items.ListingItem` the summary (the listing rule's fields) is hashed
(:func:`webcrawl.change.record_hash`) and compared with the hash stored when the item was last
listed (``{c}:listing:summaries``: item URL -> ``<hash> <time the summary last changed> <time listed>``):

- first listing: stored, nothing else (the item's own fetch, if any, is discovery's business);
- changed: stored, and the item is scheduled soon: a request at the top of the known-pages
  priority band with ``webcrawl_purpose = "revisit"`` and ``webcrawl_trigger = "listing"``
  (``dont_filter``: the page is known). Its fetch observes the change in the page history. Not
  when the item was fetched since the previous listing and found changed (it was seen already);
- unchanged: an observation "unchanged" is recorded in the item's page history (the stored record
  hash again, so the interval since the last observation counts as unchanged) at the listing's
  share of the cost (the listing page's mean cost per fetch, in the site's unit, divided by the
  number of items it listed last time), added to the page's ``billed``. Not when the item has not
  been fetched since its summary last changed: that change is still to be seen.

The item passes on unchanged. Put the pipeline after the record-hash pipeline.

Stats: ``webcrawl/listing/items``, ``webcrawl/listing/{first,changed,unchanged}``,
``webcrawl/listing/scheduled``, ``webcrawl/listing/seen`` (changed, but fetched since), ``webcrawl/listing/observed`` (unchanged observations recorded),
``webcrawl/listing/pending`` (unchanged, but a visit after a change is still due).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import NotConfigured

from webcrawl.change import record_hash
from webcrawl.items import ListingItem
from webcrawl.middlewares.conditional import change_context
from webcrawl.state.costs import cost_context
from webcrawl.state.pages import PageIndex

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    import redis
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from webcrawl.state.history import HistoryStore
    from webcrawl.state.keys import CrawlKeys

logger = logging.getLogger(__name__)

__all__ = ["ListingPipeline"]

STATS = "webcrawl/listing/"
TOP_OF_KNOWN_BAND = 12_000  # above every scored known page (band 10,000 +- 2,001)
# Store "<hash> <summary changed at> <listed at>" for the item; answer the previous value.
_SWAP = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
local changed_at = '0'  -- first listing: no change known
if old then
  changed_at = ARGV[3]
  local h, t = string.match(old, '^(%S+) (%S+)')
  if h == ARGV[2] then changed_at = t end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. changed_at .. ' ' .. ARGV[3])
return old and {old} or {}
"""


class ListingPipeline:
    """Compare listed summaries with the stored ones; see the module docstring."""

    def __init__(self, client: redis.Redis, keys: CrawlKeys, history: HistoryStore, stats: StatsCollector,
                 *, crawl: Callable[[Request], Any] | None = None, site: Any = None,
                 default_items: int = 20, canonical: Callable[[str], str | None] | None = None,
                 index: PageIndex | None = None) -> None:
        self.client = client
        self.keys = keys
        self.history = history
        self.stats = stats
        self.crawl = crawl
        self.site = site
        self.default_items = default_items
        self.canonical = canonical or (lambda url: url)
        self.index = index
        self._swap = client.register_script(_SWAP)
        self._listings: dict[str, tuple[float, int, float]] = {}  # url -> (fetch time, items, share)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not crawler.settings.getbool("WEBCRAWL_LISTING_ENABLED", True):
            raise NotConfigured("listing signals are off: set WEBCRAWL_LISTING_ENABLED = True")
        change = change_context(crawler)
        context = cost_context(crawler)
        assert crawler.stats is not None

        def crawl(request: Request) -> None:
            assert crawler.engine is not None
            crawler.engine.crawl(request)

        return cls(context.costs.client, context.costs.keys, change.history, crawler.stats,
                   crawl=crawl, site=context.site,
                   default_items=crawler.settings.getint("WEBCRAWL_LISTING_DEFAULT_ITEMS", 20),
                   canonical=change.canonicalizer.canonical,
                   index=PageIndex(context.costs.client, context.costs.keys))

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, ListingItem):
            return item
        self.stats.inc_value(STATS + "items")
        share = self._share(item)
        new = record_hash(item.summary)
        found = self._swap(keys=[self.keys.listing_summaries],
                           args=[item.item_url, new, repr(float(item.fetch_time))])
        if not found:
            self.stats.inc_value(STATS + "first")
            return item
        old_hash, changed_at, listed_at = (found[0].decode().split(" ") + ["0", "0"])[:3]
        if old_hash != new:
            self.stats.inc_value(STATS + "changed")
            record = self.history.get(item.item_url)
            if record is not None and record.last_changed and record.last_fetched >= float(listed_at):
                self.stats.inc_value(STATS + "seen")  # fetched since the old listing: change seen
            else:
                self._schedule(item)
            return item
        self.stats.inc_value(STATS + "unchanged")
        self._observe_unchanged(item, float(changed_at or 0), share)
        return item

    def _share(self, item: ListingItem) -> float:
        """The listing's cost per item; counts the items of this fetch for the next one."""
        seen = self._listings.get(item.url)
        if seen is not None and seen[0] == item.fetch_time:
            self._listings[item.url] = (seen[0], seen[1] + 1, seen[2])
            self.client.hset(self.keys.listing_items, item.url, seen[1] + 1)
            return seen[2]
        billed, fetches = self.client.hmget(self.keys.page(self.canonical(item.url) or item.url), "billed", "fetches")
        count = self.client.hget(self.keys.listing_items, item.url)
        per_fetch = float(billed or 0) / max(int(fetches or 0), 1)
        share = per_fetch / max(int(count or 0) or self.default_items, 1)
        self._listings[item.url] = (item.fetch_time, 1, share)
        self.client.hset(self.keys.listing_items, item.url, 1)
        return share

    def _schedule(self, item: ListingItem) -> None:
        if self.crawl is None:
            return
        page_type = self.site.page_type_for(item.item_url) if self.site is not None else None
        self.crawl(Request(item.item_url, dont_filter=True, priority=TOP_OF_KNOWN_BAND, meta={
            "webcrawl_purpose": "revisit", "webcrawl_trigger": "listing",
            "webcrawl_page_type": page_type.name if page_type is not None else None,
            "webcrawl_canonical_url": item.item_url}))
        self.stats.inc_value(STATS + "scheduled")

    def _observe_unchanged(self, item: ListingItem, changed_at: float, share: float) -> None:
        record = self.history.get(item.item_url)
        if record is None or record.hash is None:
            return
        if record.last_fetched < changed_at:
            self.stats.inc_value(STATS + "pending")
            return
        if item.fetch_time <= record.last_fetched:
            return  # the page itself was seen since: nothing new
        self.history.observe(item.item_url, now=item.fetch_time, record_hash=record.hash, cost=0.0,
                             status=record.status or 200)
        if share > 0:
            self.client.hincrbyfloat(self.keys.page(item.item_url), "billed", share)
        if self.index is not None:
            self.index.mark([item.item_url], item.fetch_time)
        self.stats.inc_value(STATS + "observed")
