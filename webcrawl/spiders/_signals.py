"""What a site spider tells the crawl state about sitemaps: each reading (recorded like a page's
fetch, so the sitemap gets a schedule and a cost) and each date it gives a page (land operation
"M"). Both join the turn's write batch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webcrawl import meta as M
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.pagestore import EventArgs, lastmod_op, observe_op

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from webcrawl.sites import SiteConfig

__all__ = ["SitemapSignals"]


class SitemapSignals:
    def __init__(self, crawler: Crawler, site: SiteConfig) -> None:
        self.crawler = crawler
        self.site = site

    @property
    def runtime(self) -> CrawlRuntime:
        return CrawlRuntime.of(self.crawler)

    def now(self) -> float:
        return self.runtime.clock.time()

    def lastmod(self, url: str, host: str, lastmod: float, read_at: float) -> None:
        mode = self.site.trust.for_host(host).sitemaps
        self.runtime.batch.land(host, lastmod_op(url, lastmod, read_at, mode))

    def sitemap_read(self, url: str, host: str, response: Response, digest: str,
                     shown: tuple[str, ...] = ()) -> None:
        """A sitemap's reading, landed like a page's fetch (its entries' hash as its record);
        ``shown``: the typed pages it lists, kept for its next reading's rechecks."""
        billed: Any = response.meta.get(M.BILLED)
        self.runtime.batch.land(host, observe_op(
            url, full=True, time=self.now(), record_hash=digest, sitemap=True,
            billed=float(billed) if billed is not None else None, event=EventArgs(links=shown)))
