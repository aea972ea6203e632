"""The body-store pipeline: keep a page's body when its content changed.

Placed after :class:`~webcrawl.pipelines.recordhash.RecordHashPipeline`. For each
:class:`~webcrawl.items.PageItem` whose content changed, appends the body (at most
``WEBCRAWL_BODY_STORE_MAX_BYTES``: a longer one is cut there and counted) to the site's store,
``<WEBCRAWL_DATA_DIR>/<site>/bodies/`` (:class:`webcrawl.store.BodyWriter`: snappy, framed,
rotating segments), under the page's canonical URL, and points the page's entry in the crawl
state at it (land operation "B", with the turn's write batch).

"Changed" follows ``WEBCRAWL_BODY_STORE_CHANGE``: ``record`` (default) stores when the record hash
pipeline marked the item new or changed; ``body`` stores when the body's BLAKE2b differs from that
of the last stored body (noise included: every load of a noisy page is stored). The record's
content hash (record mode) or the body hash (body mode) goes in the stored record's header.

One writer per site and process, opened on the site's first body (recovering a torn tail left by
a crash; what it found is logged) and closed with the spider. A store locked by another process
is reported once and left alone (``webcrawl/bodies/errors/locked``); the crawl goes on.

Stats: ``webcrawl/bodies/stored``, ``webcrawl/bodies/stored_bytes`` (uncompressed),
``webcrawl/bodies/disk_bytes`` (framed and compressed), ``webcrawl/bodies/skipped`` (unchanged),
``webcrawl/bodies/truncated``, ``webcrawl/bodies/errors`` and ``webcrawl/bodies/errors/{kind}``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import urlsplit
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from webcrawl.items import PageItem
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.pagestore import body_op
from webcrawl.store import FSYNC_POLICIES, BodyWriter, StoreLockedError, body_hash

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

__all__ = ["CHANGE_MODES", "BodyStorePipeline", "bodies_folder"]

CHANGE_MODES = ("record", "body")
STATS = "webcrawl/bodies/"


def bodies_folder(data_dir: str | Path, site: str) -> Path:
    """Where a site's bodies live: ``<data dir>/<site>/bodies``."""
    if not site or "/" in site or site in (".", ".."):
        raise ValueError(f"site name {site!r} cannot name a folder")
    return Path(data_dir) / site / "bodies"


class BodyStorePipeline:
    """Store changed bodies and point the page history at them; see the module docstring."""

    def __init__(self, runtime: CrawlRuntime, stats: StatsCollector, data_dir: str | Path, *,
                 change: str = "record", max_bytes: int = 8 * 1024 * 1024,
                 segment_bytes: int = 64 * 1024 * 1024, fsync: str = "batch") -> None:
        if change not in CHANGE_MODES:
            raise ValueError(f"WEBCRAWL_BODY_STORE_CHANGE={change!r}: expected one of {CHANGE_MODES}")
        if max_bytes < 0:
            raise ValueError(f"WEBCRAWL_BODY_STORE_MAX_BYTES={max_bytes!r}: expected >= 0")
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"WEBCRAWL_BODY_STORE_FSYNC={fsync!r}: expected one of {FSYNC_POLICIES}")
        if not 1 <= segment_bytes <= 2**32:
            raise ValueError(f"WEBCRAWL_BODY_STORE_SEGMENT_MB: {segment_bytes} bytes is out of 1 B..4 GiB")
        self.runtime = runtime
        self.stats = stats
        self.data_dir = Path(data_dir)
        self.change = change
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.writers: dict[str, BodyWriter | None] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_BODY_STORE_ENABLED", True):
            raise NotConfigured("bodies are not stored: set WEBCRAWL_BODY_STORE_ENABLED = True")
        assert crawler.stats is not None and crawler.spider is not None
        runtime = CrawlRuntime.of(crawler)
        segment_mb = settings.getfloat("WEBCRAWL_BODY_STORE_SEGMENT_MB", 64.0)
        return cls(
            runtime, crawler.stats, runtime.config.data_dir,
            change=settings.get("WEBCRAWL_BODY_STORE_CHANGE", "record"),
            max_bytes=settings.getint("WEBCRAWL_BODY_STORE_MAX_BYTES", 8 * 1024 * 1024),
            segment_bytes=int(segment_mb * 1024 * 1024),
            fsync=settings.get("WEBCRAWL_BODY_STORE_FSYNC", "batch"),
        )

    def _writer(self, site: str) -> BodyWriter | None:
        if site in self.writers:
            return self.writers[site]
        folder = bodies_folder(self.data_dir, site)
        writer: BodyWriter | None
        try:
            writer = BodyWriter(folder, segment_bytes=self.segment_bytes, fsync=self.fsync)
        except StoreLockedError:
            logger.error("body store %s is in use by another process; bodies of %s are not stored "
                         "by this one", folder, site)
            self._error("locked")
            writer = None
        else:
            found = writer.recovery
            if found.torn_bytes or found.corrupt:
                logger.warning("body store %s: cut a torn tail of %d bytes, skipped %d corrupt ranges "
                               "at open", folder, found.torn_bytes, len(found.corrupt))
        self.writers[site] = writer
        return writer

    def _error(self, kind: str) -> None:
        self.stats.inc_value(STATS + "errors")
        self.stats.inc_value(STATS + "errors/" + kind)

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem):
            return item
        body, key = item.body, item.canonical_url or item.url
        host = (urlsplit(item.url).hostname or "").lower()
        if len(body) > self.max_bytes:
            body = body[: self.max_bytes]
            self.stats.inc_value(STATS + "truncated")
        digest = body_hash(body)
        if self.change == "record":
            changed = item.change in ("new", "changed")
        else:
            stored = self.runtime.pages.body(key, host)
            changed = stored is None or digest != stored[1]
        if not changed:
            self.stats.inc_value(STATS + "skipped")
            return item
        writer = self._writer(item.site)
        if writer is None:
            return item
        content_hash = item.content_hash if self.change == "record" and item.content_hash else digest
        headers = [(k, v) for k, v in item.headers.items() if k.lower() != "content-type"]
        content_type = next((v for k, v in item.headers.items() if k.lower() == "content-type"), "")
        before = writer.bytes_written
        try:
            pointer = writer.append(key, body, fetch_time=item.fetch_time,
                                    status=item.status, content_hash=content_hash,
                                    content_type=content_type[:255], headers=headers)
        except (OSError, ValueError) as exc:
            logger.error("body store: could not store %s: %s", key, exc)
            self._error(type(exc).__name__)
            return item
        self.runtime.batch.land(host, body_op(key, str(pointer), digest, item.fetch_time))
        self.stats.inc_value(STATS + "stored")
        self.stats.inc_value(STATS + "stored_bytes", len(body))
        self.stats.inc_value(STATS + "disk_bytes", writer.bytes_written - before)
        return item

    def close_spider(self) -> None:
        for writer in self.writers.values():
            if writer is not None:
                writer.close()
        self.writers.clear()
