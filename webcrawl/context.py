"""What every webcrawl component of a crawler shares: the validated state settings, the one
Redis client, and the crawl's key names.

    context = crawl_context(crawler)   # in a component's from_crawler
    context.client.hget(context.keys.delay, host)

The first call validates the settings and connects (or starts the embedded redis-server); later
calls for the same crawler return the same object.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from webcrawl.config import StateConfig
from webcrawl.state.connection import redis_for
from webcrawl.state.keys import CrawlKeys

if TYPE_CHECKING:
    import redis
    from scrapy.crawler import Crawler


@dataclass(frozen=True)
class CrawlContext:
    config: StateConfig
    client: redis.Redis
    keys: CrawlKeys


_contexts: weakref.WeakKeyDictionary[Crawler, CrawlContext] = weakref.WeakKeyDictionary()


def crawl_context(crawler: Crawler) -> CrawlContext:
    """The crawler's shared context; the crawl is named after its spider unless
    ``WEBCRAWL_CRAWL_NAME`` says otherwise (so the spider must exist: call it from
    ``from_crawler`` of a component built after the spider, or later)."""
    context = _contexts.get(crawler)
    if context is None:
        name = crawler.spider.name if crawler.spider is not None else crawler.settings["BOT_NAME"]
        config = StateConfig.from_settings(crawler.settings, name)
        client = redis_for(crawler, config.redis_url, config.data_dir,
                           shutdown_embedded=config.shutdown_embedded)
        context = CrawlContext(config, client, CrawlKeys(config.crawl_name))
        _contexts[crawler] = context
    return context
