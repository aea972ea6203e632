"""``follow``: a plain spider that follows every link within its seeds' hosts.

For smoke tests, the scheduler tests and the scheduler benchmark, where the same spider must run
under every scheduler; sites are crawled with their site files (``scrapy crawl <site>``). A
request the SSRF guard or robots.txt refused is noted for another try, as a site spider's is
(:mod:`webcrawl.spiders._refusals`). URLs pushed to the crawl's Redis under
``follow:start_urls`` are crawled too (scrapy-redis style, :mod:`webcrawl.spiders._feed`).

    scrapy crawl follow -a seeds=http://127.0.0.2:8000/,http://127.0.0.3:8000/
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response
from twisted.python.failure import Failure

from webcrawl.spiders._feed import Feed
from webcrawl.spiders._refusals import Refusals
from webcrawl.state.feed import FeedEntry

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler


class FollowSpider(scrapy.Spider):
    name = "follow"

    def __init__(self, seeds: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seeds = [s for s in seeds.split(",") if s]
        if not self.seeds:
            raise ValueError("the follow spider needs -a seeds=URL[,URL...]")
        self.allowed_domains = sorted({urlsplit(s).hostname or "" for s in self.seeds})
        self._refusals: Refusals | None = None
        self._feed: Feed | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        if (settings.getbool("WEBCRAWL_FEED_ENABLED", True)
                and settings.get("SCHEDULER", "").endswith("ReadyQueueScheduler")):
            spider._feed = Feed(crawler, spider, spider.feed_request)
        return spider

    def feed_request(self, entry: FeedEntry) -> scrapy.Request:
        """The request of a URL pushed to the crawl: crawled even if met before."""
        if entry.method != "GET" or entry.formdata:
            return scrapy.FormRequest(entry.url, method=entry.method,
                                      formdata=entry.formdata or None, meta=entry.meta,
                                      errback=self.request_failed, dont_filter=True)
        return scrapy.Request(entry.url, meta=entry.meta, errback=self.request_failed,
                              dont_filter=True)

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in self.seeds:
            yield scrapy.Request(url, errback=self.request_failed)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[scrapy.Request]:
        if not hasattr(response, "css"):
            return
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, errback=self.request_failed)

    def request_failed(self, failure: Failure) -> Failure:
        """Errback: a refusal is noted for another try; the failure goes on unchanged."""
        crawler = getattr(self, "crawler", None)
        if crawler is None:
            return failure
        if self._refusals is None:
            self._refusals = Refusals(crawler)
        return self._refusals.failed(failure)
