"""What the crawl knows about each host, in the host's shard: its delay (the site's minimum raised
by a Crawl-delay), its health (a decaying bad-outcome rate, the bad streak and the latest backoff
hold), and its trust in validators and in sitemap dates.

Writes are land operations (:mod:`webcrawl.state.batch`), built here; reads go through
:class:`HostStore`, which keeps each answer a few seconds in the process (bounded LRU).
"""

from __future__ import annotations

import json
import math
import struct
import time
from collections import OrderedDict
from dataclasses import dataclass
from itertools import islice
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis

from webcrawl.change.trust import TrustPolicy, ValidatorTrust
from webcrawl.revisit import TrustTracker

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout

__all__ = ["DomainHealth", "HostStore", "TimedCache", "attempt_op", "delay_op", "finished_op",
           "validator_op"]

_HEALTH = struct.Struct("<dddId")
_UNANSWERED = object()


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def attempt_op(ok: bool, *, retry_after: float | None, base: float, maximum: float,
               half_life: float, time: float) -> tuple[str, list[Any]]:
    """Land operation "A": one attempt's outcome; a bad one holds the host back (Retry-After
    first, else ``base * 2**(streak - 1)``, at most ``maximum``). Answers streak, previous
    streak, hold seconds."""
    return "A", ["1" if ok else "0", "" if retry_after is None else repr(float(retry_after)),
                 repr(float(base)), repr(float(maximum)), repr(float(half_life)), repr(float(time))]


def finished_op(at: float) -> tuple[str, list[Any]]:
    """Land operation "F": a fetch from the host finished at server time ``at`` (the batch may
    reach Redis a flush later): its next turn is one delay after that, or after the script's own
    ``now`` if that is earlier."""
    return "F", [repr(float(at))]


def delay_op(seconds: float) -> tuple[str, list[Any]]:
    return "D", [repr(float(seconds))]


def validator_op(event: str, time: float, policy: TrustPolicy) -> tuple[str, list[Any]]:
    """Land operation "V": evidence about the host's validators (confirmed, lied, ignored,
    not_modified); answers the host's new trust state when it changed."""
    return "V", [event, repr(float(time)), policy.earn_after, policy.ignore_limit,
                 policy.lie_limit, repr(float(policy.retry_seconds))]


@dataclass(frozen=True)
class DomainHealth:
    bad: float = 0.0
    weight: float = 0.0
    at: float = 0.0
    streak: int = 0
    until: float = 0.0

    def bad_rate(self, now: float, half_life_seconds: float) -> float:
        bad, weight = self.bad, self.weight
        if self.at and now > self.at:
            factor = math.exp2(-(now - self.at) / half_life_seconds)
            bad, weight = bad * factor, weight * factor
        return bad / max(weight, 1.0)


class TimedCache:
    """A bounded LRU whose entries are good for ``seconds`` (``get`` says None after that)."""

    def __init__(self, size: int, seconds: float) -> None:
        self.size, self.seconds = size, seconds
        self._data: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str) -> Any:
        hit = self._data.get(key)
        if hit is None or time.monotonic() - hit[0] >= self.seconds:
            return None
        return hit[1]

    def put(self, key: str, value: Any) -> Any:
        self._data[key] = (time.monotonic(), value)
        self._data.move_to_end(key)
        while len(self._data) > self.size:
            self._data.popitem(last=False)
        return value

    def drop(self, key: str) -> None:
        self._data.pop(key, None)

    def stale(self, key: str, default: Any) -> Any:
        """The last value known, however old, else ``default``."""
        hit = self._data.get(key)
        return hit[1] if hit is not None else default


class HostStore:
    """Reads about hosts, cached ``cache_seconds`` per host in a bounded LRU."""

    def __init__(self, client: Any, layout: CrawlLayout, *, default_delay: float,
                 cache_seconds: float = 5.0, cache_size: int = 10_000,
                 sitemap_trust: TrustTracker | None = None) -> None:
        self.client = client
        self.layout = layout
        self.default_delay = default_delay
        self._delays = TimedCache(cache_size, cache_seconds)
        self._health = TimedCache(cache_size, cache_seconds)
        self._validators = TimedCache(cache_size, cache_seconds)
        self._sitemaps = TimedCache(cache_size, cache_seconds)
        self.sitemap_trust = sitemap_trust or TrustTracker(both_ways=True)
        self._holds: OrderedDict[str, float] = OrderedDict()  # host -> held until (monotonic)
        #: Whether Redis is known not to answer now (an outage): reads then keep what they knew
        #: without waiting for a timeout each. ``on_error`` hears of each failed read.
        self.offline: Callable[[], bool] = lambda: False
        self.on_error: Callable[[Exception], None] | None = None
        self._holds_size = cache_size
        #: Set by a caller that sends reads behind (the crawl's runtime): a host whose reads went
        #: stale is then answered from what the process knew, and ``due_now`` is called; the
        #: caller sends :meth:`refresh_build` for :meth:`take_due` soon and hands the replies to
        #: :meth:`refreshed`. Unset, a stale host is read at once, waiting for Redis.
        self.due_now: Callable[[], None] | None = None
        self._due: dict[str, None] = {}  # answered stale, read not sent yet
        self._reading: set[str] = set()  # read sent, not answered yet

    def _read(self, host: str, *keys: str) -> Any:
        """``host``'s field in each hash of ``keys``, in one round trip; ``_UNANSWERED`` when
        Redis does not answer (callers keep what they knew: an outage must not fail the request
        that asked)."""
        if self.offline():
            return _UNANSWERED
        try:
            pipe = self.client.pipeline(transaction=False)
            for key in keys:
                pipe.hget(key, host)
            return pipe.execute()
        except redis.RedisError as exc:
            if self.on_error is not None:
                self.on_error(exc)
            return _UNANSWERED

    def _refresh(self, host: str) -> tuple[float, DomainHealth, ValidatorTrust] | None:
        """Read what a request to ``host`` needs (its delay, health and validator trust) in one
        round trip, into the caches: a process meets a host's three reads together, and three
        round trips each blocked the reactor. None when Redis does not answer."""
        shard = self.layout.shard(host)
        replies = self._read(host, shard.delay, shard.health, shard.trust_validators)
        if replies is _UNANSWERED:
            return None
        return self._store(host, replies)

    def _cached(self, cache: TimedCache, host: str, index: int, default: Any, *,
                wait: bool = True) -> Any:
        """``host``'s value in ``cache`` (index ``index`` of a refresh): fresh, else the stale
        one while a read goes behind (see ``due_now``), else read now. ``wait=False``: a host
        never read is answered ``default`` while its read goes behind too."""
        cached = cache.get(host)
        if cached is not None:
            return cached
        if self.due_now is not None:
            stale = cache.stale(host, _UNANSWERED)
            if stale is not _UNANSWERED or not wait:
                if host not in self._due and host not in self._reading:
                    self._due[host] = None
                    self.due_now()
                return default if stale is _UNANSWERED else stale
        read = self._refresh(host)
        return read[index] if read is not None else cache.stale(host, default)

    @property
    def due(self) -> int:
        """Hosts answered stale, waiting for their read behind."""
        return len(self._due)

    def take_due(self, most: int = 256) -> list[str]:
        """Up to ``most`` hosts answered stale, for one read behind (first come, first read);
        they are not due again until :meth:`refreshed` or :meth:`unread`."""
        hosts = list(islice(self._due, most))
        for host in hosts:
            del self._due[host]
        self._reading.update(hosts)
        return hosts

    def refresh_build(self, hosts: list[str]) -> Callable[[Any], None]:
        """Queues on a pipeline the reads :meth:`refreshed` takes the replies of."""

        def build(pipe: Any) -> None:
            for host in hosts:
                shard = self.layout.shard(host)
                for key in (shard.delay, shard.health, shard.trust_validators):
                    pipe.hget(key, host)

        return build

    def refreshed(self, hosts: list[str], replies: list[Any]) -> None:
        """The replies of :meth:`refresh_build` for ``hosts``, into the caches."""
        for i, host in enumerate(hosts):
            self._reading.discard(host)
            self._store(host, replies[3 * i:3 * i + 3])

    def unread(self, hosts: list[str]) -> None:
        """The read of ``hosts`` failed: they stay stale, and are due again when next asked."""
        self._reading.difference_update(hosts)

    def _store(self, host: str, replies: list[Any]) -> tuple[float, DomainHealth, ValidatorTrust]:
        raw_delay, raw_health, raw_trust = replies
        delay = max(float(raw_delay), self.default_delay) if raw_delay else self.default_delay
        health = DomainHealth(*_HEALTH.unpack(raw_health)) if raw_health else DomainHealth()
        trust = ValidatorTrust()
        if raw_trust:
            try:
                trust = ValidatorTrust.from_dict(json.loads(raw_trust))
            except (ValueError, TypeError):
                trust = ValidatorTrust()
        return (self._delays.put(host, delay), self._health.put(host, health),
                self._validators.put(host, trust))

    def delay(self, host: str) -> float:
        return self._cached(self._delays, host, 0, self.default_delay)

    def note_delay(self, host: str, seconds: float) -> None:
        """This process learned the host's delay (a Crawl-delay): use it at once."""
        self._delays.put(host, max(seconds, self.default_delay))

    def hold(self, host: str, seconds: float) -> None:
        """This process saw a bad answer from ``host`` and backs it off ``seconds`` from now:
        requests of this process already popped for it wait too (the crawl's queue learns the
        hold with the next flush, and pops nothing more of the host until it ends)."""
        until = time.monotonic() + max(seconds, 0.0)
        if until <= self._holds.get(host, -math.inf):
            return
        self._holds[host] = until
        self._holds.move_to_end(host)
        while len(self._holds) > self._holds_size:
            self._holds.popitem(last=False)

    def held_until(self, host: str) -> float:
        """When this process's latest hold of ``host`` ends (``time.monotonic``; -inf: none)."""
        until = self._holds.get(host)
        if until is None:
            return -math.inf
        if until <= time.monotonic():
            del self._holds[host]
            return -math.inf
        return until

    def health(self, host: str, *, wait: bool = True) -> DomainHealth:
        """``wait=False``: a host this process never read is taken as healthy while its read
        goes behind (for estimates, such as a discovered link's expected cost)."""
        return self._cached(self._health, host, 1, DomainHealth(), wait=wait)

    def validators(self, host: str) -> ValidatorTrust:
        return self._cached(self._validators, host, 2, ValidatorTrust())

    def forget_validators(self, host: str) -> None:
        self._validators.drop(host)

    def sitemaps_trusted(self, host: str) -> bool:
        cached = self._sitemaps.get(host)
        if cached is None:
            replies = self._read(host, self.layout.shard(host).trust_sitemaps)
            if replies is _UNANSWERED:
                return bool(self._sitemaps.stale(host, False))
            raw = replies[0]
            t = self.sitemap_trust
            data = json.loads(raw) if raw else {}
            tracker = TrustTracker(t.min_agreements, t.max_disagreement_rate, t.memory,
                                   int(data.get("comparisons", 0)),
                                   float(data.get("disagreement_rate", 0.0)), t.both_ways,
                                   int(data.get("loud", 0)), int(data.get("quiet", 0)))
            cached = self._sitemaps.put(host, tracker.trusted)
        return cached

    def all_sitemap_trust(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for shard in self.layout.all_shards:
            for host, raw in self.client.hgetall(shard.trust_sitemaps).items():
                out[_text(host)] = json.loads(raw)
        return out
