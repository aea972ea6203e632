"""The cycle ledger in Redis: what each cycle may spend, what it spent, and what it found.

The rules are :class:`webcrawl.revisit.ledger.CycleLedger`'s (admit a fetch only if booked +
in flight + its expected cost fits the budget; book its actual cost when it lands), applied here
atomically for every process of the crawl. Per-cycle metrics per page type feed the report.

Keys (see :mod:`webcrawl.state.keys`): ``{c}:cycle`` (hash: the current cycle), ``{c}:cycles``
(zset: cycle id -> start time), ``{c}:cycle:<id>`` (hash: the cycle's numbers, below).

| field of ``{c}:cycle:<id>`` | meaning |
| --- | --- |
| ``budget``, ``started``, ``ends`` | the cycle's budget (site cost unit) and times |
| ``booked``, ``in_flight``, ``refused`` | spent, expected cost of fetches under way, fetches not admitted |
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
if committed + expected > budget then
  redis.call('HINCRBY', KEYS[1], 'refused', 1)
  return 0
end
redis.call('HINCRBYFLOAT', KEYS[1], 'in_flight', expected)
return 1
"""

OUTCOMES = ("new", "changed", "unchanged")


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
        d = {k.decode(): v.decode() for k, v in raw.items()}
        return Cycle(int(d["id"]), float(d["started"]), float(d["ends"]), float(d["budget"]))

    def admit(self, cycle_id: int, expected: float) -> bool:
        """Reserve ``expected`` for a fetch about to start; False if it does not fit the budget
        (it waits for the next cycle)."""
        return int(self._admit(keys=[self.cycle_key(cycle_id)], args=[expected])) == 1

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
        return {k.decode(): float(v) for k, v in raw.items()}

    def cycle_ids(self) -> list[int]:
        return [int(i) for i in self.client.zrange(self.keys.prefix + "cycles", 0, -1)]
