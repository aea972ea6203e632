"""Known pages in Redis: their packed records (:mod:`webcrawl.state.records`) and validators, in
the ``pages`` and ``validators`` hashes of their host's shard. ``validators`` and ``records`` (the
typed pages' latest records) are keyed by :func:`page_key`, 8 bytes of the SHA-1 of the URL (the
URL itself is the key of ``pages``); crawls of the layouts before 4 keyed them by the URL, still
read where a page's key is missing.

Writes go through the land script (:mod:`webcrawl.state.batch`); this module reads, and builds
the arguments of the land operations about pages, so that their encoding lives in one place:

- :func:`observe_op`: a fetch's outcome (a whole response with its record hash, or a 304), with
  the :class:`EventArgs` its change event needs;
- :func:`gone_op`: a known page answered 404 or 410; :func:`give_up_op`: a moved page's history
  handed to another shard (docs/events.md has the lifecycle);
- :func:`interval_op`: the revisit interval the allocator gave a page (and optionally a due time);
- :func:`trigger_op`: a known change (a listing's summary or a trusted sitemap date): due now;
- :func:`lastmod_op`: a sitemap's date for a page; :func:`listing_op`: a listed item's summary.

The allocator follows the records through each shard's ``dirty`` set (:meth:`PageStore.take_dirty`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webcrawl.state import records
from webcrawl.state.records import Record

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout

__all__ = ["EventArgs", "PageStore", "check_op", "give_up_op", "gone_op", "hash_bytes",
           "interval_op", "lastmod_op", "listing_op", "observe_op", "page_key", "release_op",
           "trigger_op"]


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def hash_bytes(record_hash: str) -> bytes:
    """The 8 bytes of a record hash (hex) a page record keeps."""
    return bytes.fromhex(record_hash[:16].ljust(16, "0"))


@dataclass(frozen=True)
class EventArgs:
    """What a page operation needs, besides its verdict, to record the change event it may make
    (lua2/lifecycle.lua; docs/events.md): where the page is, its record (encoded by
    :func:`webcrawl.change.events.encode_record`; empty for a page without a page type and for a
    304), the stored body's pointer and the first 8 bytes of its hash, and, for a page a 301/308
    led to, the page it moved from (with that page's record and latest record when it lives in
    another shard: what a :func:`give_up_op` there answered); for a listing page or hub, the
    typed pages it shows."""

    site: str = ""
    page_type: str = ""
    url: str = ""
    status: int = 0
    record: str = ""
    volatile: tuple[str, ...] = ()
    pointer: str = ""
    body8: bytes = b""
    moved_from: str = ""
    moved_url: str = ""
    moved_host: str = ""
    inherit: bytes = b""
    inherit_record: bytes = b""
    #: For a listing page or hub: the typed pages it shows (kept for its next reading).
    links: tuple[str, ...] = ()
    #: The fetch's bytes on the wire (for the check log).
    wire_bytes: int | None = None

    def args(self) -> list[Any]:
        return [self.record, self.url, str(self.status), self.site, self.page_type,
                ",".join(self.volatile), self.pointer, self.body8, self.moved_from, self.moved_url,
                self.moved_host, self.inherit, self.inherit_record, "\n".join(self.links),
                "" if self.wire_bytes is None else str(int(self.wire_bytes))]


NO_EVENT = EventArgs()


def observe_op(url: str, *, full: bool, time: float, record_hash: str | None = None,
               validators: tuple[str | None, str | None] | None = None, type_id: int = 0,
               tier: int | None = None, sitemap: bool = False, hub: bool = False,
               change_age: float | None = None, billed: float | None = None,
               event: EventArgs = NO_EVENT) -> tuple[str, list[Any]]:
    """Land operation "O": a whole response (``full``, with its record hash) or a 304.
    ``validators`` (etag, last-modified) replace the stored ones when given. ``billed``: what
    the fetch cost (None for an observation that was no fetch of the page). ``sitemap``, ``hub``:
    the page is a sitemap, or a page without a page type read for the links it shows."""
    etag, modified = validators if validators is not None else (None, None)
    return "O", [url, "f" if full else "n", repr(float(time)),
                 hash_bytes(record_hash) if record_hash else b"", "1" if validators else "0",
                 etag or "", modified or "", type_id, -1 if tier is None else tier,
                 "s" if sitemap else ("h" if hub else "p"),
                 "" if change_age is None else repr(float(change_age)),
                 "" if billed is None else repr(float(billed)), *event.args()]


def gone_op(url: str, *, time: float, billed: float | None = None,
            event: EventArgs = NO_EVENT) -> tuple[str, list[Any]]:
    """Land operation "G": the known page ``url`` answered 404 or 410 (suspect, then removed)."""
    return "G", [url, repr(float(time)), "" if billed is None else repr(float(billed)),
                 *event.args()]


def check_op(url: str, *, time: float, outcome: str = "error", billed: float | None = None,
             event: EventArgs = NO_EVENT) -> tuple[str, list[Any]]:
    """Land operation "C": a fetch of the page ``url`` that lands no observation (``error``: an
    error answer, a timeout; ``redirected``: a redirect), logged as a check (``event`` says where:
    site, page type, URL as fetched, status)."""
    return "C", [url, repr(float(time)), outcome, "" if billed is None else repr(float(billed)),
                 *event.args()]


def give_up_op(url: str) -> tuple[str, list[Any]]:
    """Land operation "Y": the page ``url`` moved to a page of another shard; it is retired and
    its packed record and latest record are the answer (both empty when it was not known)."""
    return "Y", [url]


def interval_op(url: str, interval: float, due_at: float | None = None,
                follow: bool = False) -> tuple[str, list[Any]]:
    """Land operation "I": the page's revisit interval (0: none), a due time if not the last
    fetch + interval, and whether a known change makes it due at once."""
    return "I", [url, repr(float(interval)), "" if due_at is None else repr(float(due_at)),
                 1 if follow else 0]


def trigger_op(url: str) -> tuple[str, list[Any]]:
    return "T", [url]


def release_op(url: str, *, attempted: bool = False) -> tuple[str, list[Any]]:
    """Land operation "R": a popped revisit that landed no observation is scheduled again. One
    never tried (a lost lease) is due at its time, at once if that has passed; one that was tried
    (an error answer, a redirect, a 304 handed on to its verification) is due a whole interval
    from now, so an answer that lands nothing cannot bring its page back at every turn of its
    host."""
    return "R", [url, 1 if attempted else 0]


def lastmod_op(url: str, lastmod: float, read_at: float, mode: str) -> tuple[str, list[Any]]:
    return "M", [url, repr(float(lastmod)), repr(float(read_at)), mode]


def listing_op(url: str, summary_hash: str, listed_at: float) -> tuple[str, list[Any]]:
    return "L", [url, summary_hash, repr(float(listed_at))]


def page_key(url: str) -> bytes:
    """A page's field in ``validators`` and ``records``: 8 bytes of the SHA-1 of its URL (as the
    scripts' ``page_key`` makes it, lua2/common.lua)."""
    return hashlib.sha1(url.encode("utf-8", "surrogateescape")).digest()[:8]


class PageStore:
    """Read page records and validators of one crawl."""

    def __init__(self, client: Any, layout: CrawlLayout) -> None:
        self.client = client
        self.layout = layout

    def get(self, url: str, host: str) -> Record | None:
        raw = self.client.hget(self.layout.shard(host).pages, url)
        return records.unpack(raw) if raw else None

    def _page_value(self, key: str, url: str) -> Any:
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(key, page_key(url))
        pipe.hget(key, url)  # a crawl of the layout before
        raw, legacy = pipe.execute()
        return raw if raw is not None else legacy

    def validators(self, url: str, host: str) -> tuple[str | None, str | None]:
        raw = self._page_value(self.layout.shard(host).validators, url)
        if not raw:
            return None, None
        etag, _, modified = _text(raw).partition("\t")
        return etag or None, modified or None

    def latest_record(self, url: str, host: str) -> bytes | None:
        """The typed page's latest record as kept (encoded), ``None`` when none is."""
        raw = self._page_value(self.layout.shard(host).records, url)
        return raw or None

    def count(self) -> int:
        pipe = self.client.pipeline(transaction=False)
        for shard in self.layout.all_shards:
            pipe.hlen(shard.pages)
        return sum(int(n) for n in pipe.execute())

    def scan(self, index: int, batch: int = 2000) -> Iterator[tuple[str, bytes]]:
        """Every ``(url, packed record)`` of shard ``index`` (HSCAN: never blocks the server)."""
        key = self.layout.all_shards[index].pages
        for url, raw in self.client.hscan_iter(key, count=batch):
            yield _text(url), raw

    def take_dirty(self, index: int, count: int = 5000) -> list[str]:
        """Up to ``count`` pages of shard ``index`` whose records changed since the last call."""
        urls = self.client.spop(self.layout.all_shards[index].dirty, count) or []
        return [_text(u) for u in urls]

    def raw_records(self, index: int, urls: list[str]) -> list[bytes | None]:
        if not urls:
            return []
        return list(self.client.hmget(self.layout.all_shards[index].pages, urls))

    def listings(self, index: int, urls: list[str]) -> list[tuple[float, float] | None]:
        """What listings say of each page of shard ``index``: ``(since, listed)``, the time since
        which they have shown its current summary and when they last listed it; ``None`` for a
        page no listing shows."""
        if not urls:
            return []
        out: list[tuple[float, float] | None] = []
        for raw in self.client.hmget(self.layout.all_shards[index].listing, urls):
            parts = _text(raw).split(" ") if raw else []
            out.append((float(parts[1]), float(parts[2])) if len(parts) == 3 else None)
        return out
