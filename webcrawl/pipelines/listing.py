"""Listing pages as change detectors (revisit-model.md section 6): one fetch of a category page
tells, item by item, which listed pages changed.

For each :class:`~webcrawl.items.ListingItem` the summary (the listing rule's fields) is hashed
(:func:`webcrawl.change.record_hash`) and compared, in the item's host's shard, with the hash kept
from the last listing (land operation "L", sent with the turn's write batch):

- first listing: kept, nothing else (the item's own first fetch is discovery's business);
- changed: kept, and the item, if it is a known page whose known changes the allocator follows
  (its record's ``follow`` flag: where a fetch right after a change is worth its cost), becomes
  due at once (its revisit is moved to now): its fetch observes the change. Not when the item
  was fetched since the previous listing and found changed then (the change was seen already:
  ``seen``);
- unchanged: nothing. A listing's "unchanged" is no fetch of the item (its other fields may have
  moved): it neither prices the item nor counts as an observation of it.

The item passes on. Put the pipeline after the record-hash pipeline.

Stats: ``webcrawl/listing/items``, ``webcrawl/listing/{first,changed,unchanged,seen}``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.exceptions import NotConfigured

from webcrawl.change import record_hash
from webcrawl.items import ListingItem
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.pagestore import listing_op

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

__all__ = ["ListingPipeline"]

STATS = "webcrawl/listing/"


class ListingPipeline:
    """Compare listed summaries with the kept ones; see the module docstring."""

    def __init__(self, runtime: CrawlRuntime, stats: StatsCollector) -> None:
        self.runtime = runtime
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not crawler.settings.getbool("WEBCRAWL_LISTING_ENABLED", True):
            raise NotConfigured("listing signals are off: set WEBCRAWL_LISTING_ENABLED = True")
        assert crawler.stats is not None
        return cls(CrawlRuntime.of(crawler), crawler.stats)

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, ListingItem):
            return item
        self.stats.inc_value(STATS + "items")
        host = (urlsplit(item.item_url).hostname or "").lower()

        def answered(reply: list[Any]) -> None:
            status = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
            self.stats.inc_value(STATS + status)

        self.runtime.batch.land(host, listing_op(item.item_url, record_hash(item.summary),
                                                 item.fetch_time), answered)
        return item
