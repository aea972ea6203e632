"""The items of a crawl: the contract between the spider and the pipelines, and what reaches feeds.

The spider fills a :class:`PageItem` with what it fetched and extracted; the record-hash pipeline
fills ``content_hash``, ``change`` and, when the observation made a change event, ``event``; the
last pipeline hands that event on as a :class:`ChangeEvent`, the only item a feed export gets
(``FEED_EXPORT_FIELDS`` = :data:`EXPORTED_FIELDS`, the event contract of docs/events.md). Bodies
and headers are for the local store, never for the feed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from webcrawl.change.events import EVENT_FIELDS

#: The record-hash pipeline's verdicts: a record observed (new, changed, unchanged), a known page
#: answering 404/410 (suspect at the first, removed once confirmed, gone after), a page whose
#: extraction failed (error: nothing landed).
Change = Literal["new", "changed", "unchanged", "suspect", "removed", "gone", "error"]

EXPORTED_FIELDS = list(EVENT_FIELDS)


class ChangeEvent(dict):  # type: ignore[type-arg]
    """A change event as a feed item: a dict of exactly the contract's fields
    (:data:`EXPORTED_FIELDS`). ``verdict`` (not a key, never exported) is the record-hash
    pipeline's verdict on the fetch that made it, for the cycle's figures."""

    __slots__ = ("verdict",)

    def __init__(self, event: dict[str, Any], verdict: str | None) -> None:
        super().__init__(event)
        self.verdict = verdict


@dataclass
class PageItem:
    """One fetched page.

    ``record`` holds the page type's fields as extracted (volatile ones included: they are left out
    of the hash, not out of the output). ``fetch_time`` is seconds since the epoch (the crawl
    state's clock). ``lastmod``: the sitemap ``<lastmod>`` the request carried (seconds since the
    epoch), if any. ``fetch``: what the downloader middlewares noted about the fetch, for the
    pipelines (``billed``: its cost; ``conditional``: our validators went with it;
    ``verify_304``: the time of the 304 it verifies; ``page_stats``: the known page's statistics
    when it was popped). Neither is exported.

    A page without a page type is an item only as a hub (a seed, or a page linking pages that
    have one): its ``record`` is ``{"links": [...]}``, the typed pages it links, so it is read
    again as often as new pages appear there, and it makes no event. ``moved_from`` and
    ``moved_url``: the known page (canonical, and as fetched) whose 301/308 led here.
    ``extraction_errors``: typed fields whose text did not parse (field -> text); such a page
    lands no observation. ``links``: for a listing page or hub, the typed pages it shows (kept
    so its next reading can recheck those it stops showing). ``event``: the change event the
    observation recorded, if any.
    """

    url: str
    canonical_url: str
    site: str
    page_type: str | None
    status: int
    fetch_time: float
    record: dict[str, Any] = field(default_factory=dict)
    content_hash: str | None = None
    change: Change | None = None
    body: bytes = field(default=b"", repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    lastmod: float | None = None
    fetch: dict[str, Any] = field(default_factory=dict, repr=False)
    moved_from: str | None = None
    moved_url: str | None = None
    extraction_errors: dict[str, str] = field(default_factory=dict)
    links: tuple[str, ...] = ()
    #: A fetch that lands no observation but is logged as a check of the page fetched, with this
    #: outcome (where a known page's temporary redirect led: ``redirected``).
    check_only: str | None = None
    event: dict[str, Any] | None = None


@dataclass
class ListingItem:
    """One item listed on a listing page, as the listing showed it.

    ``url`` is the listing page's URL (as fetched), ``item_url`` the listed item's canonical
    absolute URL, ``summary`` the listing rule's summary fields (a later fetch of the item is worth
    making only when they changed). ``fetch_time`` is seconds since the epoch. The record-hash pipeline
    passes it through untouched; the listing pipeline reads it; no feed gets it.
    """

    url: str
    item_url: str
    summary: dict[str, Any]
    site: str
    fetch_time: float
