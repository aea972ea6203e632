"""The allocator: cycles, the budget rate, and every known page's revisit interval
(revisit-model.md section 5).

Cycles are the budget's accounting and reporting period. One ``scrapy crawl`` run is one cycle
unless the site file says ``budget.continuous = true``; then the crawl keeps running and a new
cycle starts every ``budget.cycle_seconds`` until ``stop_after_seconds``, ``stop_after_cycles`` or a
stop signal. Starting a cycle (under the planning lock, so one process starts it and the others
join): the ledger opens it and the spend bucket gets its rate: a one-run cycle its whole budget
at once, a continuous one ``amount_per_cycle / cycle_seconds`` per second.

Allocating (one process of the crawl at a time, the holder of the allocation lock, every
``WEBCRAWL_ALLOCATOR_SECONDS``): the page table follows the page records
(:mod:`webcrawl.extensions._alloc_table`), :func:`webcrawl.extensions._alloc_plan.plan` gives
each page its revisit interval within the budget rate and each host's capacity, and the pages
whose interval moved by more than a tenth get it (land operation "I": due = last fetch +
interval); a small random sample is made due at once (verification). The allocator also
publishes (crawl-wide ``alloc`` hash) what other processes price with: the typical cost, the mean
cost per page type, the known pages and the backlog of new URLs; and the model's estimate of the
copy's freshness. A controller gain corrects the revisit budget: raised while the bucket
overflows (budget unused although known pages exist), lowered slowly while revisits wait unpaid on
hosts whose turn has come. A one-run cycle fetches each page at most once (a fetch makes its page
due again only after the cycle); the revisits due within its window are pulled forward at opening.

At a cycle's end (continuous) or the run's close, the cycle's figures are booked: coverage (pages
fetched, new URLs waiting), the budget left unused (idle), the freshness estimate at the close
(``freshness``, ``freshness_value`` weighted by the pages' values) and averaged over the cycle
(``freshness_mean``, ``freshness_value_mean``).

Settings: ``WEBCRAWL_PLANNER_ENABLED`` (True), ``WEBCRAWL_PLANNER_POLICY`` (``learned``;
``uniform``: every page at the same interval, a baseline), ``WEBCRAWL_ALLOCATOR_SECONDS`` (a
twelfth of the cycle, 2 to 30 s), ``WEBCRAWL_CYCLE_SECONDS`` / ``WEBCRAWL_BUDGET_PER_CYCLE``
(override the site file), ``WEBCRAWL_CYCLE_CONTINUOUS`` (as ``budget.continuous``),
``WEBCRAWL_PLANNER_SEED`` (verification sample).

Stats: ``webcrawl/allocator/runs``, ``webcrawl/allocator/pages``, ``webcrawl/allocator/intervals``
(pages rescheduled), ``webcrawl/allocator/verify``, ``webcrawl/allocator/seconds``,
``webcrawl/cycles/started``, ``webcrawl/cycles/joined``.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np
from scrapy import signals
from scrapy.exceptions import CloseSpider, DontCloseSpider, NotConfigured
from scrapy.utils.asyncio import create_looping_call

from webcrawl import heap
from webcrawl.config import configured_prior
from webcrawl.extensions._alloc_plan import AllocInput, plan
from webcrawl.extensions._alloc_table import PageTable
from webcrawl.revisit import Objective, TrustTracker
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.errors import StateError
from webcrawl.state.hosts import DomainHealth
from webcrawl.state.pagestore import interval_op, release_op

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler

    from webcrawl.state.ledger import Cycle

logger = logging.getLogger(__name__)

#: Revisits waiting this long on hosts whose turn came, with the bucket dry, mean more is
#: planned than the budget pays for.
OVERDUE_SECONDS = 2.0

__all__ = ["Allocator"]

STATS = "webcrawl/allocator/"
TICK_SECONDS = 1.0
_CHUNK = 2000


def _positive(settings: Any, name: str, default: Any) -> float | None:
    raw = settings.get(name, default)
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0:
        raise ValueError(f"{name}={raw!r}: expected a number > 0")
    return value


#: A continuous cycle's bucket holds at most this many seconds of its budget rate: after a stall
#: the spend catches up by at most that much, so any 10-second window stays within 1.3x the rate
#: (plus what is in flight).
BUCKET_SECONDS = 3.0

class Allocator:
    """See the module docstring."""

    def __init__(self, runtime: CrawlRuntime, crawler: Crawler) -> None:
        settings = crawler.settings
        site = runtime.site
        assert site is not None
        self.runtime = runtime
        self.crawler = crawler
        self.stats = runtime.stats
        self.site = site
        self.policy = settings.get("WEBCRAWL_PLANNER_POLICY", "learned")
        if self.policy not in ("learned", "uniform"):
            raise ValueError(f"WEBCRAWL_PLANNER_POLICY={self.policy!r}: expected 'learned' or 'uniform'")
        self.cycle_seconds = _positive(settings, "WEBCRAWL_CYCLE_SECONDS", None) or site.budget.cycle_seconds
        self.budget = _positive(settings, "WEBCRAWL_BUDGET_PER_CYCLE", None) or site.budget.amount_per_cycle
        self.continuous = runtime.continuous()
        self.period = _positive(settings, "WEBCRAWL_ALLOCATOR_SECONDS", None) or min(
            max(self.cycle_seconds / 12, 2.0), 30.0)
        self.sitemap_seconds = site.budget.sitemap_seconds or self.cycle_seconds / 4
        seed = settings.get("WEBCRAWL_PLANNER_SEED", None)
        self.seed = None if seed in (None, "") else int(seed)
        self.prior = configured_prior(settings)
        self.worker = uuid.uuid4().hex
        self.cycle: Cycle | None = None
        self.table = PageTable(runtime.pages, runtime.layout)
        self.holding = False
        self.gain = 1.0
        self._last_alloc = float("-inf")
        self._bucket_mark: tuple[float, float, float] | None = None  # (time, wasted, granted)
        self._started = time.monotonic()
        self._cycles_here = 0
        # The cycle's estimated freshness, averaged over time: (sum of estimate x seconds, seconds)
        self._estimates: dict[str, list[float]] = {}
        self._estimated_at: float | None = None
        self._last_estimate: dict[str, float] = {}
        self._loop = create_looping_call(self.tick)
        seeds = [runtime.canonical(u) or u for u in site.seeds]
        self.seeds = frozenset(seeds)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not crawler.settings.getbool("WEBCRAWL_PLANNER_ENABLED", True):
            raise NotConfigured("the allocator is off: set WEBCRAWL_PLANNER_ENABLED = True")
        if getattr(crawler.spider, "site", None) is None:
            raise NotConfigured("the allocator needs a site-file spider (its budget and page types)")
        ext = cls(CrawlRuntime.of(crawler), crawler)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext.spider_idle, signal=signals.spider_idle)
        return ext

    # -- lifecycle -------------------------------------------------------------------------------

    def spider_opened(self) -> None:
        try:
            self.begin()
            self.allocate(force=True)
            if not self.continuous and self.holding:
                self._pull_forward(self.runtime.clock.time())
                self.runtime.flush()
            self.runtime.spend.tick()
        except StateError as exc:
            self.runtime.fail(exc)
            return
        self._loop.start(TICK_SECONDS, now=False)

    def spider_closed(self) -> None:
        if self._loop.running:
            self._loop.stop()
        if self.runtime.failed or self.cycle is None:
            return
        try:
            self.runtime.flush()
            self.close_cycle(self.cycle)
            self.runtime.ledger.leave(self.cycle.id, self.worker)
            if self.holding:
                self.runtime.client.delete(self.runtime.layout.key("alloc:lock"))
        except StateError as exc:
            logger.error("Could not book the cycle's figures at close: %s", exc)

    def spider_idle(self) -> None:
        """A continuous crawl waits for work (revisits come due) instead of closing."""
        if self.continuous:
            raise DontCloseSpider("waiting for due revisits and the next cycle")

    def tick(self) -> None:
        runtime = self.runtime
        if runtime.failed:
            return
        try:
            now = runtime.clock.time()
            assert self.cycle is not None
            runtime.ledger.heartbeat(self.cycle.id, self.worker, now + max(10 * TICK_SECONDS, 30.0))
            if self.continuous and now >= self.cycle.ends:
                self.close_cycle(self.cycle)
                if self._enough_cycles():
                    self._stop("stop_after_cycles")
                    return
                self.begin()
            self.allocate()
        except StateError as exc:
            runtime.fail(exc)
            return
        self._check_stop()

    def _check_stop(self) -> None:
        b = self.site.budget
        if self.continuous and b.stop_after_seconds is not None and \
                time.monotonic() - self._started >= b.stop_after_seconds:
            self._stop("stop_after_seconds")

    def _enough_cycles(self) -> bool:
        """This process has seen ``stop_after_cycles`` cycles to their end."""
        n = self.site.budget.stop_after_cycles
        return n is not None and self._cycles_here >= n

    def _stop(self, reason: str) -> None:
        from scrapy.utils.defer import deferred_from_coro

        engine = self.crawler.engine
        if engine is not None and self._loop.running:
            self._loop.stop()
            logger.info("Stopping the continuous crawl (%s)", reason)
            deferred_from_coro(engine.close_spider_async(reason=reason))

    # -- cycles ----------------------------------------------------------------------------------

    def begin(self) -> Cycle:
        """Join the open cycle or start a new one, under the planning lock."""
        runtime = self.runtime
        ledger = runtime.ledger
        token = uuid.uuid4().hex
        deadline = time.monotonic() + 30
        while not ledger.lock(token, 30):
            if time.monotonic() > deadline:
                raise CloseSpider("planning_lock_timeout")
            time.sleep(0.05)
        try:
            now = runtime.clock.time()
            current = ledger.current()
            if current is not None and self._open(current, now):
                self.cycle = current
                self.stats.inc_value("webcrawl/cycles/joined")
                logger.info("Joined cycle %d (started by another process)", current.id)
            else:
                self.cycle = ledger.start_cycle(self.budget, self.cycle_seconds, now)
                self._configure_bucket(self.cycle)
                self.stats.inc_value("webcrawl/cycles/started")
                logger.info("Cycle %d: budget %.6g over %.0f s (%s)", self.cycle.id, self.budget,
                            self.cycle_seconds, "continuous" if self.continuous else "one run")
            self._cycles_here += 1
            runtime.cycle = self.cycle.id
            # A one-run cycle fetches a page at most once: what it fetches is due again only
            # after the cycle (the next run); a continuous crawl revisits on its intervals.
            runtime.batch.not_before = 0.0 if self.continuous else self.cycle.ends
            ledger.heartbeat(self.cycle.id, self.worker, now + max(10 * TICK_SECONDS, 30.0))
        finally:
            ledger.unlock(token)
        return self.cycle

    def _open(self, cycle: Cycle, now: float) -> bool:
        if self.continuous:
            return now < cycle.ends
        return self.runtime.ledger.live_workers(cycle.id, now) > 0

    def _configure_bucket(self, cycle: Cycle) -> None:
        bucket = self.runtime.bucket
        if self.continuous:
            rate = self.budget / self.cycle_seconds
            cap = max(rate * BUCKET_SECONDS, 3 * self.runtime.default_cost())
            state = bucket.read()
            tokens = min(state.tokens, cap) if state.cycle else cap / 2
            tokens = min(tokens, self.budget)
            # What the cycle starts with counts towards its budget: the refill brings the rest,
            # so a cycle's spend stays within its budget plus what is in flight at its end.
            rate = max(self.budget - tokens, 0.0) / self.cycle_seconds
            bucket.configure(rate, cap, cycle.id, tokens)
        else:
            bucket.configure(0.0, self.budget, cycle.id, self.budget)
        self._bucket_mark = None

    def close_cycle(self, cycle: Cycle) -> None:
        """Book the cycle's coverage, idle budget and freshness estimate."""
        runtime = self.runtime
        if self.holding:
            self.allocate(force=True)  # the figures as of now, not as of the last allocation
        queued, _, _ = runtime.queue.counts()
        published = runtime.published()
        fetched = int(published.get("fetched", runtime.pages.count()))  # pages, not sitemaps
        state = runtime.bucket.read()
        runtime.flush()  # the costs of what landed, booked before they are read
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
            total, seconds = self._estimates.get(key, (0.0, 0.0))
            if seconds > 0:
                figures[f"{key}_mean"] = total / seconds
        self._estimates, self._estimated_at = {}, None
        names = runtime.types.names()
        for key, value in published.items():
            for family in ("freshness:", "pages:"):
                if key.startswith(family):
                    type_id = int(key.split(":", 1)[1])
                    figures[f"{family}{names.get(type_id, '-')}"] = value
        runtime.ledger.set(cycle.id, figures)

    # -- allocation ------------------------------------------------------------------------------

    def _lock(self) -> bool:
        """Hold the allocation lock (renewed while held): one process allocates for the crawl."""
        client, key = self.runtime.client, self.runtime.layout.key("alloc:lock")
        ttl = int(max(3 * self.period, 10) * 1000)
        if self.holding:
            if client.get(key) == self.worker.encode():
                client.pexpire(key, ttl)
                return True
            self.holding = False
        if client.set(key, self.worker, nx=True, px=ttl):
            self.holding = True
            self.table.load()  # taking over: read every record afresh
            heap.trim()
            return True
        return False

    def allocate(self, force: bool = False) -> None:
        runtime = self.runtime
        if not force and time.monotonic() - self._last_alloc < self.period:
            return
        self._last_alloc = time.monotonic()
        if not self._lock():
            return
        started = time.perf_counter()
        runtime.flush()
        self.table.sync()
        now = runtime.clock.time()
        self._adjust_gain(now)
        queued, _, _ = runtime.queue.counts()
        hosts = self.table.hosts
        n = len(self.table)
        result = None
        if n:
            a = self._input(now, float(queued))
            result = plan(a)
            self._schedule(result, now)
        self._publish(result, float(queued), n)
        seconds = time.perf_counter() - started
        self.stats.inc_value(STATS + "runs")
        self.stats.set_value(STATS + "pages", n)
        self.stats.set_value(STATS + "seconds", seconds)
        if result is not None and logger.isEnabledFor(logging.DEBUG):
            fig = result.figures
            logger.debug("Allocated %d pages over %d hosts in %.3f s: %s", n, len(hosts), seconds,
                         ", ".join(f"{k} {fig[k]:.3g}" for k in sorted(fig) if k.startswith("plan:")
                                   or k in ("gain", "mu", "follow", "visited", "discovery_share")))
        else:
            logger.debug("Allocated %d pages over %d hosts in %.3f s", n, len(hosts), seconds)
        result = None
        heap.trim()  # the plan's arrays are freed: hand their pages back (webcrawl.heap)

    def _adjust_gain(self, now: float) -> None:
        """Raise the revisit budget while the bucket overflows (money nobody could spend); lower
        it slowly while the bucket is dry and revisits wait on hosts whose turn has come (more is
        planned than the budget pays for); leave it alone otherwise (spent as planned, or new
        URLs taking what revisits left)."""
        if not self.continuous:
            return
        runtime = self.runtime
        state = runtime.bucket.read()
        mark = self._bucket_mark
        self._bucket_mark = (now, state.wasted, state.granted)
        if mark is None or state.rate <= 0 or now <= mark[0]:
            return
        idle = max(state.wasted - mark[1], 0.0) / (state.rate * (now - mark[0]))
        if idle > 0.02 and len(self.table):
            self.gain = min(self.gain * (1 + 2 * idle), 8.0)
        elif state.tokens < state.rate * 0.5:
            due = [d for _, d in runtime.queue.earliest() if d is not None]
            if due and min(due) < now - OVERDUE_SECONDS:
                self.gain = max(self.gain * 0.97, 0.5)

    def _input(self, now: float, backlog: float) -> AllocInput:
        runtime, table, site = self.runtime, self.table, self.site
        hosts = table.hosts
        delay = np.full(len(hosts), runtime.config.domain_delay)
        hold = np.zeros(len(hosts))
        health = np.ones(len(hosts))
        trusted = np.zeros(len(hosts), dtype=bool)
        index = {h: i for i, h in enumerate(hosts)}
        half_life = self.crawler.settings.getfloat("WEBCRAWL_HEALTH_HALF_LIFE_SECONDS", 600.0)
        penalty = self.crawler.settings.getfloat("WEBCRAWL_HEALTH_PENALTY", 4.0)
        pipe = runtime.client.pipeline(transaction=False)
        for shard in runtime.layout.all_shards:
            pipe.hgetall(shard.delay)
            pipe.hgetall(shard.health)
            pipe.hgetall(shard.trust_sitemaps)
        replies = pipe.execute()
        import json
        import struct

        for i in range(0, len(replies), 3):
            for h, v in replies[i].items():
                j = index.get(h.decode())
                if j is not None:
                    delay[j] = max(float(v), runtime.config.domain_delay)
            for h, v in replies[i + 1].items():
                j = index.get(h.decode())
                if j is not None:
                    state = DomainHealth(*struct.unpack("<dddId", v))
                    hold[j] = state.until
                    health[j] = 1.0 + penalty * state.bad_rate(now, half_life)
            for h, v in replies[i + 2].items():
                j = index.get(h.decode())
                if j is not None:
                    t = json.loads(v)
                    tracker = runtime.sitemap_trust
                    trusted[j] = TrustTracker(
                        tracker.min_agreements, tracker.max_disagreement_rate, tracker.memory,
                        int(t.get("comparisons", 0)), float(t.get("disagreement_rate", 1.0)),
                        tracker.both_ways, int(t.get("loud", 0)), int(t.get("quiet", 0))).trusted
        for j, host in enumerate(hosts):
            mode = site.trust.for_host(host).sitemaps
            if mode != "learn":
                trusted[j] = mode == "always"
        types = runtime.types
        r = site.budget.reserves
        shares = {"discovery": r.discovery, "reestimation": r.reestimation,
                  "verification": r.verification, "detectors": r.detectors}
        seed = np.zeros(len(table), dtype=bool)
        seed_rows = table.rows_of(list(self.seeds))
        seed[seed_rows[seed_rows >= 0]] = True
        return AllocInput(
            rows=table.records, host=table.host_of, delay=delay, hold_until=hold, health=health,
            sitemap_trusted=trusted, seed=seed, now=now, budget_rate=self.budget / self.cycle_seconds,
            period=self.period, cycle_seconds=self.cycle_seconds,
            sitemap_seconds=self.sitemap_seconds, shares=shares,
            type_tier={types.id(t.name): t.tier for t in site.page_types},
            listing_types=frozenset(types.id(t.name) for t in site.page_types if t.listing is not None),
            prior=self.prior, default_cost=runtime.default_cost(), backlog=backlog,
            gain=self.gain, objective=Objective(site.objective),
            seed_rng=self.seed, listed=table.listings)

    def _schedule(self, result: Any, now: float) -> None:
        """Write the intervals that moved, and make the verification sample due now."""
        runtime, table = self.runtime, self.table
        rows = table.records
        new = result.interval
        follow = result.follow
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
                                       + 2 * runtime.config.lease_seconds < now)
        batch = runtime.batch
        changed = 0
        # One run, one fetch a page: pages fetched in this run are due after its cycle.
        this_run = np.zeros(len(rows), dtype=bool)
        if not self.continuous and self.cycle is not None:
            this_run = rows["last_fetched"] >= self.cycle.started
        for row in np.flatnonzero(moved | gone | flipped | stuck):
            url = table.url(row)
            iv = float(new[row]) if finite[row] else 0.0
            host = table.hosts[table.host[row]]
            if stuck[row]:
                batch.land(host, release_op(url))
            due_at = None
            if this_run[row] and iv > 0:
                due_at = max(float(rows["last_fetched"][row]) + iv, self.cycle.ends)
            batch.land(host, interval_op(url, iv, due_at=due_at, follow=bool(follow[row])))
            rows["iv"][row] = iv
            rows["follow"][row] = int(follow[row])
            changed += 1
            if changed % _CHUNK == 0:
                runtime.flush()
        for row in result.verify:
            if this_run[row]:
                continue  # fetched in this one-run cycle already
            batch.land(table.hosts[table.host[row]], interval_op(
                table.url(row), float(rows["iv"][row]), due_at=now, follow=bool(follow[row])))
        runtime.flush()
        self.stats.inc_value(STATS + "intervals", changed)
        self.stats.inc_value(STATS + "verify", len(result.verify))

    def _pull_forward(self, now: float) -> int:
        """A one-run cycle stands for ``cycle_seconds`` of time: the revisits due within it are
        due in this run, earliest first (their due times are squeezed, in order, into the
        moment just before now)."""
        table, rows = self.table, self.table.records
        iv = rows["iv"]
        due = rows["last_fetched"] + iv
        window = (iv > 0) & (rows["due"] != -1) & (due > now) & (due <= now + self.cycle_seconds)
        for row in np.flatnonzero(window):
            at = now - (now + self.cycle_seconds - float(due[row])) / 1000.0
            self.runtime.batch.land(table.hosts[table.host[row]], interval_op(
                table.url(row), float(iv[row]), due_at=at, follow=bool(rows["follow"][row])))
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

    def _publish(self, result: Any, backlog: float, known: int) -> None:
        runtime = self.runtime
        now = runtime.clock.time()
        figures: dict[str, float] = {"known": float(known), "backlog": backlog, "at": now}
        if result is not None and self._estimated_at is not None:
            for key in ("freshness", "freshness_value"):  # held since the previous estimate
                previous = self._last_estimate.get(key)
                if previous is not None:
                    acc = self._estimates.setdefault(key, [0.0, 0.0])
                    acc[0] += previous * (now - self._estimated_at)
                    acc[1] += now - self._estimated_at
        if result is not None:
            self._last_estimate = {k: result.figures[k] for k in ("freshness", "freshness_value")
                                   if k in result.figures}
            self._estimated_at = now
        if result is not None:
            figures.update(result.figures)
            names = runtime.types.names()
            for key, value in list(result.figures.items()):
                if key.startswith("cost:"):
                    type_id = int(key.split(":", 1)[1])
                    figures[f"cost:{names.get(type_id, '-')}"] = value
        runtime.client.hset(runtime.layout.alloc, mapping={k: repr(float(v)) for k, v in figures.items()})
        if self.cycle is not None:
            runtime.ledger.set(self.cycle.id, {f"alloc:{k}": v for k, v in figures.items()
                                               if k.startswith("plan:") or k in ("gain", "known")})
