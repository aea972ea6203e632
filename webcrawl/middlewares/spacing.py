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
  one process;
- a request that did not come out of the crawl's queue (a robots.txt fetch, a download made by a
  component) first takes the host's turn in Redis (:meth:`CrawlQueue.claim`), so it counts for
  every process of the crawl.

Waiting requests go in arrival order. The host's delay is the crawl's
``WEBCRAWL_DOMAIN_DELAY_SECONDS`` raised by the host's Crawl-delay
(:meth:`webcrawl.state.hosts.HostStore.delay`: known at once in this process when robots.txt
says so, within seconds when another process learned it).

Stats: ``webcrawl/spacing/waited`` (requests held for the delay), ``webcrawl/spacing/waited_seconds``,
``webcrawl/spacing/slow_overlap`` (requests let out beside a slow one), ``webcrawl/spacing/claimed``.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from webcrawl import meta as M
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
    __slots__ = ("active", "free_at", "last_start", "waiters")

    def __init__(self) -> None:
        self.active: dict[int, float] = {}  # id(request) -> start time, in flight
        self.free_at: float | None = None  # when the latest request left the downloader
        self.last_start: float | None = None
        self.waiters: deque[Deferred[None]] = deque()


class HostSpacingMiddleware:
    """Hold each request until its host may take it (see the module docstring)."""

    def __init__(self, stats: StatsCollector, *, delay_for: Callable[[str], float],
                 claim: Callable[[str], float] | None = None, slow_seconds: float = 10.0,
                 max_connections: int = 2, clock: Callable[[], float] = time.monotonic,
                 sleep: Sleep = reactor_sleep) -> None:
        if max_connections < 1:
            raise ValueError(f"WEBCRAWL_MAX_CONNECTIONS_PER_HOST={max_connections!r}: expected >= 1")
        if not slow_seconds > 0:
            raise ValueError(f"WEBCRAWL_SLOW_RESPONSE_SECONDS={slow_seconds!r}: expected seconds > 0")
        self.stats = stats
        self.delay_for = delay_for
        self.claim = claim
        self.slow_seconds = slow_seconds
        self.max_connections = max_connections
        self.clock = clock
        self.sleep = sleep
        self._hosts: dict[str, _Host] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        runtime = CrawlRuntime.of(crawler)
        settings = crawler.settings
        assert crawler.stats is not None
        middleware = cls(crawler.stats, delay_for=runtime.hosts.delay, claim=runtime.queue.claim,
                         slow_seconds=settings.getfloat("WEBCRAWL_SLOW_RESPONSE_SECONDS", 10.0),
                         max_connections=settings.getint("WEBCRAWL_MAX_CONNECTIONS_PER_HOST", 2))
        crawler.signals.connect(middleware.request_left, signal=signals.request_left_downloader)
        return middleware

    def _ready_at(self, state: _Host, delay: float) -> float | None:
        """When the host may take its next request; None while it has too many in flight."""
        if len(state.active) >= self.max_connections:
            return None
        times = []
        if state.last_start is not None:
            times.append(state.last_start + delay)
        if state.active:
            times.append(min(state.active.values()) + max(self.slow_seconds, delay))
        elif state.free_at is not None:
            times.append(state.free_at + delay)
        return max(times) if times else float("-inf")

    async def process_request(self, request: Request) -> None:
        host = urlparse_cached(request).hostname
        if not host:
            return
        delay = self.delay_for(host)
        state = self._hosts.get(host)
        if delay <= 0 and state is None and M.LEASE in request.meta:
            return  # no delay to keep: requests to the host may overlap, as Scrapy allows
        if state is None:
            state = self._hosts[host] = _Host()
        waited = 0.0
        if state.waiters or len(state.active) >= self.max_connections:
            turn: Deferred[None] = Deferred()
            state.waiters.append(turn)
            try:
                await maybe_deferred_to_future(turn)
            except BaseException:
                if turn in state.waiters:
                    state.waiters.remove(turn)
                raise
        while True:
            now = self.clock()
            ready = self._ready_at(state, self.delay_for(host))
            if ready is None:  # another request got in first: wait for a finish
                turn = Deferred()
                state.waiters.appendleft(turn)
                await maybe_deferred_to_future(turn)
                continue
            if ready <= now:
                break
            waited += ready - now
            await self.sleep(ready - now)
        if M.LEASE not in request.meta and self.claim is not None:
            # Not from the crawl's queue: take the host's turn for every process first.
            while (wait := self.claim(host)) > 0:
                waited += wait
                await self.sleep(wait)
            self.stats.inc_value("webcrawl/spacing/claimed")
        if waited > 0:
            self.stats.inc_value("webcrawl/spacing/waited")
            self.stats.inc_value("webcrawl/spacing/waited_seconds", waited)
        if state.active:
            self.stats.inc_value("webcrawl/spacing/slow_overlap")
        now = self.clock()
        state.active[id(request)] = now
        state.last_start = now
        self._wake(state)

    def request_left(self, request: Request) -> None:
        """``request_left_downloader``: the request is answered (or failed)."""
        host = urlparse_cached(request).hostname
        state = self._hosts.get(host) if host else None
        if state is None or state.active.pop(id(request), None) is None:
            return
        state.free_at = self.clock()
        self._wake(state)
        if not state.active and not state.waiters and len(self._hosts) > PRUNE_AT:
            self._prune(state.free_at)

    def _wake(self, state: _Host) -> None:
        if state.waiters and len(state.active) < self.max_connections:
            state.waiters.popleft().callback(None)

    def _prune(self, now: float) -> None:
        """Forget idle hosts whose delay has passed: their next request may go at once anyway."""
        for host, state in list(self._hosts.items()):
            if (not state.active and not state.waiters and state.free_at is not None
                    and state.free_at + self.delay_for(host) <= now):
                del self._hosts[host]
