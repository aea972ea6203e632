"""The cycle ledger in Redis: what each cycle may spend, what it spent, and what it found.

The rules are :class:`webcrawl.revisit.ledger.CycleLedger`'s (admit a fetch only if booked +
in flight + its expected cost fits the budget; book its actual cost when it lands), applied here
atomically for every process of the crawl. Per-cycle metrics per page type feed the report.

Keys (see :mod:`webcrawl.state.keys`): ``{c}:cycle`` (hash: the current cycle), ``{c}:cycles``
(zset: cycle id -> start time), ``{c}:cycle:<id>`` (hash: the cycle's numbers, below),
``{c}:cycle:<id>:workers`` (zset: process token -> heartbeat expiry), ``{c}:planner:lock``
(string: the planning lock's token), ``{c}:deferred`` (list: JSON requests a cycle could not
afford, re-enqueued when the next cycle starts).

Admission (:meth:`LedgerStore.admit`) is the one place where a fetch may be refused. Planned
visits eat into ``reserved`` (the expected cost of the cycle's plan not yet admitted), so that
unplanned fetches (discovery, listing-triggered visits) can use only what the plan left: the
reserves the planner set aside, and what it could not spend.

| field of ``{c}:cycle:<id>`` | meaning |
| --- | --- |
| ``budget``, ``started``, ``ends`` | the cycle's budget (site cost unit) and times |
| ``booked``, ``in_flight``, ``refused`` | spent, expected cost of fetches under way, fetches not admitted |
| ``reserved`` | expected cost of planned visits not admitted yet (see above) |
| ``planned``, ``planned:<purpose>``, ``plan:<purpose>`` | the plan: 1 once made; visits and expected cost per purpose |
| ``plan_seconds``, ``pages`` | time the plan took, known pages it scored |
| ``deferred`` | requests put aside for the next cycle |
| ``spent:<purpose>`` | cost booked per purpose (revisit, discovery, ...) |
| ``fetches:<page type>``, ``cost:<page type>`` | fetches that landed and their cost, per page type |
| ``new:<page type>``, ``changed:<page type>``, ``unchanged:<page type>`` | what they found |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis

    from webcrawl.state.keys import CrawlKeys

_ADMIT = """
local budget = tonumber(redis.call('HGET', KEYS[1], 'budget') or -1)
if budget < 0 then return -1 end
local committed = tonumber(redis.call('HGET', KEYS[1], 'booked') or 0)
    + tonumber(redis.call('HGET', KEYS[1], 'in_flight') or 0)
local expected = tonumber(ARGV[1])
local reserved = tonumber(redis.call('HGET', KEYS[1], 'reserved') or 0)
if ARGV[2] == '1' then reserved = math.max(reserved - expected, 0) end
if committed + reserved + expected > budget then
  redis.call('HINCRBY', KEYS[1], 'refused', 1)
  return 0
end
redis.call('HINCRBYFLOAT', KEYS[1], 'in_flight', expected)
if ARGV[2] == '1' then redis.call('HSET', KEYS[1], 'reserved', string.format('%.17g', reserved)) end
return 1
"""

# Give back a reservation that never reached the wire; in_flight never drops below 0.
_RELEASE = """
local left = tonumber(redis.call('HINCRBYFLOAT', KEYS[1], 'in_flight', -tonumber(ARGV[1])))
if left < 0 then redis.call('HSET', KEYS[1], 'in_flight', 0) end
return 1
"""

# Delete the lock only if it still holds our token (it may have expired and been taken).
_UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

OUTCOMES = ("new", "changed", "unchanged")


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

    def __init__(self, client: redis.Redis, keys: CrawlKeys) -> None:
        self.client = client
        self.keys = keys
        self._admit = client.register_script(_ADMIT)
        self._release = client.register_script(_RELEASE)
        self._unlock = client.register_script(_UNLOCK)

    def cycle_key(self, cycle_id: int) -> str:
        return f"{self.keys.prefix}cycle:{cycle_id}"

    def start_cycle(self, budget: float, cycle_seconds: float, now: float) -> Cycle:
        cycle_id = int(self.client.incr(self.keys.prefix + "cycle:seq"))
        cycle = Cycle(cycle_id, now, now + cycle_seconds, budget)
        pipe = self.client.pipeline()
        pipe.hset(self.cycle_key(cycle_id), mapping={
            "budget": budget, "started": now, "ends": cycle.ends, "booked": 0, "in_flight": 0,
            "refused": 0})
        pipe.hset(self.keys.prefix + "cycle", mapping={
            "id": cycle_id, "started": now, "ends": cycle.ends, "budget": budget})
        pipe.zadd(self.keys.prefix + "cycles", {str(cycle_id): now})
        pipe.execute()
        return cycle

    def current(self) -> Cycle | None:
        raw = self.client.hgetall(self.keys.prefix + "cycle")
        if not raw:
            return None
        d = {_text(k): _text(v) for k, v in raw.items()}
        return Cycle(int(d["id"]), float(d["started"]), float(d["ends"]), float(d["budget"]))

    def admit(self, cycle_id: int, expected: float, *, planned: bool = False) -> bool:
        """Reserve ``expected`` for a fetch about to start; False if it does not fit the budget
        (it waits for the next cycle). A ``planned`` visit draws on the plan's reservation;
        any other fetch must fit beside what the plan still holds. False for an unknown cycle."""
        return int(self._admit(keys=[self.cycle_key(cycle_id)],
                               args=[repr(float(expected)), "1" if planned else "0"])) == 1

    def release(self, cycle_id: int, expected: float) -> None:
        """Give back what :meth:`admit` reserved for a fetch that never went on the wire (refused
        by robots.txt, dropped by a later middleware): nothing is booked."""
        if expected:
            self._release(keys=[self.cycle_key(cycle_id)], args=[repr(float(expected))])

    def land(self, cycle_id: int, *, expected: float, actual: float, purpose: str,
             page_type: str | None) -> None:
        """Book a fetch that finished (``expected`` is what :meth:`admit` reserved, 0 if none)."""
        key, kind = self.cycle_key(cycle_id), page_type or "-"
        pipe = self.client.pipeline(transaction=True)
        if expected:
            pipe.hincrbyfloat(key, "in_flight", -expected)
        pipe.hincrbyfloat(key, "booked", actual)
        pipe.hincrbyfloat(key, f"spent:{purpose}", actual)
        pipe.hincrby(key, f"fetches:{kind}", 1)
        pipe.hincrbyfloat(key, f"cost:{kind}", actual)
        pipe.execute()

    def record_outcome(self, cycle_id: int, page_type: str | None, outcome: str) -> None:
        """What a fetch found: ``new``, ``changed`` or ``unchanged``."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome {outcome!r}: expected one of {OUTCOMES}")
        self.client.hincrby(self.cycle_key(cycle_id), f"{outcome}:{page_type or '-'}", 1)

    def numbers(self, cycle_id: int) -> dict[str, float]:
        raw = self.client.hgetall(self.cycle_key(cycle_id))
        return {_text(k): float(v) for k, v in raw.items()}

    def cycle_ids(self) -> list[int]:
        ids: list[bytes] = self.client.zrange(self.keys.prefix + "cycles", 0, -1)  # type: ignore[assignment]
        return [int(i) for i in ids]

    # -- planning ------------------------------------------------------------------------------

    def set_plan(self, cycle_id: int, reserved: float, fields: dict[str, float]) -> None:
        """Record the cycle's plan (``planned:<purpose>`` counts, ``plan:<purpose>`` expected
        costs, ...) and reserve its expected cost for the planned visits; marks it planned."""
        self.client.hset(self.cycle_key(cycle_id), mapping={
            **{k: repr(float(v)) for k, v in fields.items()}, "reserved": repr(float(reserved)),
            "planned": 1})

    def drop_reservation(self, cycle_id: int) -> None:
        """Planned visits not admitted by now will not be (the cycle is over): free their share."""
        self.client.hset(self.cycle_key(cycle_id), "reserved", 0)

    def reserved(self, cycle_id: int) -> float:
        """Expected cost of the cycle's planned visits not admitted yet."""
        return float(self.client.hget(self.cycle_key(cycle_id), "reserved") or 0.0)

    def is_planned(self, cycle_id: int) -> bool:
        return self.client.hget(self.cycle_key(cycle_id), "planned") is not None

    def lock(self, token: str, ttl_seconds: float) -> bool:
        """Take the planning lock (``SET NX PX``): True if this ``token`` now holds it."""
        return bool(self.client.set(self.keys.planner_lock, token, nx=True,
                                    px=max(int(ttl_seconds * 1000), 1)))

    def unlock(self, token: str) -> bool:
        """Release the lock if ``token`` still holds it (never someone else's after an expiry)."""
        return bool(self._unlock(keys=[self.keys.planner_lock], args=[token]))

    # -- the processes working on a cycle ------------------------------------------------------

    def heartbeat(self, cycle_id: int, worker: str, expires: float) -> None:
        """``worker`` works on the cycle until ``expires`` unless it beats again."""
        self.client.zadd(f"{self.cycle_key(cycle_id)}:workers", {worker: expires})

    def leave(self, cycle_id: int, worker: str) -> None:
        self.client.zrem(f"{self.cycle_key(cycle_id)}:workers", worker)

    def live_workers(self, cycle_id: int, now: float) -> int:
        """Processes whose heartbeat has not expired at ``now``."""
        return int(self.client.zcount(f"{self.cycle_key(cycle_id)}:workers", f"({now!r}", "+inf"))

    # -- what a cycle could not afford ---------------------------------------------------------

    def defer(self, cycle_id: int | None, payloads: list[str]) -> None:
        """Keep requests (JSON) for the next cycle: they were not afforded, never dropped."""
        if not payloads:
            return
        pipe = self.client.pipeline(transaction=True)
        pipe.rpush(self.keys.deferred, *payloads)
        if cycle_id is not None:
            pipe.hincrby(self.cycle_key(cycle_id), "deferred", len(payloads))
        pipe.execute()

    def peek_deferred(self, count: int = 10_000) -> list[str]:
        """The oldest ``count`` deferred requests, left in place: push them back into the
        frontiers first, then :meth:`trim_deferred`, so a crash in between refetches rather than
        loses them."""
        return [_text(i) for i in self.client.lrange(self.keys.deferred, 0, count - 1)]

    def trim_deferred(self, count: int) -> None:
        """Forget the oldest ``count`` deferred requests (they are back in the frontiers)."""
        self.client.ltrim(self.keys.deferred, count, -1)

    def deferred_count(self) -> int:
        return int(self.client.llen(self.keys.deferred))
