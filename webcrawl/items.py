"""The item each fetched page becomes: the contract between the spider and the pipelines.

The spider fills what it fetched and extracted; the record-hash pipeline fills ``content_hash``
and ``change``; the body store uses ``body`` and ``headers``. Only the fields in
:data:`EXPORTED_FIELDS` reach feed exports (``FEED_EXPORT_FIELDS``): bodies and headers are for the
local store, never for the feed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Change = Literal["new", "changed", "unchanged"]

EXPORTED_FIELDS = [
    "url", "canonical_url", "site", "page_type", "status", "fetch_time", "record",
    "content_hash", "change",
]


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


@dataclass
class ListingItem:
    """One item listed on a listing page, as the listing showed it.

    ``url`` is the listing page's URL (as fetched), ``item_url`` the listed item's canonical
    absolute URL, ``summary`` the listing rule's summary fields (a later fetch of the item is worth
    making only when they changed). ``fetch_time`` is seconds since the epoch. The record-hash and
    body-store pipelines pass it through untouched.
    """

    url: str
    item_url: str
    summary: dict[str, Any]
    site: str
    fetch_time: float
