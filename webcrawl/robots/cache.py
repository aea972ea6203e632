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

import math
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from webcrawl.clock import Clock, SystemClock
from webcrawl.robots.policy import MAX_CACHE_SECONDS, Kind, RobotsPolicy, Verdict

if TYPE_CHECKING:
    from collections.abc import Callable

    import redis

ROBOTS_PREFIX = "webcrawl:robots:"


def robots_key(origin: str) -> str:
    """A stand-alone key of an origin's answer (``origin`` is ``scheme://host:port``), for a cache
    used outside a crawl."""
    return ROBOTS_PREFIX + origin


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class RobotsCache:
    """Get and put robots.txt answers by origin.

    ``redis_client`` may be None (tests, or a crawl without shared state): only the LRU is used.
    """

    def __init__(self, redis_client: redis.Redis | None, *, lru_size: int = 1024,
                 lru_seconds: float = 300.0, clock: Clock | None = None,
                 key_for: Callable[[str], str] = robots_key) -> None:
        if lru_size < 0 or lru_seconds < 0:
            raise ValueError(f"lru_size={lru_size!r} and lru_seconds={lru_seconds!r} must be >= 0")
        self.redis = redis_client
        self.key_for = key_for
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
        if self.redis is not None:
            found = self._get_redis(origin, now)
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
        if self.redis is not None and ttl > 0:
            key = self.key_for(origin)
            pipe = self.redis.pipeline(transaction=False)
            pipe.delete(key)
            pipe.hset(key, mapping={
                "kind": verdict.policy.kind.value,
                "rules": verdict.policy.rules,
                "status": "" if verdict.status is None else str(verdict.status),
                "fetched": repr(now),
                "expires": repr(expires),
            })
            pipe.pexpire(key, max(1, math.ceil(ttl * 1000)))
            pipe.execute()
        self._remember(origin, verdict.policy, min(expires, now + self.lru_seconds))

    def forget(self, origin: str) -> None:
        """Drop the origin's answer here and in Redis (the next request fetches robots.txt)."""
        self._lru.pop(origin, None)
        if self.redis is not None:
            self.redis.delete(self.key_for(origin))

    def _get_redis(self, origin: str, now: float) -> tuple[RobotsPolicy, float] | None:
        raw: dict[Any, Any] = self.redis.hgetall(self.key_for(origin)) if self.redis else {}
        if not raw:
            return None
        fields = {_text(k): _text(v) for k, v in raw.items()}
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
