"""The event feed pipeline, placed last: what reaches feed exports is change events, nothing else.

For a :class:`~webcrawl.items.PageItem` whose observation recorded a change event (the
record-hash pipeline set ``item.event``), it returns that event as a
:class:`~webcrawl.items.ChangeEvent`: the same object ``scrapy events`` reads back from the crawl
state, field for field (docs/events.md), so ``scrapy crawl <site> -O events.jsonl`` gets every
event of the run, each once. Every other item (unchanged records, hubs, a first 404 awaiting its
confirmation, extraction errors, listing summaries) is dropped, logged at DEBUG.

The crawl state is the durable record: a feed file cut short by a kill -9 (or a remote feed
storage that uploads only when the crawl closes) is completed with ``scrapy events --since``.

Stats: ``webcrawl/records/dropped_unchanged`` (observations that made no event).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import DropItem

from webcrawl.items import ChangeEvent, ListingItem, PageItem

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

__all__ = ["EventFeedPipeline"]


class EventFeedPipeline:
    """Hand on each recorded change event; drop everything else (module docstring)."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        assert crawler.stats is not None
        return cls(crawler.stats)

    def process_item(self, item: Any) -> Any:
        if isinstance(item, PageItem):
            if item.event is not None:
                return ChangeEvent(item.event, item.change)
            self.stats.inc_value("webcrawl/records/dropped_unchanged")
            raise DropItem(f"no change event ({item.change})", log_level="DEBUG")
        if isinstance(item, ListingItem):
            raise DropItem("listing summary (a change detector, not output)", log_level="DEBUG")
        return item
