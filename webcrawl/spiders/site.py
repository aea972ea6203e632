"""SiteSpider: the generic spider of a site file.

The spider loader (:mod:`webcrawl.spiderloader`) builds one subclass per site file with ``name``
and ``site`` (the validated :class:`~webcrawl.sites.SiteConfig`) set; this base class has no
``name``, so Scrapy never lists it. A site's own Python spider subclasses it (``spider = ...`` in
the site file) and may override :meth:`SiteSpider.parse` or :meth:`SiteSpider.page_items`.

Contract (docs/spider.md):

- ``start()`` yields the seeds (depth 0), then one request per sitemap of the site file, all through
  the crawl's seen filter like any URL (a sitemap is read once here; the allocator schedules its
  later readings). Sitemaps (indexes, gzip, ``<lastmod>``) are fetched through the crawl itself,
  so they pay politeness and robots.txt like any page. Every URL a sitemap lists is requested
  at depth 0 (the seen filter drops known ones), and every date it gives is noted for the page
  (:func:`webcrawl.state.pagestore.lastmod_op`): a date newer than the page's last fetch makes it
  due at once where the host's dates have proved reliable. A sitemap's own reading is recorded
  like a page's (its entries' hash as its record), so it gets a schedule and a cost.
- :meth:`revisit_request` and :meth:`sitemap_request` build the requests of known pages and
  sitemaps the scheduler pops from the due queue, and of sitemaps robots.txt names.
- ``parse()`` parses each body once with the site's :class:`~webcrawl.parse.PageParser` (one per
  spider instance; it truncates to ``limits.parse_bytes``), yields a request per link not yet
  requested by this process, a :class:`~webcrawl.items.PageItem` when the URL has a page type and
  a :class:`~webcrawl.items.ListingItem` per listed item. It never raises for any body: binary,
  PDF, empty or badly encoded bodies are counted under ``webcrawl/parse/`` and yield no links.
- The page lifecycle (docs/events.md): a known page's revisit takes 404 and 410 answers
  (``handle_httpstatus_list``), and ``parse()`` turns one into a bodiless ``PageItem`` with that
  status (the pipeline confirms the removal); a known page reached through permanent redirects
  (301/308 only) becomes an item ``moved_from`` that page; one reached through a temporary
  redirect (302, 303, 307) yields only a check (``check_only``: the page has not moved and this
  is not its content).
- A page without a page type is a *hub* item when it is a seed or links pages that have one:
  its record is the sorted list of those links, so it is read again as often as they change
  (new pages appear there) and no event is made of it.
- A *lister* (a hub, a page whose type has listing rules, a seed, a sitemap of at most
  ``MAX_KEPT_LINKS`` typed pages) read again compares the typed
  pages it shows with those it showed last time (``meta["webcrawl_links"]``, kept in the crawl
  state): each known page it no longer shows is fetched at once (``meta["webcrawl_recheck"]``,
  in the known pages' priority band, so before the pages it newly shows), to see whether it
  died or moved: a move is then seen from its old URL, and its new URL is not taken for a new
  page. At most ``MAX_RECHECKS`` a reading, and a page at most once an hour
  (``RECHECK_MEMORY_SECONDS``) by one process.
- Every request carries ``meta["webcrawl_purpose"]`` (``discovery`` for seeds, links and sitemap
  entries; ``sitemap`` for sitemap files) and ``meta["webcrawl_page_type"]`` (the page type its
  URL matches, or ``None``). URLs are the parser's canonical form.
- Seeds, links, sitemap entries and first sitemap readings carry the errback
  :meth:`SiteSpider.request_failed`: a request the SSRF guard or robots.txt refused is noted in
  the crawl state, so its URL is queued again when met again (:mod:`webcrawl.spiders._refusals`).
- URLs pushed to the crawl's Redis under ``<site>:start_urls`` (scrapy-redis's convention, plain
  or JSON with ``url`` and ``meta``) are crawled like seeds, even if met before
  (:meth:`SiteSpider.feed_request`, :mod:`webcrawl.spiders._feed`).
- Links this process already requested are dropped before a ``Request`` is built (a bounded set,
  ``WEBCRAWL_SEEN_CACHE_SIZE``): on link-heavy sites most links are navigation repeats, and the
  scheduler's shared seen filter would drop them anyway at a much higher cost per link.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import scrapy

from webcrawl import meta as M
from webcrawl.config import StateConfig
from webcrawl.items import ListingItem, PageItem
from webcrawl.parse import PageParser, ParseResult, rules_for_site
from webcrawl.revisit.priority import REVISIT_PRIORITY
from webcrawl.sites import SiteConfig
from webcrawl.spiders._feed import Feed
from webcrawl.spiders._listers import (
    GONE_STATUSES, MAX_KEPT_LINKS, MAX_RECHECKS, RECHECK_MEMORY_SECONDS, Listers, redirected,
)
from webcrawl.spiders._refusals import Refusals
from webcrawl.spiders._sitemap import SitemapError, read_sitemap

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

    from webcrawl.state.feed import FeedEntry

logger = logging.getLogger(__name__)

__all__ = ["GONE_STATUSES", "HEADERS_KEPT", "MAX_KEPT_LINKS", "MAX_RECHECKS", "MAX_SITEMAP_NESTING",
           "RECHECK_MEMORY_SECONDS", "SiteSpider"]

META_PURPOSE = "webcrawl_purpose"
META_PAGE_TYPE = "webcrawl_page_type"
META_LASTMOD = "webcrawl_lastmod"
META_SITEMAP_LEVEL = "webcrawl_sitemap_level"
#: Response headers copied into ``PageItem.headers`` (validators and what the store may want).
HEADERS_KEPT = ("ETag", "Last-Modified", "Content-Type", "Date", "Content-Length")
#: Sitemap indexes pointing at indexes: deeper levels are counted and not fetched.
MAX_SITEMAP_NESTING = 3
PARSE = "webcrawl/parse/"
SITEMAP = "webcrawl/sitemap/"
SPIDER = "webcrawl/spider/"


def _charset(content_type: bytes | None) -> str | None:
    """The ``charset`` parameter of a Content-Type header value, if any."""
    if not content_type:
        return None
    _, found, rest = content_type.lower().partition(b"charset=")
    if not found:
        return None
    value = rest.split(b";", 1)[0].strip().strip(b"\"'")
    return value.decode("latin-1") or None


class SiteSpider(scrapy.Spider):
    """The generic spider of a site file; see the module docstring for the contract.

    ``site`` is set on each per-site subclass by the spider loader (``None`` here)."""

    site: ClassVar[SiteConfig | None] = None
    #: Scrapy starts CONCURRENT_ITEMS asyncio tasks for every response's output (100 by default:
    #: about a tenth of a page's CPU time here). This spider yields a few items a page, and the
    #: pipelines are synchronous, so one worker loses nothing (and 8 cost twice its CPU).
    custom_settings = {"CONCURRENT_ITEMS": 1}  # noqa: RUF012 (Scrapy declares it an instance attribute)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parser: PageParser | None = PageParser(rules_for_site(self.site)) if self.site else None
        self.seen_cache_size = 500_000
        self.listing_items = True
        self.max_sitemap_bytes = 0
        self._requested: set[str] = set()
        self._keys: dict[tuple[str, str | None], str] = {}
        self._listers = Listers(self.site, self.parser) if self.site and self.parser else None
        #: where sitemap readings and dates go (set by from_crawler when the crawl has a state)
        self._signals: Any = None
        self._refusals: Refusals | None = None
        self._feed: Feed | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.seen_cache_size = settings.getint("WEBCRAWL_SEEN_CACHE_SIZE", 500_000)
        parse_cache = StateConfig.parse_cache_size_of(settings)
        if spider.parser is not None and parse_cache != spider.parser.cache_size:
            spider.parser = PageParser(spider.parser.rules, cache_size=parse_cache)
        spider.listing_items = settings.getbool("WEBCRAWL_LISTING_ITEMS_ENABLED", True)
        spider.max_sitemap_bytes = settings.getint("DOWNLOAD_MAXSIZE", 0)
        if spider.site is not None and settings.get("SCHEDULER", "").endswith("ReadyQueueScheduler"):
            from webcrawl.spiders._signals import SitemapSignals

            spider._signals = SitemapSignals(crawler, spider.site)
        if (spider.site is not None and settings.getbool("WEBCRAWL_FEED_ENABLED", True)
                and settings.get("SCHEDULER", "").endswith("ReadyQueueScheduler")):
            spider._feed = Feed(crawler, spider, spider.feed_request)
        return spider

    # -- start --------------------------------------------------------------------------------------

    async def start(self) -> AsyncIterator[Any]:
        if self.site is None or self.parser is None:
            raise ValueError(f"{type(self).__name__} has no site: build it with the spider loader")
        for url in self.site.seeds:
            request = self._page_request(self.parser.canonicalizer.canonical(url) or url)
            if request is not None:
                yield request
        for url in self.site.sitemaps:
            yield self._sitemap_request(url, 0)

    def _page_request(self, url: str, lastmod: float | None = None,
                      depth_reset: bool = False, reread: bool = False,
                      from_lister: bool = False) -> scrapy.Request | None:
        """A discovery request for the canonical ``url``, or ``None`` when this process already
        asked for it (a sitemap's date for it is noted apart, see :meth:`parse_sitemap`)."""
        requested = self._requested
        if url in requested:
            self._inc(SPIDER + "links/known")
            return None
        if len(requested) >= self.seen_cache_size:
            requested.clear()  # forgetting only costs a check in the scheduler's shared filter
        requested.add(url)
        assert self.parser is not None
        page_type = self.parser.rules.page_type(url)
        meta: dict[str, Any] = {META_PURPOSE: "discovery",
                                META_PAGE_TYPE: page_type.name if page_type is not None else None}
        if lastmod is not None:
            meta[META_LASTMOD] = lastmod
        if depth_reset:
            meta["depth_reset"] = True  # sitemap entries count as depth 0, like seeds
        if reread:
            meta[M.NEWLY_LISTED] = True  # listed by a page read before: likely a new page
        if from_lister and page_type is None:
            meta[M.HUB_CANDIDATE] = True  # untyped and linked from a hub or seed: likely a hub
        self._inc(SPIDER + "requests/discovery")
        return scrapy.Request(url, callback=self.parse, errback=self.request_failed, meta=meta)

    def request_failed(self, failure: Failure) -> Failure:
        """Errback of the seeds, links and sitemaps: a refusal is noted for another try; every
        failure goes on as without an errback (Scrapy logs download errors as usual)."""
        crawler = getattr(self, "crawler", None)
        if crawler is None:
            return failure
        if self._refusals is None:
            self._refusals = Refusals(crawler)
        return self._refusals.failed(failure)

    def feed_request(self, entry: FeedEntry) -> scrapy.Request:
        """The request of a URL pushed to the crawl (scrapy-redis style): a seed that is crawled
        even if the crawl met it before; ``entry.meta`` rides along (already made safe)."""
        assert self.parser is not None
        url = self.parser.canonicalizer.canonical(entry.url) or entry.url
        page_type = self.parser.rules.page_type(url)
        meta = {**entry.meta, META_PURPOSE: "discovery",
                META_PAGE_TYPE: page_type.name if page_type is not None else None}
        self._inc(SPIDER + "requests/feed")
        if entry.method != "GET" or entry.formdata:
            return scrapy.FormRequest(url, method=entry.method, formdata=entry.formdata or None,
                                      callback=self.parse, errback=self.request_failed,
                                      dont_filter=True, meta=meta)
        return scrapy.Request(url, callback=self.parse, errback=self.request_failed,
                              dont_filter=True, meta=meta)

    def _sitemap_request(self, url: str, level: int, *, known: bool = False,
                         meta: dict[str, Any] | None = None) -> scrapy.Request:
        self._inc(SPIDER + "requests/sitemap")
        # Through the seen filter unless it is a scheduled reading of a known sitemap; never
        # conditional (its reading is judged on its entries, not on validators).
        return scrapy.Request(url, callback=self.parse_sitemap, errback=self.request_failed,
                              dont_filter=known, priority=10, meta={
            **(meta or {}), META_PURPOSE: "sitemap", META_PAGE_TYPE: None,
            META_SITEMAP_LEVEL: level, "webcrawl_conditional": False, "depth_reset": True,
        })

    def sitemap_request(self, url: str) -> scrapy.Request:
        """A first reading of a sitemap found elsewhere (a robots.txt ``Sitemap:`` line)."""
        return self._sitemap_request(url, 0)

    def revisit_request(self, url: str, *, sitemap: bool = False,
                        meta: dict[str, Any] | None = None) -> scrapy.Request:
        """The request of a known page (or sitemap) whose revisit is due."""
        if sitemap:
            return self._sitemap_request(url, 0, known=True, meta=meta)
        meta = dict(meta or {})
        meta.setdefault("handle_httpstatus_list", GONE_STATUSES)
        if self._listers is not None and not meta.get(M.RECHECK):
            self._listers.revisiting(meta.get(M.CANONICAL_URL) or url)
        # Already popped: its priority orders only what its answer leads to (the redirect of a
        # page that moved), which must go before the new URLs a listing shows.
        return scrapy.Request(url, callback=self.parse, dont_filter=True, meta=meta,
                              priority=REVISIT_PRIORITY)

    # -- pages ----------------------------------------------------------------------------------------

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        """Links, the page's item and its listing items; see the module docstring."""
        parser = self.parser
        assert parser is not None and self.site is not None
        fetch_time = self._signals.now() if self._signals is not None else time.time()
        if response.status in GONE_STATUSES:
            if response.meta.get(M.KNOWN):
                yield self._gone_item(response, fetch_time)
            return
        result = parser.parse(response.body, response.url, depth=response.meta.get("depth", 0),
                              encoding=_charset(response.headers.get(b"Content-Type")))
        stats = self.crawler.stats
        assert stats is not None
        for key, count in result.counts.items():
            stats.inc_value(PARSE + key, count)
        stats.inc_value(self._keyed(PARSE + "page_type/", result.page_type))
        requested, new = self._requested, 0
        reread = bool(response.meta.get(M.KNOWN))
        shown = self._lister_links(result)
        for url in result.links:
            if url not in requested:
                request = self._page_request(url, reread=reread, from_lister=shown is not None)
                if request is not None:
                    new += 1
                    yield request
        if len(result.links) > new:
            stats.inc_value(SPIDER + "links/known", len(result.links) - new)
        before = response.meta.get(M.LINKS)
        if before and reread:
            yield from self._rechecks(set(before).difference(shown or ()))
        yield from self.page_items(response, result, fetch_time)

    def page_items(self, response: Response, result: ParseResult, fetch_time: float) -> Iterator[Any]:
        """The items of a parsed page: a :class:`PageItem` when its URL has a page type (or the
        page is a hub), then one :class:`ListingItem` per listed item (unless
        ``WEBCRAWL_LISTING_ITEMS_ENABLED`` is off). Override to add or change items."""
        assert self.site is not None
        moved_from, moved_url, temporary = redirected(response)
        if (self._listers is not None and response.meta.get(M.KNOWN) and moved_from is None
                and not response.meta.get("redirect_urls")):
            self._listers.still_there(response.meta.get(M.CANONICAL_URL) or response.url)
        if temporary:  # not this page's content: only a check that it was fetched
            self._inc(SPIDER + "items/temporary_redirect")
            item = self._item(response, result.url, result.page_type, {}, fetch_time)
            item.body, item.check_only = b"", "redirected"
            yield item
            return
        if result.page_type is None:
            hub = self._lister_links(result)
            if hub is not None:
                self._inc(SPIDER + "items/hub")
                item = self._item(response, result.url, None, {"links": list(hub)}, fetch_time)
                item.links = hub
                yield item
            return
        self._inc(SPIDER + "items/page")
        self._inc(self._keyed(SPIDER + "items/page/", result.page_type))
        item = self._item(response, result.url, result.page_type, result.record or {}, fetch_time)
        if moved_from != result.url:
            item.moved_from, item.moved_url = moved_from, moved_url
        item.extraction_errors = dict(getattr(result, "errors", None) or {})
        item.links = self._lister_links(result) or ()
        yield item
        if result.listing and self.listing_items:
            self._inc(SPIDER + "items/listing", len(result.listing))
            self._inc(self._keyed(SPIDER + "items/listing/", result.page_type), len(result.listing))
            for listed in result.listing:
                yield ListingItem(response.url, listed.url, listed.summary, self.site.name, fetch_time)

    def _item(self, response: Response, canonical: str, page_type: str | None,
              record: dict[str, Any], fetch_time: float) -> PageItem:
        assert self.site is not None
        headers = response.headers
        kept = {}
        for name in HEADERS_KEPT:
            value = headers.get(name)
            if value is not None:
                kept[name] = value.decode("latin-1")
        meta = response.meta
        return PageItem(
            url=response.url, canonical_url=canonical, site=self.site.name,
            page_type=page_type, status=response.status, fetch_time=fetch_time,
            record=record, body=response.body if page_type is not None else b"", headers=kept,
            lastmod=_lastmod(meta.get(META_LASTMOD)),
            fetch={"billed": meta.get(M.BILLED), "conditional": M.VALIDATORS_FOR in meta,
                   "verify_304": meta.get(M.VERIFY_304), "page_stats": meta.get(M.PAGE_STATS),
                   "wire_bytes": meta.get(M.WIRE_BYTES)},
        )

    def _gone_item(self, response: Response, fetch_time: float) -> PageItem:
        """The bodiless item of a known page that answered 404 or 410."""
        self._inc(SPIDER + "items/gone")
        meta = response.meta
        canonical = meta.get(M.CANONICAL_URL) or (
            self.parser.canonicalizer.canonical(response.url) if self.parser else None) or response.url
        item = self._item(response, canonical, meta.get(M.PAGE_TYPE), {}, fetch_time)
        item.body = b""
        return item

    def _lister_links(self, result: ParseResult) -> tuple[str, ...] | None:
        return self._listers.shown(result) if self._listers is not None else None

    def _rechecks(self, unlisted: set[str]) -> Iterator[scrapy.Request]:
        """Fetch at once the known pages a lister stopped showing (module docstring)."""
        if self._listers is None:
            return
        urls, skipped = self._listers.to_recheck(unlisted)
        for url in urls:
            page_type = self._listers.page_type(url)
            self._inc(SPIDER + "requests/recheck")
            yield self.revisit_request(url, meta={
                M.PURPOSE: "revisit", M.PAGE_TYPE: page_type, M.CANONICAL_URL: url,
                M.KNOWN: True, M.RECHECK: True})
        if skipped:
            self._inc(SPIDER + "requests/recheck_skipped", skipped)

    def _keyed(self, family: str, page_type: str | None) -> str:
        """``family + page type`` (``none`` without one), built once per pair."""
        name = (family, page_type)
        key = self._keys.get(name)
        if key is None:
            key = self._keys[name] = f"{family}{page_type or 'none'}"
        return key

    # -- sitemaps -------------------------------------------------------------------------------------

    def parse_sitemap(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        """The requests a sitemap or sitemap index lists (see the module docstring)."""
        parser = self.parser
        assert parser is not None
        level = int(response.meta.get(META_SITEMAP_LEVEL, 0))
        try:
            document = read_sitemap(response.body, self.max_sitemap_bytes)
        except SitemapError as error:
            self._inc(SITEMAP + "errors")
            self._inc(f"{SITEMAP}errors/{error.kind}")
            logger.warning("Ignoring sitemap %s: %s", response.url, error)
            return
        self._inc(f"{SITEMAP}{document.kind}")
        if document.gzipped:
            self._inc(SITEMAP + "gzip")
        if document.invalid_lastmod:
            self._inc(SITEMAP + "lastmod/invalid", document.invalid_lastmod)
        if document.kind == "sitemapindex":
            for loc, _ in document.entries:
                url = parser.canonicalizer.canonical(loc)
                if url is None or not parser.link_filter.in_scope(_host(url)):
                    self._inc(SITEMAP + "filtered/scope")
                elif level + 1 > MAX_SITEMAP_NESTING:
                    self._inc(SITEMAP + "filtered/nesting")
                else:
                    yield self._sitemap_request(url, level + 1)
            self._note_sitemap(response, document, ())
            return
        read_at = self._signals.now() if self._signals is not None else time.time()
        reread = bool(response.meta.get(M.KNOWN))
        rules = parser.rules
        typed: list[str] = []
        for loc, lastmod in document.entries:
            self._inc(SITEMAP + "urls")
            url = parser.canonicalizer.canonical(loc)
            reason = "scheme" if url is None else parser.link_filter.reason(url)
            if reason is not None:
                self._inc(f"{SITEMAP}filtered/{reason}")
                continue
            assert url is not None
            if rules.page_type(url) is not None:
                typed.append(url)
            if lastmod is not None:
                self._inc(SITEMAP + "lastmod")
                if self._signals is not None:
                    self._signals.lastmod(url, _host(url), lastmod, read_at)
            request = self._page_request(url, lastmod, depth_reset=True, reread=reread)
            if request is not None:
                yield request
        shown = tuple(sorted(set(typed))) if len(typed) <= MAX_KEPT_LINKS else ()
        before = response.meta.get(M.LINKS)
        if before and reread and shown:
            yield from self._rechecks(set(before).difference(shown))
        self._note_sitemap(response, document, shown)

    def _note_sitemap(self, response: Response, document: Any, shown: tuple[str, ...]) -> None:
        """Record this reading of the sitemap like a page's fetch: its entries are its record;
        the typed pages it lists are kept for its next reading's rechecks (``shown``; none past
        ``MAX_KEPT_LINKS``)."""
        if self._signals is None:
            return
        entries = "\n".join(f"{loc} {lastmod or ''}" for loc, lastmod in document.entries)
        url = response.meta.get("webcrawl_canonical_url") or response.url
        self._signals.sitemap_read(url, _host(url), response, hashlib.blake2b(
            entries.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest(), shown)

    def _inc(self, key: str, count: int = 1) -> None:
        stats = self.crawler.stats
        assert stats is not None
        stats.inc_value(key, count)


def _lastmod(value: Any) -> float | None:
    """The sitemap date a request carried (seconds since the epoch), ``None`` without one."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _host(url: str) -> str:
    """The host of a canonical absolute URL (lower case, no port, no user info)."""
    authority = url.split("/", 3)[2].rpartition("@")[2]
    return authority if authority.startswith("[") else authority.partition(":")[0]
