"""The cycle ledger in Redis (crawl-wide slot): what each cycle may spend, what it spent and what
it found, and which processes work on it.

A cycle is the budget's accounting and reporting period: one ``scrapy crawl`` run, or every
``cycle_seconds`` of a continuous crawl. Spending itself is paced by the shared spend bucket
(:mod:`webcrawl.state.bucket`); the ledger books what landed. Figures reach it in batches
(:meth:`webcrawl.state.batch.WriteBatch.ledger`, idempotent per batch).

Keys (crawl-wide slot, :mod:`webcrawl.state.layout`): ``cycle`` (hash: the current cycle),
``cycle:seq``, ``cycles`` (zset: id -> start time), ``cycle:<id>`` (hash: the figures below),
``cycle:<id>:workers`` (zset: process token -> heartbeat expiry), ``planner:lock``.

| field of ``cycle:<id>`` | meaning |
| --- | --- |
| ``budget``, ``started``, ``ends``, ``rate`` | the cycle's budget, times and budget rate per second |
| ``booked`` | cost of the fetches that landed (site unit) |
| ``spent:<purpose>`` | booked per purpose (revisit, discovery, sitemap, robots, ...) |
| ``fetches:<page type>``, ``cost:<page type>`` | fetches and their cost per page type |
| ``new:<page type>``, ``changed:<page type>``, ``unchanged:<page type>`` | what they found |
| ``idle`` | budget the cycle left unused (its budget less what it booked), set at its close |
| ``known``, ``fetched``, ``waiting``, ``never_fetched`` | coverage at the cycle's close |
| ``planned:<purpose>``, ``alloc_seconds``, ... | what the allocator decided (latest run) |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout

__all__ = ["OUTCOMES", "Cycle", "LedgerStore", "crawls_with_cycles"]

OUTCOMES = ("new", "changed", "unchanged")

# Delete the lock only if it still holds our token (it may have expired and been taken).
_UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True)
class Cycle:
    id: int
    started: float
    ends: float
    budget: float


class LedgerStore:
    """Cycles of one crawl (see the module docstring)."""

    def __init__(self, client: Any, layout: CrawlLayout) -> None:
        self.client = client
        self.layout = layout
        self._unlock = client.register_script(_UNLOCK)

    def cycle_key(self, cycle_id: int) -> str:
        return self.layout.key(f"cycle:{cycle_id}")

    def start_cycle(self, budget: float, cycle_seconds: float, now: float) -> Cycle:
        cycle_id = int(self.client.incr(self.layout.key("cycle:seq")))
        cycle = Cycle(cycle_id, now, now + cycle_seconds, budget)
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(self.cycle_key(cycle_id), mapping={
            "budget": budget, "started": now, "ends": cycle.ends, "booked": 0,
            "rate": budget / cycle_seconds if cycle_seconds > 0 else 0.0})
        pipe.hset(self.layout.key("cycle"), mapping={
            "id": cycle_id, "started": now, "ends": cycle.ends, "budget": budget})
        pipe.zadd(self.layout.key("cycles"), {str(cycle_id): now})
        pipe.execute()
        return cycle

    def current(self) -> Cycle | None:
        raw = self.client.hgetall(self.layout.key("cycle"))
        if not raw:
            return None
        d = {_text(k): _text(v) for k, v in raw.items()}
        return Cycle(int(d["id"]), float(d["started"]), float(d["ends"]), float(d["budget"]))

    def add(self, cycle_id: int, figures: dict[str, float]) -> None:
        """Add figures now (outside the per-turn batch: rare bookings such as a cycle's close)."""
        if figures:
            pipe = self.client.pipeline(transaction=False)
            for key, amount in figures.items():
                pipe.hincrbyfloat(self.cycle_key(cycle_id), key, amount)
            pipe.execute()

    def set(self, cycle_id: int, figures: dict[str, float]) -> None:
        if figures:
            self.client.hset(self.cycle_key(cycle_id),
                             mapping={k: repr(float(v)) for k, v in figures.items()})

    def numbers(self, cycle_id: int) -> dict[str, float]:
        raw = self.client.hgetall(self.cycle_key(cycle_id))
        return {_text(k): float(v) for k, v in raw.items()}

    def cycle_ids(self) -> list[int]:
        ids: list[bytes] = self.client.zrange(self.layout.key("cycles"), 0, -1)  # type: ignore[assignment]
        return [int(i) for i in ids]

    # -- planning lock ---------------------------------------------------------------------------

    def lock(self, token: str, ttl_seconds: float) -> bool:
        """Take the planning lock (``SET NX PX``): True if this ``token`` now holds it."""
        return bool(self.client.set(self.layout.planner_lock, token, nx=True,
                                    px=max(int(ttl_seconds * 1000), 1)))

    def unlock(self, token: str) -> bool:
        """Release the lock if ``token`` still holds it (never someone else's after an expiry)."""
        return bool(self._unlock(keys=[self.layout.planner_lock], args=[token]))

    # -- the processes working on a cycle --------------------------------------------------------

    def heartbeat(self, cycle_id: int, worker: str, expires: float) -> None:
        """``worker`` works on the cycle until ``expires`` (server time) unless it beats again."""
        self.client.zadd(f"{self.cycle_key(cycle_id)}:workers", {worker: expires})

    def leave(self, cycle_id: int, worker: str) -> None:
        self.client.zrem(f"{self.cycle_key(cycle_id)}:workers", worker)

    def live_workers(self, cycle_id: int, now: float) -> int:
        """Processes whose heartbeat has not expired at ``now``."""
        return int(self.client.zcount(f"{self.cycle_key(cycle_id)}:workers", f"({now!r}", "+inf"))


def crawls_with_cycles(client: Any) -> list[str]:
    """Names of the crawls on this Redis that have at least one cycle."""
    from webcrawl.state.layout import GLOBAL_PREFIX

    names = set()
    nodes = client.get_primaries() if hasattr(client, "get_primaries") else [None]
    for node in nodes:
        kwargs = {"target_nodes": node} if node is not None else {}
        for key in client.scan_iter(match=GLOBAL_PREFIX + "{*}:cycles", count=1000, **kwargs):
            text = key.decode() if isinstance(key, bytes) else key
            names.add(text[len(GLOBAL_PREFIX) + 1:text.rindex("}")])
    return sorted(names)
