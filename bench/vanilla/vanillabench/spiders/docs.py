"""``docs``: a CrawlSpider that follows every link of its seeds' hosts under one path prefix.

    scrapy crawl docs -a seeds=http://127.0.0.21:8080/ -a prefix=/

A Scrapy user's first crawler of a documentation site: one ``Rule`` with a ``LinkExtractor``
restricted to the seeds' host (port included) and path prefix, and a small record per page
(its first heading and its section headings).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class DocsSpider(CrawlSpider):
    name = "docs"

    def __init__(self, seeds: str = "", prefix: str = "/", *args: Any, **kwargs: Any) -> None:
        self.start_urls = [s for s in seeds.split(",") if s]
        if not self.start_urls:
            raise ValueError("the docs spider needs -a seeds=URL[,URL...]")
        if not prefix.startswith("/"):
            raise ValueError(f"prefix must start with /, got {prefix!r}")
        origins = sorted({f"{p.scheme}://{p.netloc}" for p in map(urlsplit, self.start_urls)})
        self.allowed_domains = sorted({urlsplit(s).hostname or "" for s in self.start_urls})
        allow = [re.escape(origin + prefix) for origin in origins]
        self.rules = (Rule(LinkExtractor(allow=[f"^{a}" for a in allow]), callback="parse_page",
                           follow=True),)
        super().__init__(*args, **kwargs)  # compiles self.rules

    def parse_start_url(self, response: Response, **kwargs: Any) -> Iterator[dict[str, Any]]:
        return self.parse_page(response)

    def parse_page(self, response: Response) -> Iterator[dict[str, Any]]:
        if not hasattr(response, "css"):
            return
        yield {
            "url": response.url,
            "title": " ".join(response.css("h1 ::text").getall()).strip(),
            "sections": [" ".join(h.css("::text").getall()).strip() for h in response.css("h2")],
        }
