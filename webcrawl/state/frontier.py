"""Per-domain frontiers and the ready queue of domains, in Redis.

A *domain* here is the request's host name (lowercase, without port). Politeness is owed to a
server, and a host name is the closest cheap proxy for one: a registered domain would throttle
``a.blogspot.com`` and ``b.blogspot.com`` together although they are served independently, and a
site that spreads one server over many host names can be held back with per-domain delays.

Each frontier is a sorted set ordered by priority (score ``-priority``), first-in first-out among
equal priorities (members start with a zero-padded sequence number), capped at ``cap`` requests:
past the cap the lowest priority is evicted and counted. The ready queue orders domains with
queued requests by their next-allowed fetch time. Popping is one Lua script, so any number of
processes can share a crawl without ever fetching from one domain more often than its delay allows.

A popped request is *leased*: it stays in Redis until its owner acknowledges it, and goes back to
its frontier (same place in line) if the lease expires first, so a crash loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from webcrawl.state.keys import EXCLUDED as EXCLUDED_KEY

import redis

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from redis.commands.core import Script

    from webcrawl.state.keys import CrawlKeys
    from webcrawl.state.seen import BloomParams

PUSHED, FILTERED, EVICTED, EXCLUDED = 1, 0, 2, 3


def _script(client: redis.Redis, name: str) -> Script:
    source = resources.files("webcrawl.state").joinpath(f"lua/{name}.lua").read_text()
    return client.register_script(source)


@dataclass(frozen=True)
class Entry:
    """A request to push: its domain, sort score (-priority), JSON payload and, to be tested
    against the seen filter, its bit offsets (None bypasses the filter)."""

    domain: str
    score: float
    payload: str
    offsets: Sequence[int] | None = None


@dataclass(frozen=True)
class Counts:
    queued: int
    leased: int


@dataclass(frozen=True)
class Popped:
    """Requests popped as ``(lease id, payload)``, the totals after the pop, and the earliest
    next-allowed time of a domain still queued (None when no domain is queued)."""

    items: list[tuple[str, str]]
    counts: Counts
    earliest: float | None


class Frontier:
    """The crawl's frontiers, ready queue and leases (see the module docstring)."""

    def __init__(self, client: redis.Redis, keys: CrawlKeys, bloom: BloomParams, *,
                 cap: int, default_delay: float, lease_seconds: float) -> None:
        self.client = client
        self.keys = keys
        self.bloom = bloom
        self.cap = cap
        self.default_delay = default_delay
        self.lease_seconds = lease_seconds
        self._push = _script(client, "push")
        # Called by SHA inside pipelines: a pipeline holding a Script object first sends a
        # blocking SCRIPT EXISTS of its own, an extra round trip on every flush.
        self._push_sha = ""
        self._pop = _script(client, "pop")
        self._requeue = _script(client, "requeue")
        self._hold = _script(client, "hold")

    def check_seen_filter(self) -> None:
        """Record the seen filter's size on first use; refuse to reuse one sized differently
        (its bit offsets would not match and every URL would look new)."""
        wanted = {"capacity": str(self.bloom.capacity), "error_rate": repr(self.bloom.error_rate)}
        pipe = self.client.pipeline()
        for field, value in wanted.items():
            pipe.hsetnx(self.keys.seen_meta, field, value)
        pipe.hgetall(self.keys.seen_meta)
        stored = {k.decode(): v.decode() for k, v in pipe.execute()[-1].items()}
        if stored != wanted:
            raise ValueError(
                f"crawl {self.keys.crawl!r} has a seen-URL filter sized for capacity "
                f"{stored.get('capacity')} at error rate {stored.get('error_rate')}, but "
                f"WEBCRAWL_BLOOM_CAPACITY / WEBCRAWL_BLOOM_ERROR_RATE ask for {wanted['capacity']} "
                f"at {wanted['error_rate']}: use the same values, or clear the crawl"
            )
        # Allocate the whole bitmap now: one allocation instead of growing a large string bit by bit.
        if self.client.strlen(self.keys.seen) < self.bloom.num_bytes:
            self.client.setbit(self.keys.seen, self.bloom.num_bits - 1, 0)

    def flush(self, entries: Sequence[Entry], acks: Iterable[str], now: float,
              finished: Sequence[tuple[str, float]] = ()) -> tuple[list[int], Counts]:
        """Push ``entries``, record ``finished`` fetches as ``(domain, time)`` (each pushes its
        domain's next-allowed time to at least time + delay), then acknowledge the leases ``acks``,
        in one round trip.

        Pushing first matters: a finished request's children are in Redis before its lease is
        released, so a crash in between refetches the parent rather than losing the children.
        Returns each entry's status (PUSHED, FILTERED or EVICTED) and the totals.
        """
        try:
            return self._flush_once(entries, acks, now, finished)
        except redis.exceptions.NoScriptError:
            # The server lost its script cache (restart, SCRIPT FLUSH): load it and go again.
            # Safe to repeat: the push was refused whole, and releasing leases is idempotent.
            self._push_sha = ""
            return self._flush_once(entries, acks, now, finished)

    def _flush_once(self, entries: Sequence[Entry], acks: Iterable[str], now: float,
                    finished: Sequence[tuple[str, float]]) -> tuple[list[int], Counts]:
        pipe = self.client.pipeline(transaction=False)
        if entries or finished:
            args: list[object] = [self.keys.prefix, now, self.cap, self.bloom.num_slices,
                                  self.default_delay, len(entries), len(finished), EXCLUDED_KEY]
            for e in entries:
                args += (e.domain, e.score, e.payload)
                if e.offsets is None:
                    args.append("0")
                else:
                    args.append("1")
                    args += e.offsets
            for domain, when in finished:
                args += (domain, when)
            if not self._push_sha:
                self._push_sha = self.client.script_load(self._push.script)
            pipe.evalsha(self._push_sha, 0, *args)
        acks = list(acks)
        if acks:
            pipe.zrem(self.keys.leases, *acks)
            pipe.hdel(self.keys.leased, *acks)
        pipe.get(self.keys.queued)
        pipe.zcard(self.keys.leases)
        replies = pipe.execute()
        statuses = [int(s) for s in replies[0][2:]] if entries or finished else []
        return statuses, Counts(int(replies[-2] or 0), int(replies[-1]))

    def pop(self, now: float, max_count: int = 1) -> Popped:
        reply = self._pop(args=[self.keys.prefix, now, self.default_delay, self.lease_seconds,
                                max_count, EXCLUDED_KEY])
        items = [(reply[i].decode(), reply[i + 1].decode()) for i in range(3, len(reply), 2)]
        earliest = float(reply[2]) if reply[2] else None
        return Popped(items, Counts(int(reply[0]), int(reply[1])), earliest)

    def renew(self, lease_ids: Iterable[str], now: float) -> None:
        """Extend leases still held by a live process (``XX``: never resurrect a released one)."""
        ids = list(lease_ids)
        if ids:
            expiry = now + self.lease_seconds
            self.client.zadd(self.keys.leases, dict.fromkeys(ids, expiry), xx=True)

    def requeue(self, lease_ids: Iterable[str], now: float, *, force: bool = True) -> int:
        """Put leased requests back in line; without ``force`` only expired ones."""
        ids = list(lease_ids)
        if not ids:
            return 0
        return int(self._requeue(args=[self.keys.prefix, now, "1" if force else "0", *ids]))

    def reclaim_expired(self, now: float, batch: int = 1000) -> int:
        """Put back every request whose lease expired (its owner died or hung)."""
        total = 0
        while True:
            expired = self.client.zrangebyscore(self.keys.leases, "-inf", now, start=0, num=batch)
            if not expired:
                return total
            back = self.requeue([i.decode() for i in expired], now, force=False)
            total += back
            if back == 0:  # renewed under our feet; the rest is not ours to take
                return total

    def counts(self) -> Counts:
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self.keys.queued)
        pipe.zcard(self.keys.leases)
        queued, leased = pipe.execute()
        return Counts(int(queued or 0), int(leased))

    def set_delay(self, domain: str, seconds: float) -> None:
        self.client.hset(self.keys.delay, domain, seconds)

    def hold(self, domain: str, until: float) -> bool:
        """Push ``domain``'s next-allowed time to at least ``until`` (backoff); never earlier.
        Returns whether it moved."""
        return bool(self._hold(args=[self.keys.prefix, domain, until]))

    def excluded_dropped(self) -> int:
        """Queued requests dropped so far because their domain was excluded."""
        return int(self.client.get(self.keys.prefix + "excluded:dropped") or 0)

    def clear(self) -> int:
        """Delete every key of the crawl (an explicit user action; closing never does this)."""
        deleted = 0
        batch: list[bytes] = []
        for key in self.client.scan_iter(match=self.keys.pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += self.client.unlink(*batch)
                batch.clear()
        if batch:
            deleted += self.client.unlink(*batch)
        return deleted
