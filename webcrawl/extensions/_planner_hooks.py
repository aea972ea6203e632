"""Signal hooks that keep the planner's page index in step with the page histories, and feed the
sitemap ``lastmod`` signal.

- ``response_downloaded``: the page's history is about to change (a 304 is recorded by the
  conditional middleware and never becomes an item); marked now, synced once settled.
- ``item_scraped`` / ``item_dropped`` of a :class:`~webcrawl.items.PageItem`: the record-hash
  pipeline has written the history; marked again. When the request carried a sitemap
  ``lastmod``, the date is judged against the record's verdict (sitemap trust per host).
- ``request_scheduled`` with ``meta["webcrawl_lastmod"]``: the page's latest sitemap date is kept.

Marks and dates are buffered in the process and written once per tick (:meth:`IndexHooks.flush`),
so the hooks cost no Redis round trip per response.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import signals

from webcrawl.items import PageItem
from webcrawl.state.sitemaps import parse_lastmod

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.http import Response
    from scrapy.signalmanager import SignalManager

    from webcrawl.clock import Clock
    from webcrawl.state.history import HistoryStore
    from webcrawl.state.pages import PageIndex
    from webcrawl.state.sitemaps import SitemapStore

logger = logging.getLogger(__name__)

__all__ = ["IndexHooks"]

_NOT_PAGES = frozenset({"robots", "sitemap"})


class IndexHooks:
    """Buffer index marks and sitemap dates; see the module docstring."""

    def __init__(self, index: PageIndex, sitemaps: SitemapStore, history: HistoryStore, *,
                 canonical: Callable[[str], str | None], clock: Clock, settle: float = 1.0) -> None:
        self.index = index
        self.sitemaps = sitemaps
        self.history = history
        self.canonical = canonical
        self.clock = clock
        self.settle = settle
        self._marks: dict[str, float] = {}
        self._dates: dict[str, float] = {}

    def connect(self, manager: SignalManager) -> None:
        manager.connect(self.response_downloaded, signal=signals.response_downloaded)
        manager.connect(self.item_done, signal=signals.item_scraped)
        manager.connect(self.item_done, signal=signals.item_dropped)
        manager.connect(self.request_scheduled, signal=signals.request_scheduled)

    def _url(self, request: Request) -> str | None:
        return request.meta.get("webcrawl_canonical_url") or self.canonical(request.url)

    def response_downloaded(self, response: Response, request: Request) -> None:
        if request.meta.get("webcrawl_purpose") in _NOT_PAGES:
            return
        url = self._url(request)
        if url:
            self._marks[url] = self.clock.time()

    def request_scheduled(self, request: Request) -> None:
        lastmod = parse_lastmod(request.meta.get("webcrawl_lastmod"))
        url = self._url(request) if lastmod is not None else None
        if url and lastmod is not None:
            self._dates[url] = lastmod

    def item_done(self, item: Any, response: Response | None = None, **kwargs: Any) -> None:
        if not isinstance(item, PageItem):
            return
        self._marks[item.canonical_url] = self.clock.time()
        lastmod = parse_lastmod(response.meta.get("webcrawl_lastmod")) if response is not None else None
        if lastmod is None or item.change not in ("changed", "unchanged"):
            return
        record = self.history.get(item.canonical_url)
        if record is None or record.last_interval is None:
            return
        host = urlsplit(item.url).hostname or ""
        tracker = self.sitemaps.judge(host, lastmod, item.fetch_time - record.last_interval,
                                      item.change == "changed")
        if tracker.comparisons == self.sitemaps.min_agreements and tracker.trusted:
            logger.info("sitemap lastmod of %s is now trusted", host)

    def flush(self, now: float, settle: float | None = None) -> int:
        """Write buffered marks and dates, then sync the index records that have settled."""
        marks, self._marks = self._marks, {}
        dates, self._dates = self._dates, {}
        if marks:
            self.index.mark(list(marks), max(marks.values()))
        self.sitemaps.note(dates)
        return self.index.sync(now, self.settle if settle is None else settle)
