"""Spider middleware closest to the engine: start requests reach the scheduler as they come.

Scrapy's engine takes one start request per turn of its event loop while the downloader has room
(its lazy start: a spider's start requests do not pile up in memory ahead of its downloads). The
crawl's frontier is in Redis, where a waiting request costs the process nothing, while the lazy
start makes a crawl of many seeded hosts begin them only as fast as the loop turns. A busy loop
turns a few dozen times a second: 500 seeded hosts at a 1 s delay took 10 s to all begin, and
each host's last page came that much later.

Contract: every request out of ``start()`` (after every other spider middleware) is handed to
``engine.crawl``, which schedules it exactly as the engine's own start loop does, in the order
the spider gave; items, and each :data:`CHUNK`-th request, go the engine's way (one loop turn
each), so a start of millions of requests still lets the crawl run while it is read. Once the
engine stops, what remains goes its way too (it reads no more).

Place it at 10 in ``SPIDER_MIDDLEWARES``: before Scrapy's start middleware (25) and the
priority middleware (40), so the requests it hands on carry what they set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["CHUNK", "StartFeedMiddleware"]

#: Start requests handed to the engine between two that wait for a turn of its loop.
CHUNK = 1000


class StartFeedMiddleware:
    """See the module docstring."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StartFeedMiddleware:
        return cls(crawler)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        count = 0
        async for item in start:
            if isinstance(item, Request):
                count += 1
                engine = self.crawler.engine
                if (count % CHUNK and engine is not None and engine.running
                        and engine.spider is not None):
                    engine.crawl(item)
                    continue
            yield item
