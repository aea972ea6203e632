"""Cycle keeping, on the allocator's worker thread: starting or joining a cycle under the planning
lock, the spend bucket's terms for it, the figures booked at its close, and the ledger's retention.

Starting or joining (:meth:`CycleKeeper.try_begin`) takes the planning lock once and gives up at
once when another process holds it: the reactor tries again a moment later
(:mod:`webcrawl.extensions.allocator`), so no thread ever sleeps waiting for another process.

Retention (``WEBCRAWL_CYCLE_RETENTION``, cycles): the ledger keeps the newest cycles whole and
rolls the older ones up (:meth:`webcrawl.state.ledger.LedgerStore.retain`), and drops the
processes whose heartbeat expired from the workers of the cycles it keeps. The lock holder runs
it when a cycle starts and every :data:`RETAIN_SECONDS` after.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webcrawl.state.ledger import Retained

if TYPE_CHECKING:
    from webcrawl.runtime import CrawlRuntime
    from webcrawl.state.ledger import Cycle

__all__ = ["BUCKET_SECONDS", "DEFAULT_RETENTION", "HEARTBEAT_SECONDS", "RETAIN_SECONDS", "Begun",
           "CycleKeeper", "retention_of"]

#: A continuous cycle's bucket holds at most this many seconds of its budget rate: after a stall
#: the spend catches up by at most that much, so any 10-second window stays within 1.3x the rate
#: (plus what is in flight).
BUCKET_SECONDS = 3.0
#: A process's heartbeat on its cycle lasts this long unless it beats again (every tick).
HEARTBEAT_SECONDS = 30.0
#: Cycles the ledger keeps whole by default; older ones are rolled up.
DEFAULT_RETENTION = 1000
#: Seconds between two retention passes of the lock holder (one also runs when a cycle starts).
RETAIN_SECONDS = 60.0
#: How long the planning lock is held at most while a cycle is started or joined.
LOCK_SECONDS = 30.0


def retention_of(settings: Any) -> int:
    """``WEBCRAWL_CYCLE_RETENTION``: a whole number of cycles, 1 or more."""
    raw = settings.get("WEBCRAWL_CYCLE_RETENTION", DEFAULT_RETENTION)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = 0.0
    if not (value >= 1 and value == int(value)):
        raise ValueError(f"WEBCRAWL_CYCLE_RETENTION={raw!r}: expected a whole number of cycles, 1 or more")
    return int(value)


@dataclass(frozen=True)
class Begun:
    """The cycle a process works on, and whether it started it (else it joined it)."""

    cycle: Cycle
    started: bool


class CycleKeeper:
    """The cycles of one process (see the module docstring)."""

    def __init__(self, runtime: CrawlRuntime, *, budget: float, cycle_seconds: float,
                 continuous: bool, worker: str, retention: int) -> None:
        self.runtime = runtime
        self.budget = budget
        self.cycle_seconds = cycle_seconds
        self.continuous = continuous
        self.worker = worker
        self.retention = retention
        self._retained_at = float("-inf")
        self._retained_for: int | None = None

    def try_begin(self) -> Begun | None:
        """Join the open cycle or start a new one, if the planning lock is free; ``None`` when
        another process holds it (it is starting or joining one: try again shortly)."""
        runtime = self.runtime
        ledger = runtime.ledger
        token = uuid.uuid4().hex
        if not ledger.lock(token, LOCK_SECONDS):
            return None
        try:
            now = runtime.clock.time()
            current = ledger.current()
            if current is not None and self._open(current, now):
                begun = Begun(current, False)
            else:
                begun = Begun(ledger.start_cycle(self.budget, self.cycle_seconds, now), True)
                self._configure_bucket(begun.cycle)
            ledger.heartbeat(begun.cycle.id, self.worker, now + HEARTBEAT_SECONDS)
        finally:
            ledger.unlock(token)
        return begun

    def _open(self, cycle: Cycle, now: float) -> bool:
        if self.continuous:
            return now < cycle.ends
        return self.runtime.ledger.live_workers(cycle.id, now) > 0

    def _configure_bucket(self, cycle: Cycle) -> None:
        runtime = self.runtime
        bucket = runtime.bucket
        if self.continuous:
            rate = self.budget / self.cycle_seconds
            cap = max(rate * BUCKET_SECONDS, 3 * runtime.default_cost())
            state = bucket.read()
            tokens = min(state.tokens, cap) if state.cycle else cap / 2
            tokens = min(tokens, self.budget)
            # What the cycle starts with counts towards its budget: the refill brings the rest,
            # so a cycle's spend stays within its budget plus what is in flight at its end.
            rate = max(self.budget - tokens, 0.0) / self.cycle_seconds
            bucket.configure(rate, cap, cycle.id, tokens)
        else:
            bucket.configure(0.0, self.budget, cycle.id, self.budget)

    def close(self, cycle: Cycle, means: dict[str, float]) -> None:
        """Book the cycle's coverage, idle budget and freshness estimate (at the close, from what
        the allocator last published, and ``means``: averaged over the cycle). What landed must
        have been flushed first: ``booked`` is read here."""
        runtime = self.runtime
        queued, _, _ = runtime.queue.counts()
        published = runtime.parse_published(runtime.client.hgetall(runtime.layout.alloc))
        fetched = int(published.get("fetched", runtime.pages.count()))  # pages, not sitemaps
        state = runtime.bucket.read()
        booked = float(runtime.ledger.numbers(cycle.id).get("booked", 0.0))
        # Unused: what the cycle's budget did not buy (the bucket supplies exactly the budget
        # over a continuous cycle, so this is what nothing due could take, and what the bucket
        # still held); a one-run cycle's leftover waits for no one either.
        figures = {"fetched": float(fetched), "waiting": float(queued),
                   "known": float(fetched + queued), "idle": max(cycle.budget - booked, 0.0),
                   "granted": state.granted}
        for key in ("freshness", "freshness_value"):
            if key in published:
                figures[key] = published[key]
        figures.update(means)
        names = runtime.types.names()
        for key, value in published.items():
            for family in ("freshness:", "pages:"):
                if key.startswith(family):
                    figures[f"{family}{names.get(int(key.split(':', 1)[1]), '-')}"] = value
        runtime.ledger.set(cycle.id, figures)

    def leave(self, cycle: Cycle) -> None:
        self.runtime.ledger.leave(cycle.id, self.worker)

    def retain(self, current: Cycle | None, force: bool = False) -> Retained:
        """Roll up the cycles past the retention and drop dead workers, when a new cycle came or
        :data:`RETAIN_SECONDS` passed (``force``: now)."""
        cycle_id = current.id if current is not None else None
        if not force and cycle_id == self._retained_for and \
                time.monotonic() - self._retained_at < RETAIN_SECONDS:
            return Retained(0, 0)
        self._retained_at, self._retained_for = time.monotonic(), cycle_id
        runtime = self.runtime
        # Bookings reach a cycle after its end for as long as a fetch in flight may take (its
        # lease) and a batch may wait out an outage: it is rolled up only after that.
        settle = runtime.config.lease_seconds + runtime.outage_seconds + 60.0
        return runtime.ledger.retain(self.retention, runtime.clock.time(), settle, cycle_id)
