"""The bodies of changed pages, kept for the record-hash pipeline before it lands their events.

:class:`BodyKeeper` appends a page's body (at most ``WEBCRAWL_BODY_STORE_MAX_BYTES``: a longer one is
cut there and counted) to the site's store, ``<WEBCRAWL_DATA_DIR>/<site>/bodies/``
(:class:`webcrawl.store.SiteBodyStore`: snappy, framed, rotating segments, one writer folder per
process, so every crawl process on a machine stores its bodies), under the page's canonical URL.
The pointer it returns names the machine (``WEBCRAWL_MACHINE_NAME``, the host name by default)
and the writer folder; the landing records it in the page's change event.

Whether to store is decided before the landing, from what the page's record said when its
revisit was popped (``meta["webcrawl_page_stats"]``), following ``WEBCRAWL_BODY_STORE_CHANGE``:

- ``record`` (default): the record hash differs from the page's (or the page is not known to
  this fetch: a new page, a page reached by a move);
- ``body``: the body's BLAKE2b differs from that of the page's last stored body (noise included:
  every load of a noisy page is stored).

A body not stored then is stored when the landing asks for it (:meth:`BodyKeeper.store`): so a
change event is never recorded without its body. The record's content hash (record mode)
or the body hash (body mode) goes in the stored record's header.

Stats: ``webcrawl/bodies/stored``, ``webcrawl/bodies/stored_bytes`` (uncompressed),
``webcrawl/bodies/disk_bytes`` (framed and compressed), ``webcrawl/bodies/skipped`` (unchanged),
``webcrawl/bodies/asked`` (stored when a landing found an event the pop did not foresee),
``webcrawl/bodies/truncated``, ``webcrawl/bodies/errors`` and ``webcrawl/bodies/errors/{kind}``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from webcrawl.store import FSYNC_POLICIES, SiteBodyStore, body_hash, machine_name

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from webcrawl.items import PageItem
    from webcrawl.runtime import CrawlRuntime

logger = logging.getLogger(__name__)

__all__ = ["CHANGE_MODES", "BodyKeeper"]

CHANGE_MODES = ("record", "body")
STATS = "webcrawl/bodies/"


class BodyKeeper:
    """Store the bodies of changed pages (module docstring)."""

    def __init__(self, stats: StatsCollector, data_dir: str | Path, *, change: str = "record",
                 max_bytes: int = 8 * 1024 * 1024, segment_bytes: int = 64 * 1024 * 1024,
                 fsync: str = "batch", machine: str | None = None) -> None:
        if change not in CHANGE_MODES:
            raise ValueError(f"WEBCRAWL_BODY_STORE_CHANGE={change!r}: expected one of {CHANGE_MODES}")
        if max_bytes < 0:
            raise ValueError(f"WEBCRAWL_BODY_STORE_MAX_BYTES={max_bytes!r}: expected >= 0")
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"WEBCRAWL_BODY_STORE_FSYNC={fsync!r}: expected one of {FSYNC_POLICIES}")
        if not 1 <= segment_bytes <= 2**32:
            raise ValueError(f"WEBCRAWL_BODY_STORE_SEGMENT_MB: {segment_bytes} bytes is out of 1 B..4 GiB")
        try:
            self.machine = machine_name(machine)
        except ValueError as exc:
            raise ValueError(f"WEBCRAWL_MACHINE_NAME: {exc}") from None
        self.stats = stats
        self.data_dir = Path(data_dir)
        self.change = change
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.writers: dict[str, SiteBodyStore] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler, runtime: CrawlRuntime) -> BodyKeeper | None:
        """The keeper of the crawl's settings; None when ``WEBCRAWL_BODY_STORE_ENABLED`` is off."""
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_BODY_STORE_ENABLED", True):
            return None
        assert crawler.stats is not None
        segment_mb = settings.getfloat("WEBCRAWL_BODY_STORE_SEGMENT_MB", 64.0)
        return cls(crawler.stats, runtime.config.data_dir,
                   change=settings.get("WEBCRAWL_BODY_STORE_CHANGE", "record"),
                   max_bytes=settings.getint("WEBCRAWL_BODY_STORE_MAX_BYTES", 8 * 1024 * 1024),
                   segment_bytes=int(segment_mb * 1024 * 1024),
                   fsync=settings.get("WEBCRAWL_BODY_STORE_FSYNC", "batch"),
                   machine=settings.get("WEBCRAWL_MACHINE_NAME") or None)

    def _writer(self, site: str) -> SiteBodyStore:
        writer = self.writers.get(site)
        if writer is None:
            writer = SiteBodyStore.open(self.data_dir, site, machine=self.machine,
                                        segment_bytes=self.segment_bytes, fsync=self.fsync)
            found = writer.recovery
            if found.torn_bytes or found.corrupt:
                logger.warning("body store %s: cut a torn tail of %d bytes, skipped %d corrupt ranges "
                               "at open", writer.writer_folder, found.torn_bytes, len(found.corrupt))
            self.writers[site] = writer
        return writer

    def _error(self, kind: str) -> None:
        self.stats.inc_value(STATS + "errors")
        self.stats.inc_value(STATS + "errors/" + kind)

    def _body(self, item: PageItem) -> bytes:
        if len(item.body) > self.max_bytes:
            self.stats.inc_value(STATS + "truncated")
            return item.body[: self.max_bytes]
        return item.body

    def before(self, item: PageItem) -> tuple[str, bytes] | None:
        """Store the body now if the item looks changed (module docstring): ``(pointer, first 8
        bytes of the body's hash)``, or None when it was not stored."""
        body = self._body(item)
        digest = body_hash(body)
        known = (item.fetch.get("page_stats") or {}) if not item.moved_from else {}
        if self.change == "record":
            previous, current = known.get("hash8"), (item.content_hash or "")[:16]
        else:
            previous, current = known.get("body8"), digest[:16]
        if previous is not None and previous == current:
            self.stats.inc_value(STATS + "skipped")
            return None
        return self._store(item, body, digest)

    def store(self, item: PageItem) -> tuple[str, bytes] | None:
        """Store the body now (the landing found an event :meth:`before` did not foresee)."""
        body = self._body(item)
        return self._store(item, body, body_hash(body))

    def _store(self, item: PageItem, body: bytes, digest: str) -> tuple[str, bytes] | None:
        key = item.canonical_url or item.url
        writer = self._writer(item.site)
        content_hash = item.content_hash if self.change == "record" and item.content_hash else digest
        headers = [(k, v) for k, v in item.headers.items() if k.lower() != "content-type"]
        content_type = next((v for k, v in item.headers.items() if k.lower() == "content-type"), "")
        before = writer.bytes_written
        try:
            pointer = writer.append(key, body, fetch_time=item.fetch_time, status=item.status,
                                    content_hash=content_hash, content_type=content_type[:255],
                                    headers=headers)
        except (OSError, ValueError) as exc:
            logger.error("body store: could not store %s: %s", key, exc)
            self._error(type(exc).__name__)
            return None
        self.stats.inc_value(STATS + "stored")
        self.stats.inc_value(STATS + "stored_bytes", len(body))
        self.stats.inc_value(STATS + "disk_bytes", writer.bytes_written - before)
        return str(pointer), bytes.fromhex(digest[:16])

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        self.writers.clear()
