"""The record-hash pipeline: did the page's record change since the last fetch?

:class:`RecordHashPipeline` hashes each :class:`~webcrawl.items.PageItem`'s record
(:func:`webcrawl.change.record_hash`: the page type's fields from the site file, volatile ones
left out) and records the observation in the page's record in one atomic step (land operation
"O", sent with the turn's write batch: verdict, interval, validators, the fetch's own cost, the
revisit it schedules next); it waits for the batch's answer and sets ``content_hash`` and
``change`` (``new``, ``changed`` or ``unchanged``). It also judges the evidence about the host's
validators (a verified 304, a 200 to our validators) and updates the host's trust. It drops
nothing: the body store after it must see every item.

A verification fetch (it re-checks a 304 without validators) is judged against the time of the
304: a record that changed since is a lie only when the change must have come before the 304
(the answer's ``Last-Modified`` is not after it, and the page rarely changes within the time
between the two), never merely because the page changed in between. Both times are read on the
server's clock (the answers' ``Date``) where the answers carry one.

Exact change times (``change_age``, seconds between the record's last change and this fetch,
used only when the record changed and the age fits inside the interval since the previous
visit): from ``Last-Modified`` against ``Date`` where the host's validators are trusted; else from
the sitemap ``lastmod`` the request carried when the host's sitemap dates are trusted.
``WEBCRAWL_RECORDHASH_EXACT_CHANGES = False`` turns both off.

Value overrides: for a page type with ``value_rules`` or a ``value_field`` (docs/sites.md), the
tier they give the page (record field first, then URL rule) goes into its record.

:class:`DropUnchangedPipeline`, placed last, drops unchanged items and listing summaries, so feed
exports (``scrapy crawl <site> -O changes.jsonl``) get new and changed records only, each once. The
drop is logged at DEBUG; ``WEBCRAWL_EXPORT_UNCHANGED = True`` keeps unchanged ones.

Stats: ``webcrawl/records`` and ``webcrawl/records/{new,changed,unchanged}``, each also per page
type; ``webcrawl/records/lastmod_exact``; ``webcrawl/conditional/evidence`` and
``webcrawl/conditional/evidence/{confirmed,lied,ignored,inconclusive}``;
``webcrawl/conditional/trust/{learning,trusted,distrusted}`` (transitions).
"""

from __future__ import annotations

import logging
import math
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.exceptions import DropItem, NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from webcrawl.change import record_hash
from webcrawl.items import ListingItem, PageItem
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.hosts import validator_op
from webcrawl.state.pagestore import observe_op

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

__all__ = ["DropUnchangedPipeline", "RecordHashPipeline", "change_age", "verification_event"]

#: A verification fetch that finds a change calls the 304 a lie only when a change within the
#: time between the two had less than this chance (the page's own rate of change).
LIE_CHANCE = 0.05


def _header(headers: dict[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _date(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def change_age(headers: dict[str, str]) -> float | None:
    """Seconds between ``Last-Modified`` and ``Date``, both by the server's clock (so neither its
    skew nor a simulated clock matters); ``None`` when either is missing or unreadable."""
    date, modified = _date(_header(headers, "date")), _date(_header(headers, "last-modified"))
    if date is None or modified is None:
        return None
    age = date - modified
    return age if age >= 0 else None


def verification_event(changed: bool, *, verify_304: float, fetch_time: float,
                       last_modified: float | None, page_stats: dict[str, Any] | None) -> str:
    """What a verification fetch says of the 304 it re-checks (see the module docstring):
    ``confirmed``, ``lied`` or ``inconclusive``."""
    if not changed:
        return "confirmed"
    if last_modified is not None and last_modified > verify_304:
        return "inconclusive"  # changed after the 304: the 304 told the truth then
    stats = page_stats or {}
    seconds = float(stats.get("seconds") or 0.0)
    rate = (float(stats.get("changes") or 0.0) + 0.5) / seconds if seconds > 0 else math.inf
    gap = max(fetch_time - verify_304, 0.0)
    chance = -math.expm1(-rate * gap) if math.isfinite(rate) else 1.0
    return "lied" if chance < LIE_CHANCE else "inconclusive"


class RecordHashPipeline:
    """Hash the record, observe it in the page's record, mark the item; see the module docstring."""

    def __init__(self, runtime: CrawlRuntime, stats: StatsCollector, *, site: Any = None,
                 exact_changes: bool = True) -> None:
        self.runtime = runtime
        self.stats = stats
        self.exact_changes = exact_changes
        self.policy = runtime.trust_policy()
        self.fields: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}
        self.trust_rules = getattr(site, "trust", None)
        self.overrides: dict[str, Any] = {}
        for page_type in getattr(site, "page_types", ()):
            self.fields[page_type.name] = (tuple(f.name for f in page_type.fields),
                                           frozenset(page_type.volatile))
            if getattr(page_type, "has_overrides", False):
                self.overrides[page_type.name] = page_type

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_RECORDHASH_ENABLED", True):
            raise NotConfigured("record hashes are off: set WEBCRAWL_RECORDHASH_ENABLED = True")
        assert crawler.stats is not None
        runtime = CrawlRuntime.of(crawler)
        return cls(runtime, crawler.stats, site=runtime.site,
                   exact_changes=settings.getbool("WEBCRAWL_RECORDHASH_EXACT_CHANGES", True))

    def hash_of(self, item: PageItem) -> str:
        """The item's record hash under its page type's fields (all record keys when unknown)."""
        fields, volatile = self.fields.get(item.page_type or "", (None, frozenset()))
        return record_hash(item.record, fields, volatile)

    def _mode(self, host: str) -> str:
        return self.trust_rules.for_host(host).validators if self.trust_rules is not None else "learn"

    def _sitemaps_trusted(self, host: str) -> bool:
        mode = self.trust_rules.for_host(host).sitemaps if self.trust_rules is not None else "learn"
        if mode != "learn":
            return mode == "always"
        return self.runtime.hosts.sitemaps_trusted(host)

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem):
            return item
        item.content_hash = self.hash_of(item)
        host = urlsplit(item.url).hostname or ""
        mode = self._mode(host)
        trusted = mode == "always" or (mode == "learn" and self.runtime.hosts.validators(host).state == "trusted")
        url = item.canonical_url or item.url
        kind = self.overrides.get(item.page_type or "")
        tier = (kind.override_tier(url, item.record) or 0) if kind is not None else None
        billed = item.fetch.get("billed")
        op = observe_op(url, full=True, time=item.fetch_time, record_hash=item.content_hash,
                        validators=(_header(item.headers, "etag"), _header(item.headers, "last-modified")),
                        type_id=self.runtime.types.id(item.page_type), tier=tier,
                        change_age=self._change_age(item, host, trusted),
                        billed=float(billed) if billed is not None else None)
        done: Deferred[list[Any]] = Deferred()
        self.runtime.batch.land(host, op, done.callback)
        reply = await maybe_deferred_to_future(done)
        verdict = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        item.change = verdict if verdict in ("new", "changed", "unchanged") else "new"  # type: ignore[assignment]
        for key in ("webcrawl/records", f"webcrawl/records/{item.change}",
                    f"webcrawl/records/{item.change}/{item.page_type}"):
            self.stats.inc_value(key)
        news = reply[2].decode() if isinstance(reply[2], bytes) else str(reply[2] or "")
        if news:
            logger.info("sitemap lastmod of %s is now %s", host, news)
        if mode == "learn":
            self._judge(item, host)
        return item

    def _change_age(self, item: PageItem, host: str, validators_trusted: bool) -> float | None:
        """Seconds since the record's last change by a trusted clock (module docstring)."""
        if not self.exact_changes:
            return None
        age = change_age(item.headers) if validators_trusted else None
        lastmod = getattr(item, "lastmod", None)
        if age is None and lastmod is not None and lastmod <= item.fetch_time \
                and self._sitemaps_trusted(host):
            self.stats.inc_value("webcrawl/records/lastmod_exact")
            age = item.fetch_time - lastmod
        return age

    def _judge(self, item: PageItem, host: str) -> None:
        fetch = item.fetch
        event: str | None = None
        if fetch.get("verify_304") is not None:
            # The 304's time is its Date, by the server's clock: the check is dated by the same
            # clock when its answer has a Date (a server clock off ours moves both alike).
            answered = _date(_header(item.headers, "date"))
            event = verification_event(
                item.change == "changed", verify_304=float(fetch["verify_304"]),
                fetch_time=answered if answered is not None else item.fetch_time,
                last_modified=_date(_header(item.headers, "last-modified")),
                page_stats=fetch.get("page_stats"))
        elif fetch.get("conditional") and item.change == "unchanged":
            event = "ignored"
        if event is None:
            return
        self.stats.inc_value("webcrawl/conditional/evidence")
        self.stats.inc_value(f"webcrawl/conditional/evidence/{event}")
        if event == "inconclusive":
            return

        def answered(reply: list[Any]) -> None:
            state = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0] or "")
            if not state:
                return
            self.stats.inc_value(f"webcrawl/conditional/trust/{state}")
            if state == "distrusted":
                logger.info("validators of %s are no longer trusted (event: %s)", host, event)
            else:
                logger.info("validators of %s are now %s", host, state)

        self.runtime.batch.land(host, validator_op(event, self.runtime.clock.time(), self.policy),
                                answered)
        self.runtime.hosts.forget_validators(host)


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
