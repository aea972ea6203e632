"""``fetch``: fetches every URL of a list and parses nothing: what Scrapy alone costs a request.

    scrapy crawl fetch -a urls=/path/to/urls.txt

One URL a line. Each response is dropped unread: no selector, no link, no item. Its CPU per page
is the floor under any Scrapy crawler with the same settings: the engine, the scheduler, the
downloader and its middlewares, the HTTP client and the spider's callback chain.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from scrapy import Request, Spider
from scrapy.http import Response


class FetchSpider(Spider):
    name = "fetch"

    def __init__(self, urls: str = "", *args: Any, **kwargs: Any) -> None:
        if not urls:
            raise ValueError("the fetch spider needs -a urls=FILE (one URL a line)")
        self.url_file = Path(urls)
        super().__init__(*args, **kwargs)

    async def start(self) -> AsyncIterator[Request]:
        with self.url_file.open(encoding="utf-8") as lines:
            for line in lines:
                if url := line.strip():
                    yield Request(url, dont_filter=True)

    def parse(self, response: Response, **kwargs: Any) -> None:
        return None
