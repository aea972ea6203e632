"""One allocation, start to end, on the allocator's worker thread: hold the allocation lock, bring
the page table up to date, plan, write the intervals that moved, publish.

The allocation lock (``alloc:lock``, a :class:`~webcrawl.state.lock.TokenLock` under this
process's token) names the one process that plans for the crawl. Taking it over (the holder died,
or this process just started) loads every record afresh. While held it is renewed from the
reactor every tick (:meth:`Planner.renew`), so a plan or a load that outlasts the lock's time
keeps it; a process that stops renewing loses it after ``max(3 x period, 10)`` seconds.

The intervals go to Redis through the planner's own write batch, flushed from this thread: the
crawl's batch belongs to the reactor. What an allocation did comes back as stats, for the reactor
to count.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from webcrawl import heap
from webcrawl.extensions._alloc_plan import plan
from webcrawl.extensions._alloc_reads import GainControl, PlanSettings, alloc_input
from webcrawl.extensions._alloc_table import PageTable
from webcrawl.state.batch import WriteBatch
from webcrawl.state.lock import TokenLock
from webcrawl.state.pagestore import interval_op, release_op

if TYPE_CHECKING:
    from webcrawl.runtime import CrawlRuntime
    from webcrawl.state.ledger import Cycle

__all__ = ["CHUNK", "Planner"]

logger = logging.getLogger("webcrawl.extensions.allocator")

#: Interval operations sent per flush of the planner's batch.
CHUNK = 2000
_ESTIMATES = ("freshness", "freshness_value")


class Planner:
    """The allocations of one process (see the module docstring). Its methods run on the worker
    thread, one at a time, except :meth:`renew`, which the reactor calls."""

    def __init__(self, runtime: CrawlRuntime, terms: PlanSettings, *, token: str, policy: str,
                 continuous: bool, seeds: frozenset[str]) -> None:
        self.runtime = runtime
        self.terms = terms
        self.token = token
        self.policy = policy
        self.continuous = continuous
        self.seeds = seeds
        #: when this process's run began: a one-run cycle pulls forward only the revisits of pages
        #: fetched before it (a page this run fetched, while the plan ran beside the downloads,
        #: is not due again in the same run)
        self.run_started = runtime.clock.time()
        self.table = PageTable(runtime.pages, runtime.layout)
        self.lock = TokenLock(runtime.client, runtime.layout.key("alloc:lock"))
        self.ttl = max(3 * terms.period, 10.0)
        self.holding = False
        self._loaded = False
        self.control = GainControl()
        base = runtime.batch
        self.batch = WriteBatch(runtime.client, runtime.scripts, runtime.layout, runtime.queue,
                                base.settings, bloom_slices=base.bloom_slices)
        # The cycle's estimated freshness, averaged over time: (sum of estimate x seconds, seconds)
        self._estimates: dict[str, list[float]] = {}
        self._estimated_at: float | None = None
        self._last_estimate: dict[str, float] = {}

    @property
    def gain(self) -> float:
        return self.control.gain

    # -- the allocation lock ---------------------------------------------------------------------

    def hold(self) -> bool:
        """Hold the allocation lock: renew it, or take it (and load every record afresh)."""
        if self.holding and not self.lock.renew(self.token, self.ttl):
            self.holding = False
        if not self.holding:
            if not self.lock.acquire(self.token, self.ttl):
                return False
            self.holding, self._loaded = True, False  # the reactor renews it from now on
        if not self._loaded:  # taken over (or a load that failed part-way): read every record
            self.table.load()
            heap.trim()
            self._loaded = True
        return True

    def renew(self) -> None:
        """Keep the lock while this process holds it (the reactor, every tick)."""
        if self.holding:
            self.lock.renew(self.token, self.ttl)

    def release(self) -> None:
        if self.holding:
            self.holding = False
            self.lock.release(self.token)

    # -- one allocation --------------------------------------------------------------------------

    def allocate(self, cycle: Cycle | None, not_before: float,
                 pull_forward: bool = False) -> dict[str, float]:
        """Plan every known page and write what moved (nothing unless this process holds the
        lock); ``pull_forward``: then make the revisits due within a one-run cycle due now.
        Returns what it did: ``runs``, ``pages``, ``seconds``, ``intervals``, ``verify``,
        ``pulled`` (empty when another process holds the lock)."""
        if not self.hold():
            return {}
        runtime = self.runtime
        started = time.perf_counter()
        self.table.sync()
        now = runtime.clock.time()
        gain = self.control.adjust(runtime, now, len(self.table)) if self.continuous else self.gain
        queued, _, _ = runtime.queue.counts()
        n = len(self.table)
        self.batch.not_before = not_before
        stats: dict[str, float] = {}
        result = None
        if n:
            result = plan(alloc_input(runtime, self.table, self.terms, self.seeds, now,
                                      float(queued), gain))
            stats.update(self._schedule(result, now, cycle))
        self._publish(result, float(queued), n, cycle)
        if pull_forward:
            stats["pulled"] = self._pull_forward(runtime.clock.time())
        seconds = time.perf_counter() - started
        stats.update({"runs": 1, "pages": n, "seconds": seconds})
        if result is not None and logger.isEnabledFor(logging.DEBUG):
            fig = result.figures
            logger.debug("Allocated %d pages over %d hosts in %.3f s: %s", n, len(self.table.hosts),
                         seconds, ", ".join(f"{k} {fig[k]:.3g}" for k in sorted(fig) if k.startswith("plan:")
                                            or k in ("gain", "mu", "follow", "visited", "discovery_share")))
        else:
            logger.debug("Allocated %d pages over %d hosts in %.3f s", n, len(self.table.hosts), seconds)
        result = None
        heap.trim()  # the plan's arrays are freed: hand their pages back (webcrawl.heap)
        return stats

    def _schedule(self, result: Any, now: float, cycle: Cycle | None) -> dict[str, float]:
        """Write the intervals that moved, and make the verification sample due now."""
        table, batch = self.table, self.batch
        rows = table.records
        new, follow = result.interval, result.follow
        if self.policy == "uniform":
            new = self._uniform(result)
            follow = np.zeros_like(follow)
        old = rows["iv"]
        finite = np.isfinite(new)
        moved = finite & ((old <= 0) | (np.abs(new - old) > 0.1 * np.maximum(old, 1e-9)))
        gone = ~finite & (old > 0)
        flipped = follow != (rows["follow"] == 1)
        # In flight too long (a lease lost to a cleared queue, say): scheduled again.
        stuck = (rows["due"] == -1) & (rows["last_fetched"] + np.maximum(old, 0)
                                       + 2 * self.runtime.config.lease_seconds < now)
        # One run, one fetch a page: pages fetched in this run are due after its cycle.
        this_run = np.zeros(len(rows), dtype=bool)
        if not self.continuous and cycle is not None:
            this_run = rows["last_fetched"] >= cycle.started
        changed = 0
        for row in np.flatnonzero(moved | gone | flipped | stuck):
            url = table.url(row)
            iv = float(new[row]) if finite[row] else 0.0
            host = table.hosts[table.host[row]]
            if stuck[row]:
                batch.land(host, release_op(url))
            due_at = None
            if this_run[row] and iv > 0 and cycle is not None:
                due_at = max(float(rows["last_fetched"][row]) + iv, cycle.ends)
            batch.land(host, interval_op(url, iv, due_at=due_at, follow=bool(follow[row])))
            rows["iv"][row] = iv
            rows["follow"][row] = int(follow[row])
            changed += 1
            if changed % CHUNK == 0:
                batch.flush()
        for row in result.verify:
            if this_run[row]:
                continue  # fetched in this one-run cycle already
            batch.land(table.hosts[table.host[row]], interval_op(
                table.url(row), float(rows["iv"][row]), due_at=now, follow=bool(follow[row])))
        batch.flush()
        return {"intervals": changed, "verify": len(result.verify)}

    def _pull_forward(self, now: float) -> int:
        """A one-run cycle stands for ``cycle_seconds`` of time: the revisits due within it are
        due in this run, earliest first (their due times are squeezed, in order, into the
        moment just before now)."""
        table, rows = self.table, self.table.records
        span = self.terms.cycle_seconds
        iv = rows["iv"]
        due = rows["last_fetched"] + iv
        window = ((iv > 0) & (rows["due"] != -1) & (due > now) & (due <= now + span)
                  & (rows["last_fetched"] < self.run_started))
        for k, row in enumerate(np.flatnonzero(window), 1):
            at = now - (now + span - float(due[row])) / 1000.0
            self.batch.land(table.hosts[table.host[row]], interval_op(
                table.url(row), float(iv[row]), due_at=at, follow=bool(rows["follow"][row])))
            if k % CHUNK == 0:
                self.batch.flush()
        self.batch.flush()
        return int(window.sum())

    def _uniform(self, result: Any) -> np.ndarray:
        """The baseline: every polled page at the same interval for the same spend (what the
        plan put on polling and on following changes), no change followed."""
        rows = self.table.records
        polled = np.isfinite(result.interval) & (rows["kind"] == 0)
        spend = float((result.cost[polled] / result.interval[polled]).sum())
        spend += float(result.figures.get("plan:triggers", 0.0))
        out = result.interval.copy()
        if polled.any() and spend > 0:
            out[polled] = float(result.cost[polled].sum()) / spend
        return out

    # -- publishing ------------------------------------------------------------------------------

    def _publish(self, result: Any, backlog: float, known: int, cycle: Cycle | None) -> None:
        runtime = self.runtime
        now = runtime.clock.time()
        figures: dict[str, float] = {"known": float(known), "backlog": backlog, "at": now}
        if result is not None:
            if self._estimated_at is not None:
                for key in _ESTIMATES:  # held since the previous estimate
                    previous = self._last_estimate.get(key)
                    if previous is not None:
                        acc = self._estimates.setdefault(key, [0.0, 0.0])
                        acc[0] += previous * (now - self._estimated_at)
                        acc[1] += now - self._estimated_at
            self._last_estimate = {k: result.figures[k] for k in _ESTIMATES if k in result.figures}
            self._estimated_at = now
            figures.update(result.figures)
            names = runtime.types.names()
            for key, value in list(result.figures.items()):
                if key.startswith("cost:"):
                    figures[f"cost:{names.get(int(key.split(':', 1)[1]), '-')}"] = value
        runtime.client.hset(runtime.layout.alloc, mapping={k: repr(float(v)) for k, v in figures.items()})
        if cycle is not None:
            runtime.ledger.set(cycle.id, {f"alloc:{k}": v for k, v in figures.items()
                                          if k.startswith("plan:") or k in ("gain", "known")})

    def take_means(self) -> dict[str, float]:
        """The cycle's freshness estimates averaged over time (``<key>_mean``), and start over."""
        means = {f"{key}_mean": total / seconds for key, (total, seconds) in self._estimates.items()
                 if seconds > 0}
        self._estimates, self._estimated_at = {}, None
        return means
