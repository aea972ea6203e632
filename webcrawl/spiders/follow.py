"""``follow``: a plain spider that follows every link within its seeds' hosts.

For smoke tests, the scheduler tests and the scheduler benchmark, where the same spider must run
under every scheduler; sites are crawled with their site files (``scrapy crawl <site>``).

    scrapy crawl follow -a seeds=http://127.0.0.2:8000/,http://127.0.0.3:8000/
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response


class FollowSpider(scrapy.Spider):
    name = "follow"

    def __init__(self, seeds: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seeds = [s for s in seeds.split(",") if s]
        if not self.seeds:
            raise ValueError("the follow spider needs -a seeds=URL[,URL...]")
        self.allowed_domains = sorted({urlsplit(s).hostname or "" for s in self.seeds})

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in self.seeds:
            yield scrapy.Request(url)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[scrapy.Request]:
        if not hasattr(response, "css"):
            return
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)
