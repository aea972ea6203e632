"""robots.txt answers shared by every process through Redis, with a small in-process LRU in front.

One Redis hash per origin, under the key ``key_for(origin)`` gives (the crawl's: in the host's
shard, see :mod:`webcrawl.state.layout`), with the fields:

| field | holds |
| --- | --- |
| ``kind`` | ``rules``, ``allow_all`` or ``disallow_all`` |
| ``rules`` | the canonical robots.txt text (:func:`webcrawl.robots._normalise.canonical_rules`) |
| ``status`` | the HTTP status of the fetch, empty after a network error |
| ``fetched`` | when it was fetched (seconds since the epoch, by the injected clock) |
| ``expires`` | when it stops being valid (same clock); never more than 24 h after ``fetched`` |

Contract: :meth:`RobotsCache.get` never returns an answer past its ``expires``: the Redis hash also
carries a Redis expiry (so dead origins do not pile up), and each LRU entry expires no later than
the Redis answer it copies, and at most ``lru_seconds`` after it was read, so a refresh by another
process is seen within that time. The Redis round trip happens only on an LRU miss: once per origin
per ``lru_seconds`` per process.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from scrapy.utils.httpobj import urlparse_cached

from webcrawl.clock import Clock, SystemClock
from webcrawl.robots.policy import MAX_CACHE_SECONDS, Kind, RobotsPolicy, Verdict
from webcrawl.state.errors import StateError
from webcrawl.state.robots import RobotsStore, robots_key

if TYPE_CHECKING:
    from scrapy.http import Request

__all__ = ["RobotsCache", "origin_of", "robots_key"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(request: Request) -> str | None:
    """``scheme://host:port`` of an http(s) request (host lower-cased), as the cache keys its
    answers; else None."""
    parts = urlparse_cached(request)
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    try:
        port = parts.port or _DEFAULT_PORTS[parts.scheme]
    except ValueError:
        return None
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}:{port}"

logger = logging.getLogger(__name__)


class RobotsCache:
    """Get and put robots.txt answers by origin.

    ``store`` may be None (tests, or a crawl without shared state): only the LRU is used; a
    Redis client is taken as a store with stand-alone keys.
    """

    def __init__(self, store: RobotsStore | Any | None, *, lru_size: int = 1024,
                 lru_seconds: float = 300.0, clock: Clock | None = None) -> None:
        if lru_size < 0 or lru_seconds < 0:
            raise ValueError(f"lru_size={lru_size!r} and lru_seconds={lru_seconds!r} must be >= 0")
        if store is not None and not isinstance(store, RobotsStore):
            store = RobotsStore(store)
        self.store = store
        self.lru_size = lru_size
        self.lru_seconds = lru_seconds
        self.clock: Clock = clock or SystemClock()
        self._lru: OrderedDict[str, tuple[RobotsPolicy, float]] = OrderedDict()
        self.lru_hits = 0
        self.redis_hits = 0
        self.misses = 0

    def get(self, origin: str) -> RobotsPolicy | None:
        """The origin's answer if one is cached and not expired, else None."""
        return self.lookup(origin)[0]

    def lookup(self, origin: str) -> tuple[RobotsPolicy | None, str]:
        """Like :meth:`get`, with where the answer came from: ``lru``, ``redis`` or ``miss``."""
        now = self.clock.time()
        entry = self._lru.get(origin)
        if entry is not None:
            policy, expires = entry
            if now < expires:
                self._lru.move_to_end(origin)
                self.lru_hits += 1
                return policy, "lru"
            del self._lru[origin]
        if self.store is not None:
            try:
                found = self._get_redis(origin, now)
            except StateError as exc:  # an outage: fetch it again rather than fail the request
                logger.debug("robots.txt cache of %s not readable: %s", origin, exc)
                found = None
            if found is not None:
                policy, expires = found
                self._remember(origin, policy, min(expires, now + self.lru_seconds))
                self.redis_hits += 1
                return policy, "redis"
        self.misses += 1
        return None, "miss"

    def put(self, origin: str, verdict: Verdict) -> None:
        """Store a fresh answer, valid for ``verdict.ttl`` seconds (capped at 24 h)."""
        now = self.clock.time()
        ttl = max(0.0, min(verdict.ttl, MAX_CACHE_SECONDS))
        expires = now + ttl
        if self.store is not None and ttl > 0:
            try:
                self.store.put(origin, {
                    "kind": verdict.policy.kind.value,
                    "rules": verdict.policy.rules,
                    "status": "" if verdict.status is None else str(verdict.status),
                    "fetched": repr(now),
                    "expires": repr(expires),
                }, ttl)
            except StateError as exc:  # kept in this process; others fetch it themselves
                logger.debug("robots.txt answer of %s not stored: %s", origin, exc)
        self._remember(origin, verdict.policy, min(expires, now + self.lru_seconds))

    def forget(self, origin: str) -> None:
        """Drop the origin's answer here and in Redis (the next request fetches robots.txt)."""
        self._lru.pop(origin, None)
        if self.store is not None:
            self.store.delete(origin)

    def _get_redis(self, origin: str, now: float) -> tuple[RobotsPolicy, float] | None:
        fields = self.store.get(origin) if self.store is not None else None
        if not fields:
            return None
        try:
            kind = Kind(fields["kind"])
            fetched = float(fields["fetched"])
            expires = min(float(fields["expires"]), fetched + MAX_CACHE_SECONDS)
        except (KeyError, ValueError):
            return None  # written by something else: treat as absent, the fetch overwrites it
        if now >= expires:
            return None
        return RobotsPolicy(kind, fields.get("rules", "")), expires

    def _remember(self, origin: str, policy: RobotsPolicy, expires: float) -> None:
        if self.lru_size == 0 or expires <= self.clock.time():
            return
        self._lru[origin] = (policy, expires)
        self._lru.move_to_end(origin)
        while len(self._lru) > self.lru_size:
            self._lru.popitem(last=False)

    def __len__(self) -> int:
        return len(self._lru)
