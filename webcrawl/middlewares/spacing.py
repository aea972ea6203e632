"""Downloader middleware keeping one process's requests to a host at least the host's delay apart
on the wire, as the last step before the downloader. See docs/scheduler.md ("Politeness that holds
at the server").

The scheduler gives a host its turn by the server's clock when it pops a request; if the reactor
then stalls (a slow callback) for longer than the delay before the request is written, the next
request to the host could be popped at once after the stall and both reach the server together.
So this middleware is the last word on when a request goes out:

- a request to a host may start once the host's delay has passed since the previous request to it
  started and, when the previous one is done, since it left the downloader (answered or failed):
  with quick answers, gaps are measured from the end of the previous fetch, which surely was
  written by then;
- a response still running after ``WEBCRAWL_SLOW_RESPONSE_SECONDS`` (default 10 s, at least the
  delay) no longer holds its host: the next request may start beside it, so one slow or dripping
  URL cannot stall the host's other pages for minutes. Politeness still counts starts, and a host
  never has more than ``WEBCRAWL_MAX_CONNECTIONS_PER_HOST`` (default 2) requests in flight from
  one process. A host whose delay is 0 (a throughput crawl of one's own servers) is not spaced:
  its requests overlap up to ``CONCURRENT_REQUESTS_PER_DOMAIN``. This middleware keeps that
  bound: Scrapy's downloader (on the asyncio reactor) starts every request queued for a host in
  one go before any counts as transferring, so a host could get dozens of connections at once,
  each opened for one request and dropped from the full connection pool after it;
- a request to a host this process backs off (a 429 or 503 answer, a timeout: the cost
  middleware's hold, :meth:`webcrawl.state.hosts.HostStore.hold`) waits until the hold ends: it
  may have been popped before the crawl's queue had the hold;
- a request that did not come out of the crawl's queue (a robots.txt fetch, a download made by a
  component) first takes the host's turn in Redis (:meth:`CrawlQueue.claim`), so it counts for
  every process of the crawl; except a robots.txt fetch made for a request popped from the queue
  (``meta["webcrawl_turn_taken"]``), which goes in that pop's turn, the request after it. So does
  a request from the queue that had to wait here (the delay after its host's robots.txt, a hold,
  the request before it): it goes out past its pop's turn, and another process may have popped
  the host's next turn meanwhile.

Waiting requests go in arrival order, and only the first in line is woken when its host's
state changes (a long line costs one wake a request). A request from the crawl's queue waiting
out a time (the delay after its host's robots.txt, a backoff hold) gives up its
``CONCURRENT_REQUESTS`` slot meanwhile and takes one back before it goes
(:class:`DownloaderSlots`): other hosts' requests use the slot. Once the crawl starts stopping
(:data:`webcrawl.stopping.stop_started`), requests still waiting are given back at once rather
than sent (:class:`webcrawl.stopping.Cancelled`; their leases go back to the queue), and so is
any request that arrives later: a stopping crawl sends nothing new. The host's delay is the crawl's
``WEBCRAWL_DOMAIN_DELAY_SECONDS`` raised by the host's Crawl-delay
(:meth:`webcrawl.state.hosts.HostStore.delay`: known at once in this process when robots.txt
says so, within seconds when another process learned it).

Stats: ``webcrawl/spacing/waited`` (requests held for the delay, a free connection or the
turn), ``webcrawl/spacing/waited_seconds``,
``webcrawl/spacing/slow_overlap`` (requests let out beside a slow one),
``webcrawl/spacing/backed_off`` (requests that waited for a backoff hold of their host),
``webcrawl/spacing/claimed``, ``webcrawl/spacing/slot_given_up`` (requests that waited without
a slot),
``webcrawl/stop/given_back`` (requests given back unsent because the crawl was stopping).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from webcrawl import meta as M
from webcrawl import stopping
from webcrawl.runtime import CrawlRuntime

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
PRUNE_AT = 10_000  # hosts remembered before idle ones whose delay has passed are forgotten


async def reactor_sleep(seconds: float) -> None:
    done: Deferred[None] = Deferred()
    call_later(seconds, done.callback, None)
    await maybe_deferred_to_future(done)


class _Host:
    __slots__ = ("active", "free_at", "last_key", "last_left", "last_start", "line", "turns",
                 "watchers")

    def __init__(self) -> None:
        self.active: dict[int, float] = {}  # id(request) -> start time, in flight
        self.free_at: float | None = None  # when the latest request left the downloader
        self.last_start: float | None = None
        self.last_key: int | None = None  # id() of the request that started last
        self.last_left: float | None = None  # when that one left (None while in flight)
        self.line: deque[object] = deque()  # requests waiting to start, in arrival order
        self.watchers: list[Deferred[None]] = []  # the first in line's waits for a change
        self.turns: dict[object, Deferred[None]] = {}  # the others' waits to come first


class DownloaderSlots:
    """The crawl's ``CONCURRENT_REQUESTS`` slots: Scrapy counts a request against them from when
    the downloader takes it (its middlewares included) until it leaves (``Downloader.active``).
    A request waiting out a time in its host's turn gives its slot up, so the engine hands the
    downloader requests to other hosts meanwhile, and takes one back before it goes on.

    On a crawl of many new hosts, each host's first page waits its delay after the host's
    robots.txt: holding a slot each, ``CONCURRENT_REQUESTS`` of them waited and the crawl reached
    its politeness bound only after seconds."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._waiting: deque[Deferred[None]] = deque()
        self._stopping = False

    def give_up(self, request: Request) -> bool:
        """Let ``request``'s slot go (False when it holds none: not from the downloader)."""
        engine = self.crawler.engine
        if engine is None or request not in engine.downloader.active:
            return False
        engine.downloader.active.discard(request)
        slot = getattr(engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()  # the engine looks for more work at its next turn
        return True

    async def take_back(self, request: Request) -> None:
        """Take a slot for ``request`` again, waiting for one to come free (in order)."""
        engine = self.crawler.engine
        if engine is None:
            return
        downloader = engine.downloader
        while downloader.needs_backout() and not self._stopping:
            freed: Deferred[None] = Deferred()
            self._waiting.append(freed)
            try:
                await maybe_deferred_to_future(freed)
            finally:
                if freed in self._waiting:
                    self._waiting.remove(freed)
        downloader.active.add(request)

    def put_back(self, request: Request) -> None:
        """Count ``request`` again at once (it fails: the downloader lets it go next)."""
        engine = self.crawler.engine
        if engine is not None:
            engine.downloader.active.add(request)

    def freed(self) -> None:
        """A request left the downloader: the first one waiting for a slot looks again."""
        if self._waiting:
            first = self._waiting.popleft()
            if not first.called:
                first.callback(None)

    def stop(self) -> None:
        """The crawl is stopping: nobody waits for a slot any more."""
        self._stopping = True
        waiting, self._waiting = self._waiting, deque()
        for freed in waiting:
            if not freed.called:
                freed.callback(None)


class HostSpacingMiddleware:
    """Hold each request until its host may take it (see the module docstring)."""

    def __init__(self, stats: StatsCollector, *, delay_for: Callable[[str], float],
                 claim: Callable[[str], float] | None = None,
                 held_until: Callable[[str], float] | None = None, slow_seconds: float = 10.0,
                 max_connections: int = 2, unspaced_connections: int = 8,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Sleep = reactor_sleep, host_limit: int = PRUNE_AT,
                 slots: DownloaderSlots | None = None) -> None:
        if max_connections < 1:
            raise ValueError(f"WEBCRAWL_MAX_CONNECTIONS_PER_HOST={max_connections!r}: expected >= 1")
        if not slow_seconds > 0:
            raise ValueError(f"WEBCRAWL_SLOW_RESPONSE_SECONDS={slow_seconds!r}: expected seconds > 0")
        self.stats = stats
        self.delay_for = delay_for
        self.claim = claim
        self.held_until = held_until
        self.slow_seconds = slow_seconds
        self.max_connections = max_connections
        #: requests in flight to a host with no delay (CONCURRENT_REQUESTS_PER_DOMAIN; 0: no bound)
        self.unspaced_connections = unspaced_connections if unspaced_connections > 0 else 1 << 30
        self.clock = clock
        self.sleep = sleep
        self._hosts: dict[str, _Host] = {}
        self.host_limit = host_limit
        self._prune_at = host_limit
        self._stopping = False
        self.slots = slots

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        runtime = CrawlRuntime.of(crawler)
        settings = crawler.settings
        assert crawler.stats is not None
        middleware = cls(crawler.stats, delay_for=runtime.hosts.delay, claim=runtime.queue.claim,
                         held_until=runtime.hosts.held_until,
                         slow_seconds=settings.getfloat("WEBCRAWL_SLOW_RESPONSE_SECONDS", 10.0),
                         max_connections=settings.getint("WEBCRAWL_MAX_CONNECTIONS_PER_HOST", 2),
                         unspaced_connections=settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN", 8),
                         slots=DownloaderSlots(crawler))
        crawler.signals.connect(middleware.request_left, signal=signals.request_left_downloader)
        crawler.signals.connect(middleware.stop_waiting, signal=stopping.stop_started)
        return middleware

    def _ready_at(self, state: _Host, delay: float) -> float | None:
        """When the host may take its next request; None while it has too many in flight."""
        if delay <= 0:  # not spaced: only the number in flight is bounded
            return float("-inf") if len(state.active) < self.unspaced_connections else None
        if len(state.active) >= self.max_connections:
            return None
        times = []
        if state.last_start is not None:
            times.append(state.last_start + delay)
        if state.last_left is not None:
            # The last one is answered: it surely reached the server before it left, while
            # its start may have reached it late (a new connection). Beside a slow request,
            # measuring from its start alone let the next arrive a few ms short of the delay.
            times.append(state.last_left + delay)
        if state.active:
            times.append(min(state.active.values()) + max(self.slow_seconds, delay))
        elif state.free_at is not None:
            times.append(state.free_at + delay)
        return max(times) if times else float("-inf")

    async def process_request(self, request: Request) -> None:
        host = urlparse_cached(request).hostname
        if not host:
            return
        if self._stopping:
            self._give_back(request)
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        claims = M.LEASE not in request.meta and not request.meta.get(M.TURN_TAKEN)
        if not state.line and not (claims and self.claim is not None):
            now = self.clock()
            ready, _ = self._ready(state, host, now)
            if ready is not None and ready <= now:  # nobody waiting and the host is ready
                self._start(state, request, host, now)
                return
        arrived = self.clock()
        held = backed_off = False
        ticket = object()
        state.line.append(ticket)
        slots = self.slots if M.LEASE in request.meta else None
        slot_given_up = False
        try:
            # Only the first in line may go, once the host is ready; the others wait for it to.
            while True:
                if self._stopping:
                    self._give_back(request)
                if state.line[0] is ticket:
                    now = self.clock()
                    ready, held_back = self._ready(state, host, now)
                    backed_off = backed_off or held_back
                    if ready is not None and ready <= now:
                        if not slot_given_up:
                            break
                        await slots.take_back(request)  # type: ignore[union-attr]
                        slot_given_up = False
                        continue  # the host is looked at again once the slot is had
                    if ready is not None and slots is not None and not slot_given_up:
                        # Waiting out a time in its turn (the delay after its robots.txt, a
                        # backoff hold): the crawl's other hosts may use its slot meanwhile.
                        slot_given_up = slots.give_up(request)
                        if slot_given_up:
                            self.stats.inc_value("webcrawl/spacing/slot_given_up")
                    # Until the host's turn, or sooner if a request to it leaves (its turn
                    # may then come earlier, or a connection frees up).
                    await self._wait(state, None if ready is None else ready - now)
                else:
                    # Woken once it comes first, not at every change: a long line costs one
                    # wake a request, not one a request per change.
                    await self._wait_turn(state, ticket)
                held = True
            # A request that waited here goes out past the turn its pop took (the delay after
            # its host's robots.txt, a hold, the request before it): another process may have
            # the host's next turn by now, so it takes a turn of its own too.
            claims = claims or (held and self.delay_for(host) > 0)
            if claims and self.claim is not None:
                # Take the host's turn for every process first.
                while (wait := self.claim(host)) > 0:
                    held = True
                    await self.sleep(wait)
                    if self._stopping:
                        self._give_back(request)
                self.stats.inc_value("webcrawl/spacing/claimed")
        except BaseException:
            if slot_given_up:
                slots.put_back(request)  # type: ignore[union-attr]
            state.line.remove(ticket)
            state.turns.pop(ticket, None)
            self._changed(state)  # the next in line looks again
            raise
        now = self.clock()
        if backed_off:
            self.stats.inc_value("webcrawl/spacing/backed_off")
        if held:
            self.stats.inc_value("webcrawl/spacing/waited")
            self.stats.inc_value("webcrawl/spacing/waited_seconds", now - arrived)
        # Started before the next in line looks again (a Deferred may resume it at once).
        self._start(state, request, host, now)
        state.line.remove(ticket)
        self._changed(state)

    def _ready(self, state: _Host, host: str, now: float) -> tuple[float | None, bool]:
        """When the host may take its next request (None: not while so many are in flight), and
        whether a backoff hold of the host is what keeps it past ``now``."""
        ready = self._ready_at(state, self.delay_for(host))
        if ready is not None and self.held_until is not None:
            until = self.held_until(host)
            if until > now:
                return max(ready, until), True
        return ready, False

    def _start(self, state: _Host, request: Request, host: str, now: float) -> None:
        """Book ``request`` as on its way to ``host`` at ``now``."""
        if state.active and self.delay_for(host) > 0:
            self.stats.inc_value("webcrawl/spacing/slow_overlap")
        state.active[id(request)] = now
        state.last_start = now
        state.last_key, state.last_left = id(request), None

    @staticmethod
    async def _wait_turn(state: _Host, ticket: object) -> None:
        """Until ``ticket`` is first in its host's line (or the crawl starts stopping)."""
        turn: Deferred[None] = Deferred()
        state.turns[ticket] = turn
        try:
            await maybe_deferred_to_future(turn)
        finally:
            if state.turns.get(ticket) is turn:
                del state.turns[ticket]

    async def _wait(self, state: _Host, seconds: float | None) -> None:
        """Until the host's state changes (a request to it starts or leaves, a waiting one gives
        up) or, with ``seconds``, that long at most."""
        changed: Deferred[None] = Deferred()
        state.watchers.append(changed)
        timer: Deferred[Any] | None = None
        if seconds is not None:
            timer = deferred_from_coro(self.sleep(seconds))

            def expired(_: object) -> None:  # also swallows the timer's cancellation
                if not changed.called:
                    changed.callback(None)

            timer.addBoth(expired)
        try:
            await maybe_deferred_to_future(changed)
        finally:
            if changed in state.watchers:
                state.watchers.remove(changed)
            if timer is not None and not timer.called:
                timer.cancel()

    def request_left(self, request: Request) -> None:
        """``request_left_downloader``: the request is answered (or failed)."""
        if self.slots is not None:
            self.slots.freed()
        host = urlparse_cached(request).hostname
        state = self._hosts.get(host) if host else None
        if state is None or state.active.pop(id(request), None) is None:
            return
        state.free_at = self.clock()
        if state.last_key == id(request):
            state.last_left = state.free_at
        self._changed(state)
        if not state.active and not state.line and len(self._hosts) > self._prune_at:
            self._prune(state.free_at)
            # The next scan waits until the table doubles again: while most hosts are busy and
            # cannot be forgotten, answers do not each pay a scan of every host.
            self._prune_at = max(self.host_limit, 2 * len(self._hosts))

    def stop_waiting(self) -> None:
        """:data:`webcrawl.stopping.stop_started`: give back every waiting request, and any
        request that arrives from now on."""
        self._stopping = True
        if self.slots is not None:
            self.slots.stop()
        for state in self._hosts.values():
            turns, state.turns = state.turns, {}
            for turn in turns.values():
                if not turn.called:
                    turn.callback(None)
            self._changed(state)

    def _give_back(self, request: Request) -> None:
        stopping.give_back(request)
        self.stats.inc_value("webcrawl/stop/given_back")
        raise stopping.Cancelled("the crawl is stopping: not sent")

    @staticmethod
    def _changed(state: _Host) -> None:
        """Wake the first in line: to look again at its host, or to find it is now first."""
        if state.line:
            turn = state.turns.pop(state.line[0], None)
            if turn is not None and not turn.called:
                turn.callback(None)
        watchers, state.watchers = state.watchers, []
        for changed in watchers:
            if not changed.called:
                changed.callback(None)

    def _prune(self, now: float) -> None:
        """Forget idle hosts whose delay has passed: their next request may go at once anyway."""
        for host, state in list(self._hosts.items()):
            if (not state.active and not state.line and state.free_at is not None
                    and state.free_at + self.delay_for(host) <= now):
                del self._hosts[host]
