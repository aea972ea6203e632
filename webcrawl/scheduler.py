"""ReadyQueueScheduler: Scrapy's scheduler interface over the crawl's queues in Redis.

Contract (:mod:`webcrawl.state.queue` holds the Redis side):

- ``enqueue_request`` never waits for Redis. It drops URLs this process already knows are seen
  (a URL once seen stays seen, so that cache is never stale), serialises the request as JSON and
  adds it to the turn's write batch; the batch reaches Redis once per reactor turn, where the
  shared seen filter decides, atomically, which URLs are new. It returns True for a request it
  sent; when the shared filter then drops it (seen already, or its host excluded) the scheduler
  fires Scrapy's ``request_dropped`` for it, as the engine does for a False return, and it is
  counted as filtered or excluded, not in ``scheduler/enqueued``. A request that cannot be
  serialised is logged once, counted (``scheduler/unserializable``) and dropped. The request
  itself is kept in memory by its payload (the last ``KEPT_REQUESTS``), so a pop of this
  process's own work hands the same object back instead of building it again from the JSON;
  another process's work, or a request popped a second time, is read from the JSON.
- ``next_request`` pops, in one atomic step per shard, the work of the hosts whose turn came
  first: a queued request, or a known page whose revisit is due (the allocator sets due times,
  :mod:`webcrawl.extensions.allocator`); the host's next-allowed time becomes now + its delay by
  the server's clock, so every process sharing the crawl obeys each host's delay. It pops only
  what the crawl can pay for: the spend controller (:class:`SpendController`) keeps a small
  wallet of the shared spend bucket's tokens. When nothing is ready it returns None without
  asking Redis again and wakes the engine when the next host's turn comes.
- Popped work is leased (a fresh id per pop, tagged with this process's token). The lease is
  released once the engine has finished with the request (downloaded, parsed, its items and
  children handed on), renewed while it is in progress, and taken back by any process once it
  expires: a crash loses nothing and refetches at most what was in flight; a stalled process
  cannot release work another one took over.
- ``has_pending_requests`` is true while requests are queued, revisits are due now, or work is
  leased anywhere in the crawl.
- Closing never deletes shared state; ``WEBCRAWL_RESET`` or ``scrapy crawlstate --clear`` does.
- If Redis goes away the crawl stops with reason ``redis_unavailable`` (:meth:`CrawlRuntime.fail`).

It relies on two Scrapy engine internals, checked when it opens (the crawl stops there, naming the
Scrapy version, if they are missing): the engine slot's ``inprogress`` set (a request leaves it
once the spider and the item pipelines are done with its response: the moment its lease may go)
and its ``nextcall`` (to wake the engine when a host's turn comes).
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict, deque
from functools import partial
from typing import TYPE_CHECKING, Any

import scrapy
from scrapy import Request, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.asyncio import call_later, create_looping_call
from scrapy.utils.httpobj import urlparse_cached
from w3lib.url import canonicalize_url

from webcrawl.state.errors import StateError
from webcrawl import meta as M
from webcrawl.requestcodec import UnserializableRequest, decode, encode
from webcrawl.runtime import CrawlRuntime
from webcrawl.state import records
from webcrawl.state.pagestore import release_op
from webcrawl.state.queue import EVICTED, EXCLUDED, FILTERED, Entry, Look, PoppedItem
from webcrawl.state.scripts import new_op_id

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from typing_extensions import Self

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.25
#: Most items one pop takes (one per host turn; a host with no delay may give several).
POP_BATCH = 16
#: Most pushed requests kept in memory to be handed back when popped (module docstring).
KEPT_REQUESTS = 4096
#: Longest the scheduler goes without looking at the whole crawl's queues (other processes'
#: work, revisits made due); its own pops and pushes keep its view current in between.
LOOK_SECONDS = 1.0


class EngineInternalsMissing(RuntimeError):
    """This Scrapy's engine lacks what the scheduler needs (see the module docstring)."""


def engine_slot(crawler: Crawler) -> Any:
    """The engine's slot, checked for ``inprogress`` and ``nextcall``."""
    slot = getattr(crawler.engine, "_slot", None)
    if (slot is None or not isinstance(getattr(slot, "inprogress", None), set)
            or not callable(getattr(getattr(slot, "nextcall", None), "schedule", None))):
        raise EngineInternalsMissing(
            f"webcrawl's scheduler needs Scrapy's engine slot (engine._slot.inprogress and "
            f".nextcall), which Scrapy {scrapy.__version__} does not have: use a Scrapy version "
            "webcrawl supports (2.13 to 2.19)")
    return slot


class ReadyQueueScheduler(BaseScheduler):
    """Per-host frontiers and revisits in Redis, shared by every process of a crawl (module
    docstring)."""

    def __init__(self, runtime: CrawlRuntime, *, stats: StatsCollector, crawler: Crawler,
                 spend: Any, seen_cache_size: int = 200_000, reset: bool = False) -> None:
        self.runtime = runtime
        self.queue = runtime.queue
        self.stats = stats
        self.crawler = crawler
        self.spend = spend
        self.seen_cache_size = seen_cache_size
        self.reset = reset
        self.spider: Spider | None = None
        self._offsets = runtime.bloom.offsets_function()
        self._seen_local: set[int] = set()
        self._kept: OrderedDict[str, Request] = OrderedDict()
        self._buffer: deque[PoppedItem] = deque()
        self._inflight: dict[str, tuple[Request, PoppedItem]] = {}
        self._earliest: list[float] = [-math.inf] * runtime.layout.shards
        self._queued = [0] * runtime.layout.shards
        self._due_now = False
        self._leased_elsewhere = 0
        self._lease_counter = 0
        self._wake_call: Any = None
        self._wake_at = math.inf
        self._loop = create_looping_call(self._maintain)
        self._next_renew = self._next_reclaim = 0.0
        self._slot: Any = None
        self._logged_unserializable = False
        self._filtered_locally = 0
        self._warned_seen = False
        self._type_names: dict[int, str] = {}
        self._exclusions = -1
        self._refreshed_at = -math.inf
        self._early_after = -math.inf  # no early revisits looked for before this (server time)
        self._max_delay = runtime.config.domain_delay
        self._lost_pop: tuple[int, str, int, str] | None = None
        self._popping = False  # a pop is under way behind (_pop_ahead)
        self._closing = False
        self._refill_after = -math.inf
        self._look: Look | None = None
        self._unsent_pushes: set[int] = set()  # shards with pushes still in the batch
        #: shard -> the chance its seen filter takes a new URL for a seen one, as of its last push
        self._false_positives: dict[int, float] = {}
        self._sharded = runtime.layout.shards > 1

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        runtime = CrawlRuntime.of(crawler)
        assert crawler.stats is not None
        config = runtime.config
        scheduler = cls(runtime, stats=crawler.stats, crawler=crawler,
                        spend=runtime.spend,
                        seen_cache_size=config.seen_cache_size, reset=config.reset)
        crawler.signals.connect(scheduler.fetch_finished, signal=signals.request_left_downloader)
        runtime.batch.on_push = scheduler._pushed
        return scheduler

    # -- lifecycle -------------------------------------------------------------------------------

    def open(self, spider: Spider) -> None:
        self.spider = spider
        self._slot = engine_slot(self.crawler)
        runtime = self.runtime
        if self.reset:
            from webcrawl.state.clearing import clear_crawl

            deleted = clear_crawl(runtime.client, runtime.layout)
            logger.info("WEBCRAWL_RESET: cleared crawl %r (%d keys)", runtime.layout.crawl, deleted)
        try:
            # The sizes the crawl's filter records win over the settings (webcrawl.state.seen).
            runtime.bloom = self.queue.check_seen_filter(runtime.bloom)
            self._offsets = runtime.bloom.offsets_function()
            reclaimed = sum(self.queue.reclaim_expired(i) for i in range(runtime.layout.shards))
            if reclaimed:
                self.stats.inc_value("scheduler/leases/reclaimed", reclaimed)
                logger.info("Put back %d requests whose leases had expired", reclaimed)
            self.spend.open()
            self._refresh()
        except StateError as exc:
            runtime.fail(exc)
            return
        assert self._look is not None
        queued, due, leased = self._look.counts
        if queued or due or leased:
            logger.info("Resuming crawl %r: %d requests queued, %d revisits scheduled, %d in flight "
                        "elsewhere", runtime.layout.crawl, queued, due, leased)
        self._loop.start(TICK_SECONDS, now=False)

    def close(self, reason: str) -> None:
        self._closing = True  # a pop answered while closing wakes nobody
        if self._loop.running:
            self._loop.stop()
        if self._wake_call is not None:
            self._wake_call.cancel()
            self._wake_call = None
        self._publish_local_counts()
        runtime = self.runtime
        if runtime.failed:
            return
        try:
            self._collect_done()
            runtime.flush()
            # Popped but never handed to the engine, or still unfinished: back in line now rather
            # than when the lease expires.
            back: dict[int, list[str]] = {}
            for item in self._buffer:
                back.setdefault(item.shard, []).append(item.lease)
            for lease, (_, item) in self._inflight.items():
                back.setdefault(item.shard, []).append(lease)
            n = sum(self.queue.requeue_owned(shard, runtime.owner, ids) for shard, ids in back.items())
            if n:
                self.stats.inc_value("scheduler/leases/requeued", n)
            self.spend.close([item for item in self._buffer],
                             [req for req, _ in self._inflight.values()])
            runtime.flush()
        except StateError as exc:
            logger.error("Could not save the scheduler state to %s at close: %s; requests in "
                         "flight come back when their leases expire", runtime.description, exc)
        self._buffer.clear()
        self._inflight.clear()

    # -- Scrapy's scheduler interface ------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        if self._buffer or self._popping:
            return True
        if sum(self._queued) > 0 or self._due_now or self._leased_elsewhere > 0:
            return True
        if len(self._inflight) > len(self._done_leases()):
            return True
        # "Nothing" ends the crawl: say it only from a look taken now (another process, or the
        # allocator making revisits due, may have added or leased work since the last look; the
        # look carries this process's own writes first). Only a process with no work of its
        # own pays this round trip.
        if self.runtime.failed:
            return False
        try:
            self._collect_done()
            self._refresh()
        except StateError as exc:
            self.runtime.fail(exc)
            return not self.runtime.failed
        return sum(self._queued) > 0 or self._due_now or self._leased_elsewhere > 0

    def enqueue_request(self, request: Request) -> bool:
        if self.runtime.failed:
            return False
        offsets = None
        if not request.dont_filter:  # most links are known: a hash or two, no parse
            url = request.url
            raw = hash(url)
            seen = self._seen_local
            if raw in seen:
                self._filtered_locally += 1
                return False
            # The same page under another fragment (#section links): canonical URLs have none.
            cut = url.find("#")
            bare = hash(url[:cut]) if cut >= 0 else raw
            if bare in seen:
                self._remember(raw)
                self._filtered_locally += 1
                return False
            canonical = canonicalize_url(url)
            key = hash(canonical)
            if key in seen:
                self._remember(raw, bare)
                self._filtered_locally += 1
                return False
            self._remember(raw, bare, key)
            offsets = self._offsets(canonical)
        try:
            payload = encode(request, self.spider)
        except UnserializableRequest as exc:
            self._unserializable(request, exc)
            return False
        kept = self._kept
        kept[payload] = request
        if len(kept) > KEPT_REQUESTS:
            kept.popitem(last=False)
        runtime = self.runtime
        host = urlparse_cached(request).hostname or "-"
        runtime.batch.push(Entry(host, request.priority, payload, offsets),
                           partial(self._push_status, payload, request))
        # Until the batch goes, that shard may have new work: a pop there carries the push.
        self._unsent_pushes.add(runtime.layout.shard_index(host) if self._sharded else 0)
        return True

    def fetch_finished(self, request: Request) -> None:
        """A request left the downloader (answered or failed): its host's next-allowed time
        becomes at least now + delay. Gaps then hold even when a request went out late."""
        from webcrawl.state.hosts import finished_op

        host = urlparse_cached(request).hostname
        if host:
            clock = self.runtime.clock
            self.runtime.batch.land(host, finished_op(clock.time() + clock.uncertainty))

    def next_request(self) -> Request | None:
        runtime = self.runtime
        if runtime.failed:
            return None
        if not self._buffer:
            # The pop goes behind: the engine is woken when it answers, and meanwhile goes on
            # with what it has (parsing, other downloads) instead of waiting for Redis.
            if self._popping or self._pop_ahead(collect=True, empty=True):
                return None
            # It did not go: nothing is due (the engine is woken when something is), or a send
            # is under way, and then the pop waits for it and goes.
            if not runtime.batch.sending or not self._pop():
                return None
        item = self._buffer.popleft()
        request = self._request_for(item)
        if request is None:
            self.runtime.batch.ack(item.shard, runtime.owner, item.lease)
            return None
        request.meta[M.LEASE] = item.lease
        self.spend.charge(request, item)
        self._inflight[item.lease] = (request, item)
        self.stats.inc_value("scheduler/dequeued")
        self.stats.inc_value(f"scheduler/dequeued/{'revisit' if item.kind == 'd' else 'queued'}")
        self._pop_ahead()
        return request

    def _pop(self) -> bool:
        """Fill the buffer from the shard whose first host's turn comes first: one round trip,
        carrying the turn's writes (finished fetches, pushes, acks) so the pop sees them, and a
        top-up of the wallet when it runs low. False when nothing came (the engine is woken when
        something may)."""
        plan = self._pop_plan()
        if plan is None:
            return False
        builds, popped = plan
        try:
            replies = self.runtime.carry(*builds)
        except StateError as exc:
            self._pop_failed(exc)  # the same pop goes again: if it was done, its items come back
            return False
        return popped(replies)

    def _pop_ahead(self, *, collect: bool = False, empty: bool = False) -> bool:
        """The next pop goes behind (from the batch's thread, with the batch): once the buffer
        is ``empty``, or, while no host popped so far has a delay to keep, once it runs half
        empty. The engine then does not wait for Redis to hand it work. A crawl with delays pops
        only when its buffer is empty, so its popped requests go out as soon as the pop answers,
        in the turns it took. Returns whether a pop went. ``collect``: finished leases go with
        it (not while a request is being handed out: the engine does not count it in progress
        yet, and it would be taken for done)."""
        if (self._popping or (self._max_delay > 0 and not empty)
                or len(self._buffer) >= POP_BATCH // 2
                or self.runtime.batch.sending):
            return False
        plan = self._pop_plan(refill=False, collect=collect)
        if plan is None:
            if not self._buffer and self.spend.poppable() <= 0:
                return self._refill_behind()  # the wallet first; the pop once it answers
            return False
        builds, popped = plan

        def answered(replies: list[list[Any]]) -> None:
            if popped(replies):
                self._poke_engine()

        return self._behind(builds, answered)

    def _refill_behind(self) -> bool:
        """:meth:`_refill` without waiting: the take goes behind, and the engine is woken when
        it answers. Returns whether it went."""
        now = self.runtime.clock.local()
        want = self._refill_wanted(now)
        if not want:
            return False

        def answered(replies: list[list[Any]]) -> None:
            if self._refilled(replies[0][0], now):
                self._poke_engine()
            else:
                self._wake_engine_at(self.runtime.clock.time() + TICK_SECONDS)

        return self._behind([lambda pipe: self.spend.take_call(want, pipe)], answered)

    def _behind(self, builds: list[Any], answered: Callable[[list[list[Any]]], None]) -> bool:
        """Send ``builds`` with the batch from its thread (:meth:`CrawlRuntime.carry_behind`);
        ``answered`` reads their replies on the reactor. Returns whether they went."""

        def landed(replies: list[list[Any]]) -> None:
            self._popping = False
            answered(replies)

        def failed(exc: StateError) -> None:
            self._popping = False
            self._pop_failed(exc)

        self._popping = self.runtime.carry_behind(builds, landed, failed)
        return self._popping

    def _pop_failed(self, exc: StateError) -> None:
        self.runtime.fail(exc)
        self._wake_engine_at(self.runtime.clock.time() + TICK_SECONDS)

    def _pop_plan(self, *, refill: bool = True, collect: bool = True,
                  ) -> tuple[list[Any], Callable[[list[list[Any]]], bool]] | None:
        """What the next pop sends and what reads its replies (True when items came), or None
        when no pop is due (the engine is woken when one may be). Without ``refill`` an empty
        wallet is not topped up first (that would wait for Redis); with ``collect`` finished
        leases go back with the pop."""
        runtime = self.runtime
        now = runtime.clock.time()
        earliest = self._earliest
        if self._unsent_pushes:
            earliest = list(earliest)
            for index in self._unsent_pushes:
                earliest[index] = -math.inf
        shard = min(range(len(earliest)), key=earliest.__getitem__)
        # Early revisits while money sits idle, at most one fruitless look per tick.
        ahead = self.spend.ahead() if now >= self._early_after else 0.0
        if earliest[shard] > now + ahead:
            self._wake_engine_at(earliest[shard] - ahead)
            return None
        if runtime.in_outage:
            self._wake_engine_at(now + TICK_SECONDS)
            return None
        # Items already popped are not charged yet: the wallet pays for them first.
        budget = self.spend.poppable() - len(self._buffer)
        if budget <= 0:
            if self._buffer or not refill:
                return None
            if not self._refill():
                self._wake_engine_at(now + TICK_SECONDS)
                return None
            budget = self.spend.poppable()
        if self._lost_pop is None:
            self._lost_pop = (shard, new_op_id(), min(POP_BATCH, budget), self.spend.order())
        shard, op_id, count, order = self._lost_pop
        if collect:
            self._collect_done()  # finished leases go back with the pop
        want = self.spend.top_up_wanted(low=0.5)
        owner, first = runtime.owner, self._lease_counter
        builds = [lambda pipe: self.queue.pop(shard, owner, first, count, order, op_id=op_id,
                                              ahead=ahead, pipe=pipe)]
        if want is not None:
            builds.append(lambda pipe: self.spend.take_call(want, pipe))

        def popped(replies: list[list[Any]]) -> bool:
            return self._popped(shard, replies, want, ahead, now)

        return builds, popped

    def _popped(self, shard: int, replies: list[list[Any]], want: float | None, ahead: float,
                now: float) -> bool:
        """Read a pop's replies into the buffer; True when items came."""
        self._lost_pop = None
        self._unsent_pushes.discard(shard)
        if want is not None:
            self.spend.took_reply(replies[1][0])
        popped = self.queue.pop_reply(shard, replies[0][0])
        self._lease_counter += len(popped.items)
        self._queued[shard] = popped.queued
        earliest = popped.earliest
        self._earliest[shard] = earliest if earliest is not None else math.inf
        if popped.dropped:
            self.stats.inc_value("scheduler/excluded", popped.dropped)
        self._buffer.extend(popped.items)
        hosts = self.runtime.hosts
        for item in popped.items:
            self._max_delay = max(self._max_delay, item.delay)
            hosts.note_delay(item.host, item.delay)  # what the pop read: no read of its own
        if not popped.items:
            if ahead:
                self._early_after = now + TICK_SECONDS
            self._wake_engine_at(min(self._earliest))
            return False
        return True

    def _refill(self) -> bool:
        """The wallet is empty: take tokens now (at most once a tick when the bucket was dry)."""
        now = self.runtime.clock.local()
        want = self._refill_wanted(now)
        if not want:
            return False
        try:
            replies = self.runtime.carry(lambda pipe: self.spend.take_call(want, pipe))
        except StateError as exc:
            self.runtime.fail(exc)
            return False
        return self._refilled(replies[0][0], now)

    def _refill_wanted(self, now: float) -> float | None:
        """Tokens an empty wallet should take now (none more than once a tick while the bucket
        is dry)."""
        if self.spend.dry and now < self._refill_after:
            return None
        return self.spend.top_up_wanted()

    def _refilled(self, reply: list[Any], now: float) -> bool:
        """Read a refill's answer; whether the wallet can pay for a pop now."""
        self.spend.took_reply(reply)
        self._refill_after = now + TICK_SECONDS
        return self.spend.poppable() > 0

    # -- building requests -----------------------------------------------------------------------

    def _request_for(self, item: PoppedItem) -> Request | None:
        if item.kind == "n":
            request = self._kept.pop(item.item, None)
            if request is not None:
                return request
            try:
                return decode(item.item, self.spider)
            except Exception:
                logger.exception("Dropping a queued request that cannot be read back: %.200s",
                                 item.item)
                self.stats.inc_value("scheduler/undecodable")
                return None
        kind, url = item.item[:1], item.item[1:]  # s: sitemap, h: hub, p: page
        record = records.unpack(item.record) if item.record else None
        page_type = self._type_name(record.type) if record is not None else None
        meta: dict[str, Any] = {
            M.PURPOSE: "sitemap" if kind == "s" else "revisit", M.PAGE_TYPE: page_type,
            M.CANONICAL_URL: url, M.KNOWN: True}
        if item.validators is not None:
            meta[M.VALIDATORS] = list(item.validators)
        if item.links is not None:
            meta[M.LINKS] = item.links
        if record is not None:
            meta[M.PAGE_STATS] = {"last_fetched": record.last_fetched, "changes": record.changes,
                                  "seconds": record.seconds, "mean_cost": record.mean_cost,
                                  "hash8": record.hash.hex(), "body8": record.body8.hex()}
        make = getattr(self.spider, "revisit_request", None)
        if make is not None:
            return make(url, sitemap=kind == "s", meta=meta)
        return Request(url, dont_filter=True, meta=meta)

    def _type_name(self, type_id: int) -> str | None:
        if not type_id:
            return None
        name = self._type_names.get(type_id)
        if name is None:
            self._type_names = self.runtime.types.names()
            name = self._type_names.get(type_id)
        return name

    # -- internals -------------------------------------------------------------------------------

    def _remember(self, *keys: int) -> None:
        if len(self._seen_local) >= self.seen_cache_size:
            # Dropping the cache only costs a round trip to the shared filter for old URLs.
            self._seen_local.clear()
        self._seen_local.update(keys)

    def _push_status(self, payload: str, request: Request, status: int) -> None:
        """The shared filter's answer for a request ``enqueue_request`` accepted. One it drops
        was never queued: nothing will pop it, and Scrapy hears of it as of any dropped request
        (the engine fired ``request_scheduled`` before asking; it counts nothing itself)."""
        if status == FILTERED or status == EXCLUDED:
            self._kept.pop(payload, None)
            if status == FILTERED:
                self.stats.inc_value("dupefilter/filtered")
                self.stats.inc_value("dupefilter/filtered/bloom")
            else:
                self.stats.inc_value("scheduler/excluded")
            self.crawler.signals.send_catch_log(signals.request_dropped, request=request,
                                                spider=self.spider)
            return
        self.stats.inc_value("scheduler/enqueued")
        self.stats.inc_value("scheduler/enqueued/redis")
        if status == EVICTED:
            self.stats.inc_value("scheduler/evicted")

    def _pushed(self, shard: int, queued: int, seen: int) -> None:
        """A push reached ``shard``: new work may be ready at once."""
        self._unsent_pushes.discard(shard)
        if queued > self._queued[shard]:
            self._earliest[shard] = -math.inf
        self._queued[shard] = queued
        bloom = self.runtime.bloom
        rate = bloom.false_positive_rate_at(seen)
        self._false_positives[shard] = rate
        self.stats.set_value("dupefilter/seen/false_positive_rate",
                             round(max(self._false_positives.values()), 6))
        if rate > bloom.error_rate and not self._warned_seen:
            self._warned_seen = True
            logger.warning(
                "The seen-URL filter of crawl %r holds %d URLs in a shard and takes a new URL for "
                "a seen one with a chance of %.2f%%, past WEBCRAWL_BLOOM_ERROR_RATE (%g%%): see "
                "'Growing the seen filter' in docs/scheduler.md",
                self.runtime.layout.crawl, seen, 100 * rate, 100 * bloom.error_rate)
        self._poke_engine()

    def _publish_local_counts(self) -> None:
        if self._filtered_locally:
            self.stats.inc_value("dupefilter/filtered", self._filtered_locally)
            self.stats.inc_value("dupefilter/filtered/local_cache", self._filtered_locally)
            self._filtered_locally = 0

    def _unserializable(self, request: Request, exc: Exception) -> None:
        self.stats.inc_value("scheduler/unserializable")
        if not self._logged_unserializable:
            self._logged_unserializable = True
            logger.error(
                "Unable to serialize request %s as JSON: %s; it is dropped. No more unserializable "
                "requests will be logged (stats key scheduler/unserializable counts them)",
                request, exc, extra={"spider": self.spider})

    def _done_leases(self) -> list[str]:
        if not self._inflight:
            return []
        in_progress = self._slot.inprogress
        # A request given back by a stopping crawl (webcrawl.stopping) was not fetched: its
        # lease stays in flight, so close() puts it back in line instead of acking it.
        return [lease for lease, (req, _) in self._inflight.items()
                if req not in in_progress and not req.meta.get("webcrawl_given_back")]

    def _collect_done(self) -> int:
        """Release the leases of requests the engine has finished with (children and items
        already in the batch, which sends them first)."""
        done = self._done_leases()
        runtime = self.runtime
        for lease in done:
            request, item = self._inflight.pop(lease)
            runtime.batch.ack(item.shard, runtime.owner, lease)
            if item.kind == "d":
                # A revisit that landed no observation (an error answer, a redirect, a 304 sent
                # on to its verification): due again an interval from now; a no-op after a
                # landing, which rescheduled it already.
                runtime.batch.land(item.host, release_op(item.item[1:], attempted=True))
            self.spend.finished(request)
        return len(done)

    def _sync_exclusions(self, version: int | None = None) -> None:
        """Mirror the exclusion list into the shards if its ``version`` (read now when None)
        moved."""
        from webcrawl.state import exclusion

        if version is not None and version <= self._exclusions:
            return
        self._exclusions, dropped = exclusion.sync(self.runtime.client, self.queue, self._exclusions)
        if dropped:
            self.stats.inc_value("scheduler/excluded", dropped)

    def _refresh(self) -> None:
        """Look at what the whole crawl has queued now (one round trip, carrying the batch and,
        when due, a top-up of the wallet and what the allocator published)."""
        runtime = self.runtime
        spend = self.spend
        builds: list[Any] = [self.queue.look]
        want = spend.top_up_wanted(low=0.5)
        if want is not None:
            builds.append(lambda pipe: spend.take_call(want, pipe))
        published = spend.wants_published()
        if published:
            builds.append(lambda pipe: pipe.hgetall(runtime.layout.alloc))
        replies = runtime.carry(*builds)
        self._refreshed_at = runtime.clock.local()
        look = self._look = self.queue.look_reply(replies[0])
        if want is not None:
            spend.took_reply(replies[1][0])
        if published:
            spend.published(runtime.parse_published(replies[-1][0]))
        now = runtime.clock.time()
        self._earliest = [min([t for t in pair if t is not None], default=math.inf)
                          for pair in look.earliest]
        # A host with revisits due now may have its turn a delay away: still work to wait for.
        self._due_now = any(due is not None and due <= now + self._max_delay
                            for _, due in look.earliest)
        self._queued = list(look.queued)
        self._leased_elsewhere = max(look.leased - len(self._inflight) - len(self._buffer), 0)
        self._sync_exclusions(look.exclusions)

    def _maintain(self) -> None:
        """Every tick: release finished leases, renew held ones, take back expired ones from dead
        processes, top up the wallet, refresh what the crawl has queued. Redis is asked once a
        :data:`LOOK_SECONDS` (pops tell the rest as they go), or sooner when the wallet runs
        low; the writes of the turn ride along."""
        runtime = self.runtime
        if runtime.failed:
            return
        self._publish_local_counts()
        spend = self.spend
        spend.measure_demand()
        try:
            local = runtime.clock.local()
            done = 0
            if local >= self._refreshed_at + LOOK_SECONDS or spend.top_up_wanted(low=0.5):
                done = self._collect_done()
                self._refresh()
            if runtime.failed:
                return
            if local >= self._next_renew and self._inflight:
                by_shard: dict[int, list[str]] = {}
                for lease, (_, item) in self._inflight.items():
                    by_shard.setdefault(item.shard, []).append(lease)
                for item in self._buffer:
                    by_shard.setdefault(item.shard, []).append(item.lease)
                for shard, leases in by_shard.items():
                    self.queue.renew(shard, runtime.owner, leases)
                self._next_renew = local + self.queue.lease_seconds / 3
            if local >= self._next_reclaim:
                reclaimed = sum(self.queue.reclaim_expired(i) for i in range(runtime.layout.shards))
                self._next_reclaim = local + self.queue.lease_seconds / 2
                if reclaimed:
                    self.stats.inc_value("scheduler/leases/reclaimed", reclaimed)
            if not self._inflight and not self._buffer:
                # Only once what the budget bought has been fetched: a request still waiting
                # for its host's turn would otherwise be given back unsent, its money unspent.
                spend.budget_spent(pending=sum(self._queued) > 0 or self._due_now)
            runtime.clock.maybe_refresh()
        except StateError as exc:
            runtime.fail(exc)
            return
        now = runtime.clock.time()
        ahead = spend.ahead() if now >= self._early_after else 0.0
        if done or min(self._earliest) <= now + ahead:
            self._poke_engine()

    def _wake_engine_at(self, when: float) -> None:
        if self._closing:
            return
        now = self.runtime.clock.time()
        when = min(when, now + TICK_SECONDS * 4)
        if self._wake_call is not None:
            if self._wake_at <= when:
                return
            self._wake_call.cancel()
        self._wake_at = when
        self._wake_call = call_later(max(0.0, when - now), self._wake)

    def _wake(self) -> None:
        self._wake_call = None
        self._wake_at = math.inf
        self._poke_engine()

    def _poke_engine(self) -> None:
        if self._slot is not None and not self._closing:
            self._slot.nextcall.schedule()
