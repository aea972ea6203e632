"""The record-hash pipeline: did the page's record change since the last fetch, and what event is that?

:class:`RecordHashPipeline` hashes each :class:`~webcrawl.items.PageItem`'s record
(:func:`webcrawl.change.record_hash`: the page type's fields from the site file, volatile ones
left out) and lands the observation in one atomic step of the crawl state (land operation "O",
sent with the turn's write batch): the verdict, the revisit it schedules next and, when the
record is new or changed (or the page moved or came back), the change event, recorded in the
shard's event stream by the same step (docs/events.md). It waits for the answer and sets
``content_hash``, ``change`` and ``event``.

The body goes to the body store *before* the landing whenever the record looks changed against
what the page's record said when its revisit was popped (or the page is not known to this
fetch): an event is never recorded without its body, even when the process dies right after.
A body not stored first goes with the pointer ``?``: should the landing find that the
observation makes an event after all (another process landed the page meanwhile, or it comes
back after a removal), it writes nothing and answers ``body``; the body is stored and the
observation landed again (``webcrawl/bodies/asked``).

The lifecycle (docs/events.md): a known page answering 404 or 410 lands operation "G"
(``suspect`` at the first answer, ``removed`` once a confirmation fetch answers the same, then
``gone``); a page a 301/308 led to from a known page (``moved_from``) takes over that page's
history (event ``moved``); a page without a page type read as a hub lands its typed links as its
record and makes no event; a page whose typed fields did not parse lands nothing (``error``).

A verification fetch (it re-checks a 304 without validators) and a 200 to our validators are
evidence about the host's validators (:mod:`webcrawl.pipelines._validators`).

Exact change times (``change_age``, seconds between the record's last change and this fetch,
used only when the record changed and the age fits inside the interval since the previous
visit): from ``Last-Modified`` against ``Date`` where the host's validators are trusted; else from
the sitemap ``lastmod`` the request carried when the host's sitemap dates are trusted.
``WEBCRAWL_RECORDHASH_EXACT_CHANGES = False`` turns both off.

Value overrides: for a page type with ``value_rules`` or a ``value_field`` (docs/sites.md), the
tier they give the page (record field first, then URL rule) goes into its record.

Stats: ``webcrawl/records`` and ``webcrawl/records/{verdict}``, each also per page type;
``webcrawl/records/lastmod_exact``; ``webcrawl/events`` and ``webcrawl/events/{kind}``;
``webcrawl/extract/errors`` and ``webcrawl/extract/errors/{page type}/{field}``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from webcrawl.change import record_hash
from webcrawl.change.events import encode_record, event_from_entry, event_id
from webcrawl.items import PageItem
from webcrawl.pipelines._bodies import BodyKeeper
from webcrawl.pipelines._validators import ValidatorEvidence, change_age, header, verification_event
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.pagestore import EventArgs, check_op, give_up_op, gone_op, observe_op

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

__all__ = ["GONE_STATUSES", "RecordHashPipeline", "change_age", "verification_event"]

#: Answers that say a known page is gone.
GONE_STATUSES = frozenset((404, 410))


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value or "")


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


class RecordHashPipeline:
    """Hash the record, land the observation and its event, mark the item (module docstring)."""

    def __init__(self, runtime: CrawlRuntime, stats: StatsCollector, *, site: Any = None,
                 exact_changes: bool = True, bodies: BodyKeeper | None = None) -> None:
        self.runtime = runtime
        self.stats = stats
        self.exact_changes = exact_changes
        self.bodies = bodies
        self.evidence = ValidatorEvidence(runtime, stats)
        self.fields: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}
        self.trust_rules = getattr(site, "trust", None)
        self.site_name = getattr(site, "name", "") or runtime.spider_name
        self.overrides: dict[str, Any] = {}
        self._warned_fields: set[tuple[str, str]] = set()
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
        pipeline = cls(runtime, crawler.stats, site=runtime.site,
                       exact_changes=settings.getbool("WEBCRAWL_RECORDHASH_EXACT_CHANGES", True),
                       bodies=BodyKeeper.from_crawler(crawler, runtime))
        return pipeline

    def close_spider(self) -> None:
        if self.bodies is not None:
            self.bodies.close()

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

    async def _land(self, host: str, op: tuple[str, list[Any]]) -> list[Any]:
        done: Deferred[list[Any]] = Deferred()
        self.runtime.batch.land(host, op, done.callback)
        return await maybe_deferred_to_future(done)

    def _count(self, item: PageItem) -> None:
        for key in ("webcrawl/records", f"webcrawl/records/{item.change}",
                    f"webcrawl/records/{item.change}/{item.page_type or 'none'}"):
            self.stats.inc_value(key)

    def _event(self, item: PageItem, host: str, reply: list[Any]) -> None:
        """The event the landing recorded (reply: kind, entry id, entry fields as JSON)."""
        kind, entry_id, entry = _text(reply[3]), _text(reply[4]), _text(reply[5])
        if not kind or not entry_id:
            return
        flat = json.loads(entry)
        fields = dict(zip(flat[::2], flat[1::2], strict=True))
        shard = self.runtime.layout.shard_index(host)
        item.event = event_from_entry(fields, event_id(self.runtime.layout.crawl, shard, entry_id))
        self.stats.inc_value("webcrawl/events")
        self.stats.inc_value(f"webcrawl/events/{kind}")

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem):
            return item
        if item.status in GONE_STATUSES:
            return await self._gone(item)
        if item.check_only is not None:
            self._check_only(item, item.check_only)
            return item
        if item.extraction_errors:
            self._check_only(item, "error")
            return self._extraction_error(item)
        item.content_hash = self.hash_of(item)
        host = _host(item.url)
        mode = self._mode(host)
        trusted = mode == "always" or (mode == "learn" and self.runtime.hosts.validators(host).state == "trusted")
        url = item.canonical_url or item.url
        kind = self.overrides.get(item.page_type or "")
        tier = (kind.override_tier(url, item.record) or 0) if kind is not None else None
        billed = item.fetch.get("billed")
        typed = item.page_type is not None
        keeping = self.bodies is not None and typed
        stored = self.bodies.before(item) if keeping else None
        event = await self._event_args(item, typed, stored, ask=keeping and stored is None)
        while True:
            op = observe_op(url, full=True, time=item.fetch_time, record_hash=item.content_hash,
                            validators=(header(item.headers, "etag"), header(item.headers, "last-modified")),
                            type_id=self.runtime.types.id(item.page_type), tier=tier, hub=not typed,
                            change_age=self._change_age(item, host, trusted),
                            billed=float(billed) if billed is not None else None, event=event)
            reply = await self._land(host, op)
            verdict = _text(reply[0])
            if verdict != "body":
                break
            assert self.bodies is not None
            self.stats.inc_value("webcrawl/bodies/asked")
            stored = self.bodies.store(item)
            event = replace(event, pointer=stored[0] if stored else "",
                            body8=stored[1] if stored else b"")
        item.change = verdict if verdict in ("new", "changed", "unchanged") else "unchanged"  # type: ignore[assignment]
        self._count(item)
        self._event(item, host, reply)
        news = _text(reply[2])
        if news:
            logger.info("sitemap lastmod of %s is now %s", host, news)
        if mode == "learn":
            self.evidence.judge(item, host)
        return item

    async def _event_args(self, item: PageItem, typed: bool, stored: tuple[str, bytes] | None,
                          ask: bool) -> EventArgs:
        """What the landing needs to record the item's event; for a page that moved from another
        shard, that page's history first (given up there, in a landing of its own)."""
        volatile = self.fields.get(item.page_type or "", ((), frozenset()))[1]
        inherit, inherit_record, moved_host = b"", b"", ""
        if item.moved_from:
            moved_host = _host(item.moved_from)
            layout = self.runtime.layout
            if layout.shard_index(moved_host) != layout.shard_index(_host(item.url)):
                reply = await self._land(moved_host, give_up_op(item.moved_from))
                inherit = reply[0] if isinstance(reply[0], bytes) else _text(reply[0]).encode()
                inherit_record = reply[1] if isinstance(reply[1], bytes) else _text(reply[1]).encode()
                if not inherit:
                    moved_host = ""  # not a known page there: no move to record
        return EventArgs(
            site=item.site or self.site_name, page_type=item.page_type or "", url=item.url,
            status=item.status, record=encode_record(item.record) if typed else "",
            volatile=tuple(sorted(volatile)), pointer=stored[0] if stored else ("?" if ask else ""),
            body8=stored[1] if stored else b"",
            moved_from=(item.moved_from or "") if moved_host else "",
            moved_url=(item.moved_url or "") if moved_host else "", moved_host=moved_host,
            inherit=inherit, inherit_record=inherit_record, links=item.links,
            wire_bytes=item.fetch.get("wire_bytes"))

    async def _gone(self, item: PageItem) -> PageItem:
        """A known page answered 404 or 410 (module docstring)."""
        host = _host(item.url)
        billed = item.fetch.get("billed")
        event = EventArgs(site=item.site or self.site_name, page_type=item.page_type or "",
                          url=item.url, status=item.status, wire_bytes=item.fetch.get("wire_bytes"))
        reply = await self._land(host, gone_op(item.canonical_url or item.url, time=item.fetch_time,
                                               billed=float(billed) if billed is not None else None,
                                               event=event))
        verdict = _text(reply[0])
        item.change = verdict if verdict in ("suspect", "removed", "gone") else None  # type: ignore[assignment]
        if item.change is not None:
            self._count(item)
            if item.change == "suspect":
                logger.info("%s answered %d: its removal is confirmed by a fetch after "
                            "WEBCRAWL_REMOVAL_CONFIRM_SECONDS", item.url, item.status)
        self._event(item, host, reply)
        return item

    def _check_only(self, item: PageItem, outcome: str) -> None:
        """A fetch that lands no observation, logged as a check with ``outcome``."""
        billed = item.fetch.get("billed")
        event = EventArgs(site=item.site or self.site_name, page_type=item.page_type or "",
                          url=item.url, status=item.status, wire_bytes=item.fetch.get("wire_bytes"))
        self.runtime.batch.land(_host(item.url), check_op(
            item.canonical_url or item.url, time=item.fetch_time, outcome=outcome,
            billed=float(billed) if billed is not None else None, event=event))

    def _extraction_error(self, item: PageItem) -> PageItem:
        """Typed fields that did not parse: nothing lands (a missing value is no change), each
        field counted, the first time per field logged."""
        item.change = "error"
        self._count(item)
        page_type = item.page_type or "none"
        self.stats.inc_value("webcrawl/extract/errors")
        for name, text in item.extraction_errors.items():
            self.stats.inc_value(f"webcrawl/extract/errors/{page_type}/{name}")
            if (page_type, name) not in self._warned_fields:
                self._warned_fields.add((page_type, name))
                logger.warning("Field %r of page type %r did not parse (%r on %s): the page's "
                               "observation is skipped, not taken for a change; later failures "
                               "of this field are counted in webcrawl/extract/errors/%s/%s",
                               name, page_type, text, item.url, page_type, name)
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
