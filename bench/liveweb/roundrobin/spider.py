"""The round-robin baseline: discover, then revisit every known URL in turn, at the budget rate.

    scrapy crawl roundrobin -a seeds=URL,URL -a sitemaps=URL,URL -a budget=10

(with ``SCRAPY_SETTINGS_MODULE=bench.liveweb.roundrobin.settings``). It starts from the seeds
and sitemaps, adds the sitemaps robots.txt announces, follows links within the seeds' hosts and
sitemap entries, and keeps every URL it learned (pages, listings, sitemaps) in a per-host cycle
(:class:`~bench.liveweb.roundrobin.rotation.Rotation`). One request leaves per token of a bucket
filled at ``budget`` per second; failures (429, 5xx, errors, robots.txt refusals) give their
token back, so the spend rate is the budget rate whenever a host can take a request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.sitemap import Sitemap
from twisted.python.failure import Failure

from bench.liveweb.roundrobin.rotation import Rotation, TokenBucket

__all__ = ["RoundRobinSpider"]


def _split(text: str) -> list[str]:
    return [u.strip() for u in text.split(",") if u.strip()]


class RoundRobinSpider(scrapy.Spider):
    name = "roundrobin"

    def __init__(self, seeds: str = "", sitemaps: str = "", budget: str = "10",
                 max_pending: str = "2", *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seeds, self.sitemaps = _split(seeds), set(_split(sitemaps))
        if not self.seeds and not self.sitemaps:
            raise ValueError("give seeds=URL,... or sitemaps=URL,...")
        self.hosts = {urlsplit(u).hostname for u in [*self.seeds, *self.sitemaps]}
        self.rate = float(budget)
        self.rotation = Rotation(int(max_pending))
        self.links = LinkExtractor(allow_domains=sorted(h for h in self.hosts if h))

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in [*self.seeds, *sorted(self.sitemaps)]:
            self.rotation.add(url)
        bucket = TokenBucket(self.rate, self.rate * 0.5, time.monotonic())
        self.bucket = bucket
        while True:
            url = self.rotation.next() if bucket.ready(time.monotonic()) else None
            if url is None:
                await asyncio.sleep(0.01)
                continue
            bucket.take()
            yield scrapy.Request(url, callback=self.parse, errback=self.failed, dont_filter=True)

    def robots_sitemaps(self, urls: list[str]) -> None:
        """Sitemaps announced by a robots.txt (called by the HostDelays middleware)."""
        for url in urls:
            if urlsplit(url).hostname in self.hosts:
                self.sitemaps.add(url)
                self.rotation.add(url)

    def parse(self, response: Response) -> None:
        self.rotation.done(response.request.url if response.request else response.url)
        if response.url in self.sitemaps or b"<urlset" in response.body[:512] \
                or b"<sitemapindex" in response.body[:512]:
            self._read_sitemap(response)
            return
        for link in self.links.extract_links(response):
            self.rotation.add(link.url)

    def _read_sitemap(self, response: Response) -> None:
        try:
            sitemap = Sitemap(response.body)
        except Exception:  # not XML after all
            return
        for entry in sitemap:
            loc = entry.get("loc")
            if not loc or urlsplit(loc).hostname not in self.hosts:
                continue
            if sitemap.type == "sitemapindex":
                self.sitemaps.add(loc)
            self.rotation.add(loc)

    def failed(self, failure: Failure) -> None:
        request = failure.request if hasattr(failure, "request") else None
        if request is not None:
            self.rotation.done(request.url)
        if isinstance(failure.value, HttpError):
            status = failure.value.response.status
            if status != 429 and status < 500:
                return  # answered (a 404): the credit is spent
        self.bucket.refund()  # failures are free
