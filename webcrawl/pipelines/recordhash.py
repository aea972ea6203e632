"""The record-hash pipeline: did the page's record change since the last fetch?

:class:`RecordHashPipeline` hashes each :class:`~webcrawl.items.PageItem`'s record
(:func:`webcrawl.change.record_hash`: the page type's fields from the site file, volatile ones
left out), records the observation in the page history in one atomic step (verdict, interval,
validators, cost; :class:`webcrawl.state.history.HistoryStore`) and sets ``content_hash`` and
``change`` (``new``, ``changed`` or ``unchanged``). It also judges the evidence about the host's
validators that the conditional middleware noted (a verified 304, a 200 to our validators) and
updates the host's trust. It drops nothing: the body store after it must see every item.

Exact change times (``change_age``, the seconds between the record's last change and this fetch,
which the history uses only when the record changed and the age fits inside the interval since
the previous visit): from ``Last-Modified`` against ``Date`` where the host's validators are
trusted; else, when the item's request carried a sitemap ``lastmod`` (``PageItem.lastmod``) and
the host's sitemap dates are trusted (:class:`webcrawl.state.sitemaps.SitemapStore`, earned as
they agree with observed changes, or the site file's ``[trust] sitemaps``), ``fetch_time -
lastmod`` when the date is not after the fetch. ``WEBCRAWL_RECORDHASH_EXACT_CHANGES = False``
turns both off.

Value overrides: for a page type with ``value_rules`` or a ``value_field`` (docs/sites.md), the
tier they give the page (record field first, then URL rule; ``0`` for none) is written to the page
history as ``value_tier``, where the priority middleware and the planner's index read it.

:class:`DropUnchangedPipeline`, placed last, drops unchanged items, so feed exports
(``scrapy crawl <site> -O changes.jsonl``) get new and changed records only. The drop is logged at
DEBUG, never one line per page at INFO or WARNING; ``WEBCRAWL_EXPORT_UNCHANGED = True`` keeps them.

Stats: ``webcrawl/records`` and ``webcrawl/records/{new,changed,unchanged}``, each also per page
type (``webcrawl/records/changed/{page_type}``); ``webcrawl/records/no_fetch_note`` (items whose
response the conditional middleware did not see: cost estimated from the body);
``webcrawl/records/lastmod_exact`` (items whose change age came from a trusted sitemap date);
``webcrawl/conditional/evidence`` and ``webcrawl/conditional/evidence/{confirmed,lied,ignored}``;
``webcrawl/conditional/trust/{learning,trusted,distrusted}`` (transitions).
"""

from __future__ import annotations

import logging
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.exceptions import DropItem, NotConfigured

from webcrawl.change import Event, record_hash
from webcrawl.items import ListingItem, PageItem
from webcrawl.middlewares.conditional import ChangeContext, change_context
from webcrawl.state.sitemaps import SitemapStore

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from webcrawl.change import FetchNote

logger = logging.getLogger(__name__)

__all__ = ["DropUnchangedPipeline", "RecordHashPipeline", "change_age"]

_HEADER_ESTIMATE = 300  # bytes of status line and headers when the response was not seen


def _header(headers: dict[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def change_age(headers: dict[str, str]) -> float | None:
    """Seconds between ``Last-Modified`` and ``Date``, both by the server's clock (so neither its
    skew nor a simulated clock matters); ``None`` when either is missing or unreadable."""
    date, modified = _header(headers, "date"), _header(headers, "last-modified")
    if not date or not modified:
        return None
    try:
        age = (parsedate_to_datetime(date) - parsedate_to_datetime(modified)).total_seconds()
    except (TypeError, ValueError, IndexError):
        return None
    return age if age >= 0 else None


class RecordHashPipeline:
    """Hash the record, update the page history, mark the item; see the module docstring."""

    def __init__(self, context: ChangeContext, stats: StatsCollector, *, site: Any = None,
                 exact_changes: bool = True, sitemaps: SitemapStore | None = None) -> None:
        self.context = context
        self.stats = stats
        self.exact_changes = exact_changes
        self.fields: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}
        self.trust_rules = getattr(site, "trust", None)
        self.overrides: dict[str, Any] = {}
        for page_type in getattr(site, "page_types", ()):
            self.fields[page_type.name] = (tuple(f.name for f in page_type.fields),
                                           frozenset(page_type.volatile))
            if getattr(page_type, "has_overrides", False):
                self.overrides[page_type.name] = page_type
        rules = self.trust_rules
        self.sitemaps = sitemaps or SitemapStore(
            context.history.client, context.history.keys,
            mode=(lambda host: rules.for_host(host).sitemaps) if rules is not None else None)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_RECORDHASH_ENABLED", True):
            raise NotConfigured("record hashes are off: set WEBCRAWL_RECORDHASH_ENABLED = True")
        assert crawler.stats is not None
        return cls(change_context(crawler), crawler.stats, site=getattr(crawler.spider, "site", None),
                   exact_changes=settings.getbool("WEBCRAWL_RECORDHASH_EXACT_CHANGES", True))

    def hash_of(self, item: PageItem) -> str:
        """The item's record hash under its page type's fields (all record keys when unknown)."""
        fields, volatile = self.fields.get(item.page_type or "", (None, frozenset()))
        return record_hash(item.record, fields, volatile)

    def _mode(self, host: str) -> str:
        return self.trust_rules.for_host(host).validators if self.trust_rules is not None else "learn"

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem):
            return item
        item.content_hash = self.hash_of(item)
        note = self.context.notes.pop(item.url)
        if note is None:
            self.stats.inc_value("webcrawl/records/no_fetch_note")
            cost = len(item.body) + _HEADER_ESTIMATE
            host = urlsplit(item.url).hostname or ""
        else:
            cost, host = note.wire_bytes, note.host
        mode = self._mode(host)
        trusted = mode == "always" or (mode == "learn" and self.context.trust.get(host).state == "trusted")
        url = item.canonical_url or item.url
        observation = self.context.history.observe(
            url, now=item.fetch_time, record_hash=item.content_hash, cost=cost,
            status=item.status, page_type=item.page_type,
            validators=(_header(item.headers, "etag"), _header(item.headers, "last-modified")),
            change_age=self._change_age(item, host, trusted),
        )
        kind = self.overrides.get(item.page_type or "")
        if kind is not None:
            tier = kind.override_tier(url, item.record)
            history = self.context.history
            history.client.hset(history.keys.page(url), "value_tier", tier or 0)
        item.change = observation.verdict if observation.verdict != "none" else "new"
        for key in ("webcrawl/records", f"webcrawl/records/{item.change}",
                    f"webcrawl/records/{item.change}/{item.page_type}"):
            self.stats.inc_value(key)
        if note is not None and mode == "learn":
            self._judge(note, item.change)
        return item

    def _change_age(self, item: PageItem, host: str, validators_trusted: bool) -> float | None:
        """Seconds since the record's last change by a trusted clock (module docstring)."""
        if not self.exact_changes:
            return None
        age = change_age(item.headers) if validators_trusted else None
        lastmod = getattr(item, "lastmod", None)
        if age is None and lastmod is not None and lastmod <= item.fetch_time \
                and self.sitemaps.trusted(host):
            self.stats.inc_value("webcrawl/records/lastmod_exact")
            age = item.fetch_time - lastmod
        return age

    def _judge(self, note: FetchNote, change: str) -> None:
        event: Event | None = None
        if note.verifies_304:
            event = "confirmed" if change == "unchanged" else "lied"
        elif note.conditional and change == "unchanged":
            event = "ignored"
        if event is None:
            return
        self.stats.inc_value("webcrawl/conditional/evidence")
        self.stats.inc_value(f"webcrawl/conditional/evidence/{event}")
        trust, new_state = self.context.trust.observe(note.host, event)
        if new_state is not None:
            self.stats.inc_value(f"webcrawl/conditional/trust/{new_state}")
            if new_state == "distrusted":
                logger.info("validators of %s are no longer trusted: the host %s", note.host, trust.reason)
            else:
                logger.info("validators of %s are now %s", note.host, new_state)


class DropUnchangedPipeline:
    """Drop unchanged :class:`PageItem` objects and listing summaries (:class:`ListingItem`, the
    crawl's change detectors), logged at DEBUG, so feeds get new and changed records only."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if crawler.settings.getbool("WEBCRAWL_EXPORT_UNCHANGED", False):
            raise NotConfigured("unchanged records are exported: WEBCRAWL_EXPORT_UNCHANGED = True")
        assert crawler.stats is not None
        return cls(crawler.stats)

    def process_item(self, item: Any) -> Any:
        if isinstance(item, PageItem) and item.change == "unchanged":
            self.stats.inc_value("webcrawl/records/dropped_unchanged")
            raise DropItem("unchanged record", log_level="DEBUG")
        if isinstance(item, ListingItem):
            raise DropItem("listing summary (a change detector, not output)", log_level="DEBUG")
        return item
