"""Downloader middleware keeping one process's requests to a host at least the host's delay apart
on the wire, as the last step before the downloader. See docs/scheduler.md ("Politeness that holds
at the server").

The scheduler sets a host's next-allowed time when it pops a request; if the reactor then stalls
(a slow callback) for longer than the delay before the request is written, the next request to the
host is popped at once after the stall and both reach the server together. Only the end of a
request tells when it was surely written, so this middleware lets one request per host through at
a time: a request waits until the previous one to its host has left the downloader
(``request_left_downloader``: answered or failed), then until the host's delay has passed since
then. Waiting requests go in arrival order. Every request counts, robots.txt fetches and
``dont_obey_robotstxt`` requests included. The scheduler already spaces pops from the end of the
previous fetch, so without stalls nothing waits here; the cost is that a host slower to answer
than its delay gets one request at a time from each process.

Delay per host: the crawl's ``WEBCRAWL_DOMAIN_DELAY_SECONDS``, raised by the host's entry in the
crawl's Redis delay hash (Crawl-delay, a site's minimum), read at most once per host per
``WEBCRAWL_SPACING_CACHE_SECONDS`` (default 5). A Redis error keeps the last known value.

Stats: ``webcrawl/spacing/waited`` (requests held for the delay), ``webcrawl/spacing/waited_seconds``.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import redis
from scrapy import signals
from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from webcrawl.clock import Clock
from webcrawl.context import crawl_context

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

DelayLookup = Callable[[str], "float | None"]  # host -> delay from the shared hash, if any
Sleep = Callable[[float], Awaitable[None]]
Wait = Callable[[Deferred[None]], Awaitable[None]]
PRUNE_AT = 10_000  # hosts remembered before idle ones whose delay has passed are forgotten


class MonotonicClock:
    """Seconds on the monotonic clock: spacing needs differences only, immune to clock steps."""

    def time(self) -> float:
        return time.monotonic()


async def reactor_sleep(seconds: float) -> None:
    done: Deferred[None] = Deferred()
    call_later(seconds, done.callback, None)
    await maybe_deferred_to_future(done)


class HostSpacingMiddleware:
    """Hold a request until this process's previous request to its host has left the downloader
    and the host's delay has passed since (see the module docstring)."""

    def __init__(self, stats: StatsCollector, *, default_delay: float,
                 lookup: DelayLookup | None = None, cache_seconds: float = 5.0,
                 clock: Clock | None = None, sleep: Sleep = reactor_sleep,
                 wait: Wait = maybe_deferred_to_future) -> None:
        self.stats = stats
        self.default_delay = default_delay
        self.lookup = lookup
        self.cache_seconds = cache_seconds
        self.clock = clock or MonotonicClock()
        self.sleep = sleep
        self.wait = wait
        self._hosts: dict[str, _Host] = {}
        self._delays: dict[str, tuple[float, float]] = {}  # host -> (delay, read again after)
        self._logged_error = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        context = crawl_context(crawler)

        def lookup(host: str) -> float | None:
            value = context.client.hget(context.keys.delay, host)
            return float(value) if value is not None else None  # type: ignore[arg-type]

        assert crawler.stats is not None
        middleware = cls(crawler.stats, default_delay=context.config.domain_delay, lookup=lookup,
                         cache_seconds=crawler.settings.getfloat("WEBCRAWL_SPACING_CACHE_SECONDS",
                                                                 5.0))
        crawler.signals.connect(middleware.request_left, signal=signals.request_left_downloader)
        return middleware

    def delay_for(self, host: str) -> float:
        """The host's delay: the default raised by the shared hash, cached for a few seconds."""
        now = self.clock.time()
        cached = self._delays.get(host)
        if cached is not None and now < cached[1]:
            return cached[0]
        delay = self.default_delay
        if self.lookup is not None:
            try:
                shared = self.lookup(host)
            except (redis.RedisError, ValueError) as exc:
                if not self._logged_error:
                    logger.warning("Could not read the delay of %s (%r); keeping the last known "
                                   "delay", host, exc)
                    self._logged_error = True
                shared = cached[0] if cached is not None else None
            if shared is not None:
                delay = max(delay, shared)
        self._delays[host] = (delay, now + self.cache_seconds)
        return delay

    async def process_request(self, request: Request) -> None:
        host = urlparse_cached(request).hostname
        if not host or (self.delay_for(host) <= 0 and host not in self._hosts):
            return  # no delay to keep: requests to the host may overlap, as Scrapy allows
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        if state.owner is not None or state.waiters:
            # Another request to this host is on its way: wait for it to leave the downloader.
            turn: Deferred[None] = Deferred()
            state.waiters.append(turn)
            try:
                await self.wait(turn)  # fired by request_left: this request owns the host now
            except BaseException:
                if turn in state.waiters:
                    state.waiters.remove(turn)
                elif state.owner is _HANDED:  # woken, then cancelled: wake the next one
                    state.owner = None
                    self._wake(state)
                raise
        state.owner = request
        try:
            now = self.clock.time()
            ready = state.free_at + self.delay_for(host) if state.free_at is not None else now
            if ready > now:
                self.stats.inc_value("webcrawl/spacing/waited")
                self.stats.inc_value("webcrawl/spacing/waited_seconds", ready - now)
            while now < ready:  # a timer may fire a little early: never let the request go before
                await self.sleep(ready - now)
                now = self.clock.time()
        except BaseException:
            self.request_left(request)  # cancelled while waiting: hand the host on
            raise

    def request_left(self, request: Request) -> None:
        """``request_left_downloader``: the host's request is answered (or failed), so it was
        written before now; the next request to the host may go one delay from now."""
        host = urlparse_cached(request).hostname
        state = self._hosts.get(host) if host else None
        if state is None or state.owner is not request:
            return
        state.owner = None
        state.free_at = self.clock.time()
        if state.waiters:
            self._wake(state)
        elif len(self._hosts) > PRUNE_AT:
            self._prune(state.free_at)

    @staticmethod
    def _wake(state: _Host) -> None:
        if state.waiters:
            state.owner = _HANDED  # nobody may slip in before the woken waiter runs
            state.waiters.popleft().callback(None)

    def _prune(self, now: float) -> None:
        """Forget idle hosts whose delay has passed: their next request may go at once anyway."""
        for host, state in list(self._hosts.items()):
            if (state.owner is None and not state.waiters and state.free_at is not None
                    and state.free_at + self._delays.get(host, (self.default_delay, 0.0))[0] <= now):
                del self._hosts[host]
                self._delays.pop(host, None)


_HANDED = object()  # owner of a host handed to a waiter that has not run yet


class _Host:
    __slots__ = ("owner", "free_at", "waiters")

    def __init__(self) -> None:
        self.owner: object | None = None  # the request let through and not yet answered
        self.free_at: float | None = None  # when the previous request left the downloader
        self.waiters: deque[Deferred[None]] = deque()
