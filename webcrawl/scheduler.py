"""ReadyQueueScheduler: Scrapy's scheduler interface over per-domain frontiers in Redis.

Contract (see :mod:`webcrawl.state.frontier` for the Redis side):

- ``enqueue_request`` never touches Redis. It drops URLs this process already knows are seen (a
  URL once seen stays seen, so that cache is never stale), serialises the request as JSON and
  buffers it; the buffer is pushed in one round trip per reactor turn, where the shared bloom filter
  decides, atomically, which URLs are new. A request that cannot be serialised is logged once,
  counted (``scheduler/unserializable``) and dropped.
- ``next_request`` pops in one atomic step the best request of the domain whose next-allowed time
  came first and sets that domain's next-allowed time to now + its delay: every process sharing the
  crawl obeys each domain's delay. When requests are queued but no domain is ready it returns None
  without asking Redis again, and wakes the engine at the earliest ready time.
- A popped request is leased. The lease is released once the engine has finished with the request
  (downloaded, parsed, its children handed to this scheduler and pushed first), renewed while the
  request is in progress, and taken back into its frontier by any process once it expires: a crash
  loses nothing, and refetches at most what was in flight.
- ``has_pending_requests`` is true while anything is queued or leased anywhere in the crawl, so a
  process does not finish while another one may still produce work.
- Closing never deletes shared state; ``WEBCRAWL_RESET`` or ``scrapy crawlstate --clear`` does.
- If Redis goes away the crawl stops with reason ``redis_unavailable`` and a message naming the
  server; what Redis already holds is intact and the crawl resumes from it.

Redis round trips in the reactor, all measured by ``scheduler/redis/calls``: one per popped
request (it must be atomic with the dispatch for politeness), one per reactor turn that enqueued
something, one per maintenance tick.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING

import redis
from scrapy import signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.asyncio import call_later, create_looping_call
from scrapy.utils.httpobj import urlparse_cached
from w3lib.url import canonicalize_url

from webcrawl.clock import Clock, SystemClock
from webcrawl.config import StateConfig
from webcrawl.context import crawl_context
from webcrawl.requestcodec import UnserializableRequest, decode, encode
from webcrawl.state.connection import describe, url_for
from webcrawl.state.frontier import EVICTED, EXCLUDED, FILTERED, Counts, Entry, Frontier
from webcrawl.state.seen import BloomParams

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from typing_extensions import Self

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.25
MAX_BATCH = 1000


class ReadyQueueScheduler(BaseScheduler):
    """Per-domain frontiers and a ready queue of domains in Redis, shared by every process of a
    crawl (see the module docstring for the contract)."""

    def __init__(self, frontier: Frontier, *, stats: StatsCollector, crawler: Crawler | None = None,
                 clock: Clock | None = None, seen_cache_size: int = 200_000, reset: bool = False,
                 redis_description: str = "Redis") -> None:
        self.frontier = frontier
        self.stats = stats
        self.crawler = crawler
        self.clock = clock or SystemClock()
        self.seen_cache_size = seen_cache_size
        self.reset = reset
        self.redis_description = redis_description
        self.spider: Spider | None = None
        self._offsets = frontier.bloom.offsets_function()
        self._seen_local: set[int] = set()
        self._pending: list[Entry] = []
        self._finished: list[tuple[str, float]] = []
        self._flush_call = None
        self._buffer: deque[tuple[str, str]] = deque()
        self._inflight: dict[str, Request] = {}
        self._counts = Counts(0, 0)
        self._not_before = 0.0
        self._wake_call = None
        self._wake_at = float("inf")
        self._loop = create_looping_call(self._maintain)
        self._next_renew = 0.0
        self._next_reclaim = 0.0
        self._failed = False
        self._logged_unserializable = False
        # Duplicates caught locally, published to the stats in batches: two stats calls per
        # duplicate link cost more than the rest of enqueue_request.
        self._filtered_locally = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        config, frontier = crawl_frontier(crawler)
        assert crawler.stats is not None
        scheduler = cls(frontier, stats=crawler.stats, crawler=crawler,
                        seen_cache_size=config.seen_cache_size, reset=config.reset,
                        redis_description=describe(url_for(crawler)))
        crawler.signals.connect(scheduler.fetch_finished, signal=signals.request_left_downloader)
        return scheduler

    # -- lifecycle -------------------------------------------------------------------------------

    def open(self, spider: Spider) -> None:
        self.spider = spider
        now = self.clock.time()
        if self.reset:
            deleted = self.frontier.clear()
            logger.info("WEBCRAWL_RESET: cleared crawl %r (%d keys)", self.frontier.keys.crawl, deleted)
        self.frontier.check_seen_filter()
        reclaimed = self.frontier.reclaim_expired(now)
        if reclaimed:
            self.stats.inc_value("scheduler/leases/reclaimed", reclaimed)
            logger.info("Put back %d requests whose leases had expired", reclaimed)
        self._counts = self.frontier.counts()
        self._call_redis()
        if self._counts.queued or self._counts.leased:
            logger.info("Resuming crawl %r: %d requests queued, %d in flight elsewhere",
                        self.frontier.keys.crawl, self._counts.queued, self._counts.leased)
        self._loop.start(TICK_SECONDS, now=False)

    def close(self, reason: str) -> None:
        if self._loop.running:
            self._loop.stop()
        for call in (self._flush_call, self._wake_call):
            if call is not None:
                call.cancel()
        self._flush_call = self._wake_call = None
        self._publish_local_counts()
        if self._failed:
            return
        now = self.clock.time()
        try:
            done = self._collect_done()
            self._flush(done)
            # Popped but never handed to the engine, or still unfinished: back in line now rather
            # than when the lease expires.
            back = [lease for lease, _ in self._buffer] + list(self._inflight)
            if back:
                n = self.frontier.requeue(back, now)
                self.stats.inc_value("scheduler/leases/requeued", n)
        except redis.RedisError as exc:
            logger.error("Could not save the scheduler state to %s at close: %s; requests in "
                         "flight will be retried when their leases expire", self.redis_description, exc)
        self._buffer.clear()
        self._inflight.clear()

    # -- Scrapy's scheduler interface ------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        if self._pending or self._buffer:
            return True
        if self._counts.queued > 0:
            return True
        finished_here = len(self._collect_done(peek=True))
        return self._counts.leased - finished_here > 0

    def enqueue_request(self, request: Request) -> bool:
        if self._failed:
            return False
        offsets = None
        if not request.dont_filter:
            raw = hash(request.url)
            if raw in self._seen_local:
                self._filtered_locally += 1
                return False
            canonical = canonicalize_url(request.url)
            key = hash(canonical)
            if key in self._seen_local:
                self._remember(raw)
                self._filtered_locally += 1
                return False
            self._remember(raw, key)
            offsets = self._offsets(canonical)
        try:
            payload = encode(request, self.spider)
        except UnserializableRequest as exc:
            self._unserializable(request, exc)
            return False
        domain = urlparse_cached(request).hostname or "-"
        self._pending.append(Entry(domain, -request.priority, payload, offsets))
        if len(self._pending) >= MAX_BATCH:
            self._flush_safely()
        elif self._flush_call is None:
            self._flush_call = call_later(0, self._flush_safely)
        return True

    def fetch_finished(self, request: Request) -> None:
        """A request left the downloader (answered or failed): its host's next-allowed time
        becomes at least now + delay. Gaps then hold even when a request went out late (a new
        connection on a busy reactor), at the cost of one response time per fetch."""
        self._finished.append((urlparse_cached(request).hostname or "-", self.clock.time()))
        if self._flush_call is None:
            self._flush_call = call_later(0, self._flush_safely)

    def next_request(self) -> Request | None:
        if self._failed:
            return None
        if not self._buffer:
            now = self.clock.time()
            if self._pending or self._finished:
                self._flush_safely()
            if now < self._not_before:
                self._wake_engine_at(self._not_before)
                return None
            try:
                popped = self.frontier.pop(now)
            except redis.RedisError as exc:
                self._fail(exc)
                return None
            self._call_redis()
            self._counts = popped.counts
            self._buffer.extend(popped.items)
            if not popped.items:
                self._not_before = popped.earliest if popped.earliest is not None else float("inf")
                self._wake_engine_at(min(self._not_before, now + TICK_SECONDS))
                return None
        lease, payload = self._buffer.popleft()
        try:
            request = decode(payload, self.spider)
        except Exception:
            logger.exception("Dropping a queued request that cannot be read back: %.200s", payload)
            self.stats.inc_value("scheduler/undecodable")
            self._flush_safely(acks=[lease])
            return None
        self._inflight[lease] = request
        self.stats.inc_value("scheduler/dequeued")
        self.stats.inc_value("scheduler/dequeued/redis")
        return request

    # -- internals -------------------------------------------------------------------------------

    def _remember(self, *keys: int) -> None:
        if len(self._seen_local) >= self.seen_cache_size:
            # Dropping the cache only costs a round trip to the shared filter for old URLs.
            self._seen_local.clear()
        self._seen_local.update(keys)

    def _count_filtered(self, where: str, n: int = 1) -> None:
        self.stats.inc_value("dupefilter/filtered", n)
        self.stats.inc_value(f"dupefilter/filtered/{where}", n)

    def _publish_local_counts(self) -> None:
        if self._filtered_locally:
            self._count_filtered("local_cache", self._filtered_locally)
            self._filtered_locally = 0

    def _unserializable(self, request: Request, exc: Exception) -> None:
        self.stats.inc_value("scheduler/unserializable")
        if not self._logged_unserializable:
            self._logged_unserializable = True
            logger.error(
                "Unable to serialize request %s as JSON: %s; it is dropped. No more unserializable "
                "requests will be logged (stats key scheduler/unserializable counts them)",
                request, exc, extra={"spider": self.spider},
            )

    def _collect_done(self, peek: bool = False) -> list[str]:
        """Leases of requests the engine has finished with (no longer in its in-progress set)."""
        if not self._inflight:
            return []
        in_progress = self._engine_in_progress()
        done = [lease for lease, req in self._inflight.items() if req not in in_progress]
        if not peek:
            for lease in done:
                del self._inflight[lease]
        return done

    def _engine_in_progress(self) -> set[Request] | frozenset[Request]:
        # Scrapy removes a request from the engine slot's in-progress set only after its response
        # went through the spider and every child request reached enqueue_request: the exact
        # moment the lease may go. Scrapy has no public signal for it.
        engine = getattr(self.crawler, "engine", None)
        slot = getattr(engine, "_slot", None)
        return getattr(slot, "inprogress", frozenset())

    def _flush_safely(self, acks: list[str] | None = None) -> None:
        """Flush now, releasing with it the leases of every request the engine has finished
        with: a lease held past that point only widens what a crash would refetch."""
        self._flush_call = None
        try:
            self._flush([*(acks or []), *self._collect_done()])
        except redis.RedisError as exc:
            self._fail(exc)

    def _flush(self, acks: list[str]) -> None:
        self._flush_call = None
        self._publish_local_counts()
        entries, self._pending = self._pending, []
        finished, self._finished = self._finished, []
        if not entries and not acks and not finished:
            return
        statuses, counts = self.frontier.flush(entries, acks, self.clock.time(), finished)
        self._call_redis()
        if counts.queued > self._counts.queued:
            self._not_before = 0.0  # new work may be ready at once
        self._counts = counts
        pushed = sum(1 for s in statuses if s not in (FILTERED, EXCLUDED))
        filtered = sum(1 for s in statuses if s == FILTERED)
        evicted = sum(1 for s in statuses if s == EVICTED)
        excluded = sum(1 for s in statuses if s == EXCLUDED)
        if excluded:
            self.stats.inc_value("scheduler/excluded", excluded)
        if pushed:
            self.stats.inc_value("scheduler/enqueued", pushed)
            self.stats.inc_value("scheduler/enqueued/redis", pushed)
        if filtered:
            self._count_filtered("bloom", filtered)
        if evicted:
            self.stats.inc_value("scheduler/evicted", evicted)
        self._poke_engine()

    def _maintain(self) -> None:
        """Every tick: release finished leases, renew held ones, take back expired ones from dead
        processes, and refresh the crawl-wide counts."""
        if self._failed:
            return
        now = self.clock.time()
        try:
            done = self._collect_done()
            before = self._counts
            self._flush(done)
            if now >= self._next_renew:
                self.frontier.renew(self._inflight, now)
                self._next_renew = now + self.frontier.lease_seconds / 3
            if now >= self._next_reclaim:
                reclaimed = self.frontier.reclaim_expired(now)
                self._next_reclaim = now + self.frontier.lease_seconds / 2
                if reclaimed:
                    self.stats.inc_value("scheduler/leases/reclaimed", reclaimed)
                    self._not_before = 0.0
            if not done:
                self._counts = self.frontier.counts()
                self._call_redis()
            if self._counts.queued > before.queued:
                self._not_before = 0.0
            if self._counts != before or done:
                self._poke_engine()
        except redis.RedisError as exc:
            self._fail(exc)

    def _wake_engine_at(self, when: float) -> None:
        if self._wake_call is not None:
            if self._wake_at <= when:
                return
            self._wake_call.cancel()
        self._wake_at = when
        self._wake_call = call_later(max(0.0, when - self.clock.time()), self._wake)

    def _wake(self) -> None:
        self._wake_call = None
        self._poke_engine()

    def _poke_engine(self) -> None:
        engine = getattr(self.crawler, "engine", None)
        slot = getattr(engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    def _call_redis(self) -> None:
        self.stats.inc_value("scheduler/redis/calls")

    def _fail(self, exc: Exception) -> None:
        if self._failed:
            return
        self._failed = True
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
            problem = "stopped answering"
        else:
            problem = "refused a scheduler command"
        logger.error(
            "%s %s (%s). Stopping the crawl: what Redis already holds is intact, "
            "requests in flight are leased and come back when the crawl resumes.",
            self.redis_description, problem, exc,
        )
        engine = getattr(self.crawler, "engine", None)
        if engine is not None:
            from scrapy.utils.defer import deferred_from_coro

            deferred_from_coro(engine.close_spider_async(reason="redis_unavailable"))


def crawl_frontier(crawler: Crawler) -> tuple[StateConfig, Frontier]:
    """The crawl's settings and its frontiers, for components besides the scheduler (planner,
    delay and backoff setters)."""
    context = crawl_context(crawler)
    config = context.config
    frontier = Frontier(context.client, context.keys,
                        BloomParams(config.bloom_capacity, config.bloom_error_rate),
                        cap=config.frontier_max_per_domain, default_delay=config.domain_delay,
                        lease_seconds=config.lease_seconds)
    return config, frontier


def domain_hold_setter(crawler: Crawler) -> Callable[[str, float], bool]:
    """For backoff (429, 503, Retry-After, timeouts): ``hold(domain, until)`` keeps every process
    of the crawl from fetching ``domain`` before ``until`` (seconds since the epoch)."""
    return crawl_frontier(crawler)[1].hold


def domain_delay_setter(crawler: Crawler) -> Callable[[str, float], None]:
    """``WEBCRAWL_ROBOTS_DELAY_SETTER``: how robots.txt's Crawl-delay raises a host's delay in the
    ready queue. The delay never drops below the crawl's minimum (``WEBCRAWL_DOMAIN_DELAY_SECONDS``)."""
    config, frontier = crawl_frontier(crawler)

    def set_delay(domain: str, seconds: float) -> None:
        frontier.set_delay(domain, max(seconds, config.domain_delay))

    return set_delay
