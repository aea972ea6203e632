"""The local copy in a database, written by every crawl process off the reactor thread.

Each crawl process runs one :class:`~webcrawl.database.DatabaseWriter` in a thread of its own:
it takes batches of the change events and checks the crawl state records (every process's, as
members of one consumer group), applies them to the database and acknowledges them; the reactor
never waits for it. The database is ``WEBCRAWL_DATABASE_URL``: ``postgresql://...``, or
``sqlite:///path`` / a path; by default SQLite at ``<WEBCRAWL_DATA_DIR>/webcrawl.db``, which
several processes of one machine share (docs/database.md).

At start-up the database is opened and its schema brought up to date: a database newer than this
webcrawl, or a URL of the wrong kind, stops the crawl before its first request with one line. A
database that does not answer then is no reason to stop: the writer tries again while the crawl
runs (the crawl state keeps what it has not written). At close the writer drains what the crawl
left (at most ``WEBCRAWL_DATABASE_DRAIN_SECONDS``, 10).

Settings: ``WEBCRAWL_DATABASE_ENABLED`` (True), ``WEBCRAWL_DATABASE_URL``,
``WEBCRAWL_DATABASE_BATCH`` (500 entries of each record a transaction),
``WEBCRAWL_DATABASE_CLAIM_SECONDS`` (60: entries a writer took and did not acknowledge in that time,
its process dead, are taken over by another),
``WEBCRAWL_DATABASE_CHECKS_RETENTION_DAYS`` (30), ``WEBCRAWL_DATABASE_CHECKS_KEPT`` (1,000,000 a
shard of the crawl state). Stats: ``webcrawl/database/events``, ``.../checks``, ``.../batches``,
``.../failures``, ``.../rolled_up``.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import create_looping_call

from webcrawl.database import DatabaseUnavailable, DatabaseWriter, migrate, open_database
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.streams import ShardStream

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

__all__ = ["DatabaseExtension", "database_url"]

STATS = "webcrawl/database/"


def database_url(settings: Any, data_dir: str | Path) -> str:
    """``WEBCRAWL_DATABASE_URL``, or the embedded default: SQLite in the data folder."""
    return settings.get("WEBCRAWL_DATABASE_URL") or str(Path(data_dir) / "webcrawl.db")


class DatabaseExtension:
    """Runs the database writer of this process (module docstring)."""

    def __init__(self, writer: DatabaseWriter, stats: StatsCollector, *,
                 drain_seconds: float = 10.0) -> None:
        self.writer = writer
        self.stats = stats
        self.drain_seconds = drain_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop = create_looping_call(self._publish)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        runtime = CrawlRuntime.of(crawler)
        if not runtime.config.database:
            raise NotConfigured("no database: set WEBCRAWL_DATABASE_ENABLED = True")
        url = database_url(settings, runtime.config.data_dir)
        try:
            db = open_database(url)
        except DatabaseUnavailable as exc:
            raise ValueError(f"WEBCRAWL_DATABASE_URL: {exc}") from None
        try:
            migrate(db)  # a newer schema stops the crawl here, with its one line
        except DatabaseUnavailable as exc:
            logger.warning("The database does not answer at start (%s): the crawl goes on, and its "
                           "writer tries again", exc)
        days = settings.getfloat("WEBCRAWL_DATABASE_CHECKS_RETENTION_DAYS", 30.0)
        if not days > 0:
            raise ValueError(f"WEBCRAWL_DATABASE_CHECKS_RETENTION_DAYS={days!r}: expected days > 0")
        writer = DatabaseWriter(db, runtime.events, ShardStream(runtime.client, runtime.layout, "checks"),
                                consumer=runtime.owner,
                                batch=settings.getint("WEBCRAWL_DATABASE_BATCH", 500),
                                claim_after=settings.getfloat("WEBCRAWL_DATABASE_CLAIM_SECONDS", 60.0),
                                checks_retention=days * 86_400.0)
        assert crawler.stats is not None
        ext = cls(writer, crawler.stats,
                  drain_seconds=settings.getfloat("WEBCRAWL_DATABASE_DRAIN_SECONDS", 10.0))
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        # The scheduler has flushed the last landings by then; the crawl state is still there.
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self) -> None:
        self._thread = threading.Thread(target=self.writer.run, args=(self._stop,),
                                        kwargs={"drain_seconds": self.drain_seconds},
                                        name="webcrawl-database", daemon=True)
        self._thread.start()
        self._loop.start(5.0, now=False)

    def _publish(self) -> None:
        counts = self.writer.counts
        for name in ("events", "checks", "batches", "failures", "rolled_up"):
            self.stats.set_value(STATS + name, getattr(counts, name))

    def spider_closed(self) -> None:
        if self._loop.running:
            self._loop.stop()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.drain_seconds + 5.0)
        self._publish()
        self.writer.db.close()
