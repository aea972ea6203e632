"""Per-host delays for the round-robin baseline: robots.txt ``Crawl-delay`` and ``Retry-After``.

Scrapy spaces requests per download slot (one per host here) by the slot's delay. This
downloader middleware raises a host's delay to its robots.txt Crawl-delay as soon as the file is
parsed (before the request that asked for it goes on), and to the Retry-After of a 429 answer
until the host answers something else. ``margin`` is added to every delay: the crawler spaces
sends, the server measures arrivals, and loopback jitter must not turn one into a short gap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import signals

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

__all__ = ["HostDelays"]


class HostDelays:
    def __init__(self, crawler: Crawler, default: float, margin: float, user_agent: str) -> None:
        self.crawler, self.default, self.margin, self.user_agent = crawler, default, margin, user_agent
        self.base: dict[str, float] = {}
        self.raised: dict[str, float] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        s = crawler.settings
        mw = cls(crawler, s.getfloat("DOWNLOAD_DELAY"), s.getfloat("LIVEWEB_DELAY_MARGIN_SECONDS", 0.05),
                 s.get("USER_AGENT", ""))
        crawler.signals.connect(mw.robots_parsed, signal=signals.robots_parsed)
        return mw

    def robots_parsed(self, robotparser: Any, request: Request) -> None:
        host = urlsplit(request.url).hostname or ""
        delay = robotparser.crawl_delay(self.user_agent)
        if delay:
            self.base[host] = max(self.default, float(delay) + self.margin)
            self._apply(host)
        protego = getattr(robotparser, "rp", None)  # Scrapy's default parser keeps Protego here
        spider = self.crawler.spider
        if protego is not None and hasattr(spider, "robots_sitemaps"):
            spider.robots_sitemaps(list(protego.sitemaps))

    def process_response(self, request: Request, response: Response) -> Response:
        host = urlsplit(request.url).hostname or ""
        if response.status == 429:
            try:
                wait = float(response.headers.get(b"Retry-After", b"1").decode())
            except ValueError:
                wait = 1.0
            self.raised[host] = max(self.base.get(host, self.default), wait + self.margin)
            self._apply(host)
        elif host in self.raised:
            del self.raised[host]
            self._apply(host)
        return response

    def _apply(self, host: str) -> None:
        delay = self.raised.get(host, self.base.get(host, self.default))
        downloader = self.crawler.engine.downloader
        downloader.per_slot_settings[host] = {"delay": delay, "jitter": 0.0}  # slots made later
        slot = downloader.slots.get(host)
        if slot is not None:
            slot.delay = delay
