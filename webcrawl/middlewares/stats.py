"""Scrapy's downloader stats, with the request's size summed from its parts.

Scrapy's ``DownloaderStats`` builds each request's whole HTTP text to take its length
(``downloader/request_bytes``); :func:`webcrawl.wire.request_wire_bytes` gives the same number
from the lengths. Every stat, its name and ``DOWNLOADER_STATS`` are Scrapy's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.stats import DownloaderStats as ScrapyDownloaderStats

from webcrawl.wire import request_wire_bytes

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response


class DownloaderStats(ScrapyDownloaderStats):
    def process_request(self, request: Request) -> Request | Response | None:  # type: ignore[override]
        stats = self.stats
        stats.inc_value("downloader/request_count")
        stats.inc_value(f"downloader/request_method_count/{request.method}")
        stats.inc_value("downloader/request_bytes", request_wire_bytes(request))
        return None
