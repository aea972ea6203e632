"""The composition root of a crawl: one :class:`CrawlRuntime` per crawler owns the Redis client and
every store, and every webcrawl component asks it for what it needs.

    runtime = CrawlRuntime.of(crawler)        # in a component's from_crawler
    runtime.batch.land(host, finished_op(at))   # a write, sent with the turn's batch

Built on first use (after the spider exists: the crawl is named after it), it validates the
state settings (:class:`webcrawl.config.StateConfig`), connects to ``WEBCRAWL_REDIS_URL`` (a
single server or a Redis Cluster, told apart by the server) or starts the embedded redis-server,
loads the scripts, measures the offset to the server's clock, and wires the per-turn write batch
to the reactor. It closes last (``engine_stopped``): the batch is flushed, the embedded server is
stopped when this was its last user. Nothing else in webcrawl keeps per-crawler registries.

Failure: when Redis stops answering (a restart, a cluster failover), the crawl waits it out for
``WEBCRAWL_REDIS_OUTAGE_SECONDS`` (30): writes stay queued with their op ids and go again, nothing
is popped meanwhile. Past that, or on any other Redis error, :meth:`CrawlRuntime.fail` stops the
crawl with reason ``redis_unavailable`` and one message naming the server; what Redis already
holds is intact and the crawl resumes from it.
"""

from __future__ import annotations

import atexit
import gc
import logging
import math
import os
import time
import weakref
from functools import cached_property
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.asyncio import call_later

from webcrawl.change.trust import TrustPolicy
from webcrawl.config import StateConfig, positive_setting
from webcrawl.parse import Canonicalizer
from webcrawl.revisit import BillingModel, TrustTracker
from webcrawl.robots.cache import RobotsCache
from webcrawl.spend import SpendController
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.bucket import SpendBucket
from webcrawl.state.client import RoundTrips, connect, describe
from webcrawl.state.embedded import EmbeddedRedis
from webcrawl.state.eventlog import EventLog
from webcrawl.state.errors import TRANSIENT, StateError, is_connection_error
from webcrawl.state.hosts import HostStore
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.ledger import LedgerStore
from webcrawl.state.pagestore import PageStore
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.riders import Build, RidingClient
from webcrawl.state.robots import RobotsStore
from webcrawl.state.refused import DEFAULT_LIMIT
from webcrawl.state.scripts import MAX_OUTAGE_SECONDS, ScriptSet, op_ttl_for
from webcrawl.state.seen import BloomParams
from webcrawl.state.servertime import ServerClock
from webcrawl.state.types import TypeIds

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from webcrawl.sites import SiteConfig

__all__ = ["CrawlRuntime"]

logger = logging.getLogger(__name__)

_runtimes: weakref.WeakKeyDictionary[Crawler, CrawlRuntime] = weakref.WeakKeyDictionary()
# At exit, the interpreter's last garbage collections walk every object a crawl left (its
# modules, caches, parsed pages): a few hundred ms of a short crawl's wall time for nothing.
# Frozen objects are skipped by them; reference counting still releases what it releases.
atexit.register(gc.freeze)
#: Errors that a restart or a failover of the server explains: waited out for a while.
_TRANSIENT = TRANSIENT


class CrawlRuntime:
    """Everything the components of one crawler share (see the module docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        spider = crawler.spider
        self.spider_name = spider.name if spider is not None else settings["BOT_NAME"]
        self.site: SiteConfig | None = getattr(spider, "site", None)
        self.config = StateConfig.from_settings(settings, self.spider_name)
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.embedded: EmbeddedRedis | None = None
        url = self.config.redis_url
        if not url:
            self.embedded = EmbeddedRedis(self.config.data_dir)
            url = self.embedded.start()
        self.url = url
        self.description = describe(self.config.redis_url)
        client, self.round_trips, self.cluster = connect(url)
        self.client: Any = client
        self.layout = CrawlLayout(self.config.crawl_name, self._shards(client))
        self.outage_seconds = outage_seconds_of(settings)
        self.scripts = ScriptSet(client, op_ttl=op_ttl_for(self.outage_seconds))
        self.bloom = BloomParams(self.config.bloom_capacity_per_shard(self.layout.shards),
                                 self.config.bloom_error_rate)
        self.queue = CrawlQueue(client, self.scripts, self.layout,
                                cap=self.config.frontier_max_per_domain,
                                default_delay=self.config.domain_delay,
                                lease_seconds=self.config.lease_seconds,
                                refused_limit=refused_limit_of(settings))
        self.pages = PageStore(client, self.layout)
        self.events = EventLog(client, self.layout)
        self.sitemap_trust = TrustTracker(both_ways=True)
        self.hosts = HostStore(client, self.layout, default_delay=self.config.domain_delay,
                               sitemap_trust=self.sitemap_trust)
        self.ledger = LedgerStore(client, self.layout)
        self.bucket = SpendBucket(self.scripts, self.layout)
        self.types = TypeIds(client, self.layout)
        self.clock = ServerClock(client, skew=self.config.clock_skew)
        self.clock.measure()
        self.robots = RobotsCache(
            RobotsStore(client, lambda origin: self.layout.shard(_origin_host(origin)).robots(origin)),
            lru_size=settings.getint("WEBCRAWL_ROBOTS_LRU_SIZE", 1024),
            lru_seconds=settings.getfloat("WEBCRAWL_ROBOTS_LRU_SECONDS", 300.0), clock=self.clock)
        # The batch's pipelines also carry the pops and looks that must see its writes.
        self.riding = RidingClient(client)
        self.flush_seconds = flush_seconds(settings, self.config.domain_delay)
        self.batch = WriteBatch(
            self.riding, self.scripts, self.layout, self.queue,
            LandSettings(self.config.domain_delay, self.sitemap_trust.min_agreements,
                         self.sitemap_trust.max_disagreement_rate, self.sitemap_trust.memory,
                         events_retention_seconds=self.config.events_retention,
                         removal_confirm_seconds=self.config.removal_confirm,
                         removed_probe_seconds=self.config.removed_probe,
                         checks_kept=self.config.checks_kept if self.config.database else 0),
            bloom_slices=self.bloom.num_slices,
            schedule=lambda f: self._flush_soon())
        self._flush_call: Any = None
        self._flushed_at = -math.inf
        self.canonicalizer = Canonicalizer(cache_size=self.config.parse_cache_size)
        self.billing = self._billing()
        self.owner = f"{os.getpid():x}{os.urandom(4).hex()}"
        #: the cycle this process books into (set by the allocator when it starts or joins one)
        self.cycle: int | None = None
        self.failed = False
        self._closed = False
        self._outage_since: float | None = None
        self._published: dict[str, float] = {}
        # Reads about hosts during an outage keep what they knew rather than wait out a timeout
        # each (the reactor would stall for seconds per host); a failed read starts an outage.
        self.hosts.offline = lambda: self.failed or self._outage_since is not None
        self.hosts.on_error = self._read_failed
        self.hosts.due_now = self._flush_soon  # stale hosts are read with the next send behind
        crawler.signals.connect(self._publish_round_trips, signal=signals.spider_closed, weak=False)
        crawler.signals.connect(self.close, signal=signals.engine_stopped, weak=False)

    def _shards(self, client: Any) -> int:
        """The crawl's shard count: fixed when the crawl is first opened, checked after."""
        from webcrawl.state.layout import LAYOUT_VERSION

        wanted = self.config.shards_for(self.cluster)
        meta = CrawlLayout(self.config.crawl_name).meta
        pipe = client.pipeline(transaction=False)  # one round trip
        pipe.hsetnx(meta, "shards", wanted)
        pipe.hsetnx(meta, "layout", LAYOUT_VERSION)
        pipe.hget(meta, "shards")
        pipe.hget(meta, "layout")
        replies = pipe.execute()
        stored = int(replies[2] or wanted)
        layout = layout_version_of(self.config.crawl_name, replies[3])
        if layout < LAYOUT_VERSION:  # written by the version before: read as it is, then marked
            client.hset(meta, "layout", LAYOUT_VERSION)
        if self.config.shards is not None and stored != wanted:
            raise ValueError(
                f"WEBCRAWL_SHARDS={wanted} but crawl {self.config.crawl_name!r} was started with "
                f"{stored} shards: use {stored}, or clear the crawl (scrapy crawlstate --clear)")
        return stored

    @classmethod
    def of(cls, crawler: Crawler) -> CrawlRuntime:
        """The crawler's runtime, built on first use (call it from ``from_crawler`` or later)."""
        runtime = _runtimes.get(crawler)
        if runtime is None:
            runtime = _runtimes[crawler] = cls(crawler)
        return runtime

    # -- shared decisions ------------------------------------------------------------------------

    def _billing(self) -> BillingModel:
        raw = self.site.budget.billing if self.site is not None else self.crawler.settings.get(
            "WEBCRAWL_COST_BILLING", "bandwidth")
        try:
            return BillingModel(raw)
        except ValueError:
            raise ValueError(f"WEBCRAWL_COST_BILLING={raw!r}: expected one of "
                             f"{[b.value for b in BillingModel]}") from None

    def trust_policy(self) -> TrustPolicy:
        s = self.crawler.settings
        try:
            return TrustPolicy(
                earn_after=s.getint("WEBCRAWL_CONDITIONAL_EARN_AFTER", 3),
                ignore_limit=s.getint("WEBCRAWL_CONDITIONAL_IGNORE_LIMIT", 3),
                lie_limit=s.getint("WEBCRAWL_CONDITIONAL_LIE_LIMIT", 1),
                retry_seconds=s.getfloat("WEBCRAWL_CONDITIONAL_RETRY_SECONDS", 7 * 86_400.0),
                verify_share=s.getfloat("WEBCRAWL_CONDITIONAL_VERIFY_SHARE", 0.05))
        except ValueError as exc:
            raise ValueError(f"WEBCRAWL_CONDITIONAL_* settings out of range: {exc}") from None

    def canonical(self, url: str) -> str | None:
        return self.canonicalizer.canonical(url)

    def default_cost(self) -> float:
        """A fetch's cost before any was measured, in the site's unit."""
        if self.billing is BillingModel.BANDWIDTH:
            value = positive_setting(self.crawler.settings, "WEBCRAWL_COST_DEFAULT_BYTES", 50_000.0)
            return 50_000.0 if value is None else value
        return 1.0

    def continuous(self) -> bool:
        """Whether the crawl keeps running cycle after cycle (the site file's
        ``budget.continuous``, or ``WEBCRAWL_CYCLE_CONTINUOUS``)."""
        site = bool(self.site is not None and self.site.budget.continuous)
        return site or self.crawler.settings.getbool("WEBCRAWL_CYCLE_CONTINUOUS", False)

    def published(self) -> dict[str, float]:
        """What the allocator last published (``alloc``: typical cost, known pages, backlog, mean
        cost per page type as ``cost:<type>``)."""
        if self.failed or self.in_outage:
            return self._published
        try:
            self._published = self.parse_published(self.client.hgetall(self.layout.alloc))
        except _TRANSIENT as exc:
            self.fail(exc)  # an outage: what was read last serves meanwhile
        return self._published

    @staticmethod
    def parse_published(raw: dict[Any, Any]) -> dict[str, float]:
        """:meth:`published` from the raw ``alloc`` hash."""
        out: dict[str, float] = {}
        for k, v in raw.items():
            try:
                out[k.decode() if isinstance(k, bytes) else k] = float(v)
            except ValueError:
                continue
        return out

    @cached_property
    def spend(self) -> SpendController:
        """The process's spend controller (:mod:`webcrawl.spend`)."""
        return SpendController.from_runtime(self)

    # -- writes and failure ----------------------------------------------------------------------

    def _flush_soon(self) -> None:
        # At the next turn when the last flush is a while ago (a quiet crawl waits for nothing),
        # else once flush_seconds after it: a busy crawl sends a batch at most that often. One
        # timer at a time: a flush carried by a pop in between leaves it pending.
        if self._flush_call is None:
            wait = self._flushed_at + self.flush_seconds - time.monotonic()
            self._flush_call = call_later(max(wait, 0.0), self._timed_flush)

    def _timed_flush(self) -> None:
        self._flush_call = None
        if self.failed or self.batch.sending:
            return  # the answer of the send under way arms the next one
        # Behind: the reactor goes on while Redis answers. A pop or a look that must see these
        # writes waits for the answer first (the batch's flush settles it).
        self._flushed_at = time.monotonic()
        builds, read = self._host_reads()
        self.batch.send_behind(_call_from_thread,
                               lambda error, replies: self._sent_behind(error, replies, read),
                               builds)

    def _host_reads(self) -> tuple[list[Build], Callable[[list[list[Any]] | None], None]]:
        """The reads of hosts answered stale (:class:`HostStore`), to ride a send behind, and
        what takes their replies (the riders' replies, these last; None: the send failed)."""
        hosts = self.hosts.take_due()
        if not hosts:
            return [], lambda replies: None

        def read(replies: list[list[Any]] | None) -> None:
            if replies is None:
                self.hosts.unread(hosts)  # still stale: due again when next asked
            else:
                self.hosts.refreshed(hosts, replies[-1])

        return [self.hosts.refresh_build(hosts)], read

    def _sent_behind(self, error: StateError | None, replies: list[list[Any]],
                     read: Callable[[list[list[Any]] | None], None]) -> None:
        if error is None:
            self.answered()
            read(replies)
        else:
            read(None)
            self.fail(error)
        if not self.failed and (len(self.batch) or self.hosts.due):
            self._flush_soon()

    def carry_behind(self, builds: list[Build], answered: Callable[[list[list[Any]]], None],
                     failed: Callable[[StateError], None]) -> bool:
        """:meth:`carry` without waiting: the batch and ``builds`` go now from the batch's
        thread, and ``answered`` gets each one's replies on the reactor (``failed`` the error
        instead, after :meth:`fail` heard it). False when nothing went: a send is under way
        (its answer comes first), or the crawl failed."""
        if self.failed or self.batch.sending:
            return False
        self._flushed_at = time.monotonic()
        own = len(builds)
        extra, read = self._host_reads()

        def done(error: StateError | None, replies: list[list[Any]]) -> None:
            self._sent_behind(error, replies, read)
            if error is None:
                answered(replies[:own])
            else:
                failed(error)

        return self.batch.send_behind(_call_from_thread, done, [*builds, *extra])

    def _flush(self) -> None:
        if self.failed:
            return
        self._flushed_at = time.monotonic()
        try:
            sent = self.batch.flush()
        except StateError as exc:
            self.fail(exc)
        else:
            if sent:  # only an answer ends an outage, not a batch with nothing to send
                self.answered()

    def flush(self) -> None:
        """Send the batch now (before a read that must see it)."""
        self._flush()

    def carry(self, *builds: Build) -> list[list[Any]]:
        """Send the batch now with the commands each of ``builds`` queues on a pipeline, in one
        round trip (:mod:`webcrawl.state.riders`); returns each one's replies. Raises
        :data:`StateError` (the batch keeps its calls for the next flush; the caller decides
        whether to ask again and calls :meth:`fail`)."""
        self._flushed_at = time.monotonic()
        # The batch's flush answers a send under way behind first, then carries the riders.
        replies = self.riding.carry(list(builds), self.batch.flush)
        self.answered()
        return replies

    def _read_failed(self, exc: Exception) -> None:
        if isinstance(exc, _TRANSIENT):
            self.fail(exc)

    @property
    def in_outage(self) -> bool:
        return self._outage_since is not None

    def answered(self) -> None:
        """Redis answered: an outage, if one was under way, is over."""
        if self._outage_since is not None:
            logger.warning("%s answers again after %.1f s; the crawl goes on", self.description,
                           time.monotonic() - self._outage_since)
            self._outage_since = None

    def fail(self, exc: Exception) -> None:
        """Redis failed. A connection error, a timeout or a cluster failover is waited out for
        ``WEBCRAWL_REDIS_OUTAGE_SECONDS`` (writes stay queued, with their op ids, and go again;
        nothing is popped meanwhile); past that, or on any other error, the crawl stops once,
        with one message (see the module docstring)."""
        if self.failed:
            return
        if isinstance(exc, _TRANSIENT):
            now = time.monotonic()
            if self._outage_since is None:
                self._outage_since = now
                logger.warning("%s is not answering (%s); retrying for up to %.0f s",
                               self.description, exc, self.outage_seconds)
            if now - self._outage_since < self.outage_seconds:
                return
        self.failed = True
        problem = ("stopped answering" if is_connection_error(exc)
                   else "refused a command")
        logger.error("%s %s (%s). Stopping the crawl: what Redis already holds is intact, requests "
                     "in flight are leased and come back when the crawl resumes.",
                     self.description, problem, exc)
        engine = self.crawler.engine
        if engine is not None:
            from scrapy.utils.defer import deferred_from_coro

            deferred_from_coro(engine.close_spider_async(reason="redis_unavailable"))

    def _publish_round_trips(self) -> None:
        # Before the stats are dumped (they are at spider close); again at close, with the last.
        self.stats.set_value("webcrawl/redis/round_trips", self.round_trips.count)

    def close(self) -> None:
        """Last receiver of ``engine_stopped``: flush, publish figures, let go of the server."""
        if self._closed:
            return
        self._closed = True
        self._flush()
        self.batch.close()
        self.stats.set_value("webcrawl/redis/round_trips", self.round_trips.count)
        _runtimes.pop(self.crawler, None)
        if self.embedded is not None and self.config.shutdown_embedded:
            self.embedded.release(self.client)
        try:
            self.client.close()
        except StateError:
            pass


#: Longest a write waits for the batch's next flush. Pops and looks carry the batch sooner (they
#: must see it); this bounds how late other processes see this one's writes, and how long a
#: pipeline awaiting a verdict waits. Kept well under a host's delay: a finished fetch moves its
#: host's turn, which other processes must see before that turn comes.
FLUSH_SECONDS = 0.05


def outage_seconds_of(settings: Any) -> float:
    """``WEBCRAWL_REDIS_OUTAGE_SECONDS``: 0 to :data:`MAX_OUTAGE_SECONDS` (the script answers that
    make retries safe are kept that long, a minute more)."""
    outage = settings.getfloat("WEBCRAWL_REDIS_OUTAGE_SECONDS", 30.0)
    if not 0 <= outage <= MAX_OUTAGE_SECONDS:
        raise ValueError(f"WEBCRAWL_REDIS_OUTAGE_SECONDS={outage!r}: expected 0 to "
                         f"{MAX_OUTAGE_SECONDS:g} seconds (retries stay safe that long)")
    return outage


#: The oldest crawl-state layout this version reads as it is (frontier members without seen
#: offsets, page records without state and body fields, no ``refused:at``).
OLDEST_LAYOUT_READ = 2


def layout_version_of(crawl: str, raw: bytes | str | None) -> int:
    """The layout version a crawl's state was written with; :class:`LayoutMismatch` (one line)
    when this version of webcrawl cannot read it."""
    from webcrawl.state.layout import LAYOUT_VERSION, LayoutMismatch

    text = raw.decode() if isinstance(raw, bytes) else raw
    version = int(text) if text is not None and text.isdigit() else -1
    if not OLDEST_LAYOUT_READ <= version <= LAYOUT_VERSION:
        raise LayoutMismatch(
            f"crawl {crawl!r} in Redis has state layout {text!r}; this webcrawl reads layouts "
            f"{OLDEST_LAYOUT_READ} to {LAYOUT_VERSION}: run the webcrawl that wrote it, or clear "
            f"the crawl (scrapy crawlstate {crawl} --clear)")
    return version


def refused_limit_of(settings: Any) -> int:
    """``WEBCRAWL_REFUSED_LIMIT``: refused or evicted URLs noted per shard, 0 or more."""
    raw = settings.get("WEBCRAWL_REFUSED_LIMIT", DEFAULT_LIMIT)
    try:
        limit = int(raw)
    except (TypeError, ValueError):
        limit = -1
    if limit < 0:
        raise ValueError(f"WEBCRAWL_REFUSED_LIMIT={raw!r}: expected a whole number, 0 or more")
    return limit


def flush_seconds(settings: Any, delay: float) -> float:
    """``WEBCRAWL_FLUSH_SECONDS`` (default :data:`FLUSH_SECONDS`), at most a tenth of the delay."""
    raw = settings.get("WEBCRAWL_FLUSH_SECONDS", FLUSH_SECONDS)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0 <= value <= 1:
        raise ValueError(f"WEBCRAWL_FLUSH_SECONDS={raw!r}: expected seconds between 0 and 1")
    return min(value, delay / 10) if delay > 0 else value


def _call_from_thread(f: Callable[[], None]) -> None:
    from twisted.internet import reactor

    reactor.callFromThread(f)  # type: ignore[attr-defined]


def _origin_host(origin: str) -> str:
    """``host`` of ``scheme://host:port`` (IPv6 in brackets kept as the host)."""
    authority = origin.partition("://")[2]
    return (authority.rpartition(":")[0] or authority).strip("[]")
