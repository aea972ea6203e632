"""The cycle ledger in Redis (crawl-wide slot): what each cycle may spend, what it spent and what
it found, and which processes work on it.

A cycle is the budget's accounting and reporting period: one ``scrapy crawl`` run, or every
``cycle_seconds`` of a continuous crawl. Spending itself is paced by the shared spend bucket
(:mod:`webcrawl.state.bucket`); the ledger books what landed. Figures reach it in batches
(:meth:`webcrawl.state.batch.WriteBatch.ledger`, idempotent per batch).

Keys (crawl-wide slot, :mod:`webcrawl.state.layout`): ``cycle`` (hash: the current cycle),
``cycle:seq``, ``cycles`` (zset: id -> start time), ``cycle:<id>`` (hash: the figures below),
``cycle:<id>:workers`` (zset: process token -> heartbeat expiry), ``cycles:rolled`` (hash: the
cycles past the retention, rolled up), ``planner:lock`` (a :class:`~webcrawl.state.lock.TokenLock`).

Retention (:meth:`LedgerStore.retain`): the newest ``WEBCRAWL_CYCLE_RETENTION`` cycles keep their
hashes; an older one, once it has ended a while ago and no process works on it, is rolled up
(``lua2/rollup.lua``): its amounts (budget, booked, idle, spent, fetches, costs and verdicts per
page type) are added to ``cycles:rolled``, its snapshots (coverage and freshness at its close,
the allocator's latest figures) dropped, and its keys deleted. So the report's totals over all
cycles stay whole while the ledger keeps a bounded number of keys. Processes whose heartbeat
expired (they died without leaving) are removed from the workers of the cycles kept.

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
from importlib import resources
from typing import TYPE_CHECKING, Any

from webcrawl.state.lock import TokenLock

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout

__all__ = ["OUTCOMES", "Cycle", "LedgerStore", "Retained", "crawls_with_cycles"]

OUTCOMES = ("new", "changed", "unchanged")
#: Fields of ``cycles:rolled`` that describe the cycles it holds rather than add up their figures.
ROLLUP_FIELDS = ("cycles", "first", "last", "started", "ends")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True)
class Cycle:
    id: int
    started: float
    ends: float
    budget: float


@dataclass(frozen=True)
class Retained:
    """What one retention pass did: cycles rolled up, dead workers removed."""

    rolled: int
    dead_workers: int


class LedgerStore:
    """Cycles of one crawl (see the module docstring)."""

    def __init__(self, client: Any, layout: CrawlLayout) -> None:
        self.client = client
        self.layout = layout
        self.planning_lock = TokenLock(client, layout.planner_lock)
        self._rollup = client.register_script(
            resources.files("webcrawl.state").joinpath("lua2/rollup.lua").read_text())

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
        return self.planning_lock.acquire(token, ttl_seconds)

    def unlock(self, token: str) -> bool:
        """Release the lock if ``token`` still holds it (never someone else's after an expiry)."""
        return self.planning_lock.release(token)

    # -- the processes working on a cycle --------------------------------------------------------

    def heartbeat(self, cycle_id: int, worker: str, expires: float) -> None:
        """``worker`` works on the cycle until ``expires`` (server time) unless it beats again."""
        self.client.zadd(f"{self.cycle_key(cycle_id)}:workers", {worker: expires})

    def leave(self, cycle_id: int, worker: str) -> None:
        self.client.zrem(f"{self.cycle_key(cycle_id)}:workers", worker)

    def live_workers(self, cycle_id: int, now: float) -> int:
        """Processes whose heartbeat has not expired at ``now``."""
        return int(self.client.zcount(f"{self.cycle_key(cycle_id)}:workers", f"({now!r}", "+inf"))

    def workers(self, cycle_id: int) -> dict[str, float]:
        """Every process noted on the cycle, live or not: token -> heartbeat expiry."""
        raw = self.client.zrange(f"{self.cycle_key(cycle_id)}:workers", 0, -1, withscores=True)
        return {_text(k): float(v) for k, v in raw}

    # -- retention -------------------------------------------------------------------------------

    @property
    def rollup_key(self) -> str:
        return self.layout.key("cycles:rolled")

    def rolled_up(self) -> dict[str, float]:
        """The summary of the cycles rolled up (empty when none was): their amounts added up, and
        ``cycles`` (how many), ``first``, ``last`` (ids), ``started`` (the first's start),
        ``ends`` (the last's end)."""
        raw = self.client.hgetall(self.rollup_key)
        return {_text(k): float(v) for k, v in raw.items()}

    def roll_up(self, cycle_id: int) -> bool:
        """Fold cycle ``cycle_id`` into the summary and delete its keys (see the module
        docstring); False when it was rolled up already."""
        key = self.cycle_key(cycle_id)
        return bool(self._rollup(keys=[key, f"{key}:workers", self.layout.key("cycles"),
                                       self.rollup_key], args=[cycle_id]))

    def retain(self, keep: int, now: float, settle_seconds: float,
               current: int | None = None) -> Retained:
        """Keep the newest ``keep`` cycles (at least one); roll up the older ones that ended at
        least ``settle_seconds`` before ``now`` (server time: what was in flight at their end
        has been booked), have no live worker and are not ``current``. Remove the expired
        workers of the cycles kept."""
        keep = max(int(keep), 1)
        entries = self.client.zrange(self.layout.key("cycles"), 0, -1, withscores=True)
        ids = [int(i) for i, _ in entries]
        started = {int(i): float(at) for i, at in entries}
        old = [i for i in ids[:-keep] if i != current]
        gone: set[int] = set()
        rolled = 0
        if old:
            pipe = self.client.pipeline(transaction=False)
            for i in old:
                pipe.hget(self.cycle_key(i), "ends")
                pipe.zcount(f"{self.cycle_key(i)}:workers", f"({now!r}", "+inf")
            replies = pipe.execute()
            for j, i in enumerate(old):
                ends, live = replies[2 * j], int(replies[2 * j + 1])
                over = float(ends) if ends is not None else started[i]
                if live == 0 and over + settle_seconds <= now:
                    rolled += self.roll_up(i)  # 0: rolled up already, by another process
                    gone.add(i)
        kept = [i for i in ids if i not in gone]
        dead = 0
        if kept:
            pipe = self.client.pipeline(transaction=False)
            for i in kept:
                pipe.zremrangebyscore(f"{self.cycle_key(i)}:workers", "-inf", repr(float(now)))
            dead = sum(int(n) for n in pipe.execute())
        return Retained(rolled, dead)


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
