"""A simulated world for the policy benchmark: a synthetic population of pages and the truth.

Pages change as Poisson processes with known rates. Because the process is memoryless, the truth
of one page needs two numbers: when we last fetched it and when it first changed after that
(drawn afresh at each fetch). That gives, exactly and without simulating every change: whether a
visit finds a change, when the last change before it happened (what a reliable Last-Modified
would say), and how long the copy stayed fresh. Policies see only what a crawler would see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from webcrawl.clock import ManualClock

Floats = NDArray[np.float64]
Indices = NDArray[np.intp]
DAY = 86400.0

#: Cho & Garcia-Molina (2000): share of pages by how often they change, as (share, fastest and
#: slowest mean change interval in seconds); intervals are log-uniform within a band.
CHO_GM_MIX: tuple[tuple[float, float, float], ...] = (
    (0.23, 900.0, DAY), (0.15, DAY, 7 * DAY), (0.16, 7 * DAY, 30 * DAY),
    (0.16, 30 * DAY, 120 * DAY), (0.30, 120 * DAY, 365 * DAY),
)


@dataclass(frozen=True)
class Population:
    """The true state of the world: one entry per page."""

    rate: Floats  #: changes per second
    value: Floats  #: business value (tier)
    cost: Floats  #: cost of a visit (e.g. KB on the wire)
    group: Indices  #: site + page type id, 0..ngroups-1
    lastmod: NDArray[np.bool_]  #: the page's host sends a Last-Modified that tells the truth
    fetched: Floats  #: when our current copy was fetched, relative to the start (<= 0)
    not_modified_cost: Floats | None = None  #: cost of a conditional visit answered 304

    def __len__(self) -> int:
        return len(self.rate)


def synthetic_population(
    n: int, rng: np.random.Generator, *, sites: int = 2, tiers: tuple[float, ...] = (1.0, 3.0, 10.0),
    tier_shares: tuple[float, ...] = (0.5, 0.35, 0.15), home_share: float = 0.7,
    copy_age_seconds: float = 60 * DAY,
) -> Population:
    """``n`` pages mixed like :data:`CHO_GM_MIX`, spread over ``sites`` sites with one page type
    per change band (a page type's pages mostly, ``home_share``, come from its own band, the rest
    from anywhere, so groups are informative but not pure). Costs are log-normal (median 40 KB);
    the last site's hosts send reliable Last-Modified headers, the others none. Our copies were
    fetched during the ``copy_age_seconds`` before the start (a first crawl without a model), so
    the measured window starts near a steady state rather than with every copy fresh."""
    shares = np.array([m[0] for m in CHO_GM_MIX])
    band = rng.choice(len(CHO_GM_MIX), size=n, p=shares / shares.sum())
    lo = np.log([m[1] for m in CHO_GM_MIX])[band]
    hi = np.log([m[2] for m in CHO_GM_MIX])[band]
    rate = 1.0 / np.exp(rng.uniform(lo, hi))
    home = rng.random(n) < home_share
    page_type = np.where(home, band, rng.integers(0, len(CHO_GM_MIX), n))
    site = rng.integers(0, sites, n)
    p = np.array(tier_shares) / sum(tier_shares)
    return Population(
        rate=rate,
        value=np.asarray(tiers, dtype=float)[rng.choice(len(tiers), size=n, p=p)],
        cost=rng.lognormal(np.log(40.0), 0.7, n),
        group=(site * len(CHO_GM_MIX) + page_type).astype(np.intp),
        lastmod=site == sites - 1,
        fetched=-rng.uniform(0.0, copy_age_seconds, n),
        not_modified_cost=np.full(n, 1.0),  # about 1 KB of request and response headers
    )


@dataclass(frozen=True)
class Observation:
    """What a crawler learns from visits (one entry per visited page)."""

    index: Indices
    when: Floats
    interval: Floats  #: seconds since this page's previous fetch
    changed: NDArray[np.bool_]
    last_modified_age: Floats  #: seconds since the last change as the host's Last-Modified tells, else NaN


class Truth:
    """The world's side of the simulation: answers visits and measures freshness and spend over
    the window [``start``, ``end``) (a warm-up before ``start`` is not counted)."""

    def __init__(self, pop: Population, rng: np.random.Generator, start: float, end: float, t0: float = 0.0) -> None:
        self.pop, self.rng, self.start, self.end = pop, rng, start, end
        n = len(pop)
        self.last_fetch = t0 + pop.fetched
        self.fresh_until = self.last_fetch + rng.exponential(1.0 / pop.rate)
        self.fresh_seconds = np.zeros(n)
        self.visits = self.changes = 0
        self.spend = 0.0

    def _accrue(self, index: Indices, until: Floats) -> None:
        a = np.maximum(self.last_fetch[index], self.start)
        b = np.minimum(np.minimum(until, self.fresh_until[index]), self.end)
        self.fresh_seconds[index] += np.maximum(b - a, 0.0)

    def visit(self, index: Indices, when: Floats, conditional: bool = False) -> Observation:
        """Fetch pages ``index`` (distinct) at times ``when`` (not before their previous fetch).

        ``conditional``: the fetches carry validators, and the host honours them, so an unchanged
        page costs ``not_modified_cost`` instead of its full cost."""
        rate = self.pop.rate[index]
        self._accrue(index, when)
        interval = when - self.last_fetch[index]
        changed = self.fresh_until[index] <= when
        # Time back to the last change, given at least one in the interval: by time reversal an
        # exponential truncated to the interval.
        u = self.rng.random(len(index))
        age = np.minimum(-np.log1p(u * np.expm1(-rate * interval)) / rate, interval)
        # Unchanged: the last change came before the previous fetch, Exp(rate) earlier (again by
        # time reversal). Hosts without Last-Modified tell nothing.
        age = np.where(changed, age, interval + self.rng.exponential(1.0 / rate))
        age = np.where(self.pop.lastmod[index], age, np.nan)
        counted = (when >= self.start) & (when < self.end)
        self.visits += int(counted.sum())
        self.changes += int((counted & changed).sum())
        cost = self.pop.cost[index]
        if conditional and self.pop.not_modified_cost is not None:
            cost = np.where(changed, cost, self.pop.not_modified_cost[index])
        self.spend += float(cost[counted].sum())
        self.last_fetch[index] = when
        self.fresh_until[index] = when + self.rng.exponential(1.0 / rate)
        return Observation(index, when, interval, changed, age)

    def value_weighted_freshness(self) -> float:
        """sum(value * fresh time) / (sum(value) * window), closing open intervals at ``end``."""
        every = np.arange(len(self.pop), dtype=np.intp)
        fresh = self.fresh_seconds.copy()
        a = np.maximum(self.last_fetch, self.start)
        b = np.minimum(self.fresh_until, self.end)
        fresh += np.maximum(b - a, 0.0)
        v = self.pop.value[every]
        return float((v * fresh).sum() / (v.sum() * (self.end - self.start)))


class SimPolicy(Protocol):
    """A revisit policy as the simulator drives it."""

    def plan(self, now: float, cycle_seconds: float) -> tuple[Indices, Floats]:
        """Pages to fetch this cycle and when (times in [now, now + cycle_seconds)); a page may
        appear several times."""
        ...

    def observe(self, seen: Observation) -> None: ...


@dataclass(frozen=True)
class SimResult:
    freshness: float  #: value-weighted, time-averaged, measured from the truth
    visits: int
    changes: int
    spend: float
    seconds: float  #: length of the measured window

    @property
    def cost_per_change(self) -> float:
        return self.spend / self.changes if self.changes else float("inf")


def run(policy: SimPolicy, pop: Population, rng: np.random.Generator, *, cycle_seconds: float,
        cycles: int, warmup_cycles: int, clock: ManualClock | None = None) -> SimResult:
    """Drive ``policy`` for ``cycles`` cycles on a simulated clock; measure after the warm-up."""
    clock = clock or ManualClock(0.0)
    t0 = clock.time()
    truth = Truth(pop, rng, t0 + warmup_cycles * cycle_seconds, t0 + cycles * cycle_seconds, t0)
    conditional = bool(getattr(policy, "conditional", False))  # does it send validators?
    for _ in range(cycles):
        index, when = policy.plan(clock.time(), cycle_seconds)
        order = np.argsort(when, kind="stable")
        index, when = np.asarray(index)[order], np.asarray(when)[order]
        while len(index):  # rounds of distinct pages, earliest visits first
            _, first = np.unique(index, return_index=True)
            policy.observe(truth.visit(index[first], when[first], conditional))
            keep = np.ones(len(index), dtype=bool)
            keep[first] = False
            index, when = index[keep], when[keep]
        clock.advance(cycle_seconds)
    return SimResult(truth.value_weighted_freshness(), truth.visits, truth.changes, truth.spend,
                     truth.end - truth.start)


class PeriodicPolicy:
    """Visit page i every ``1 / frequency[i]`` seconds from a random phase (0 = never)."""

    def __init__(self, frequency: Floats, rng: np.random.Generator, start: float = 0.0) -> None:
        with np.errstate(divide="ignore"):
            self.period = np.where(frequency > 0, 1.0 / np.where(frequency > 0, frequency, 1.0), np.inf)
        self.next_due = start + rng.random(len(frequency)) * np.where(np.isfinite(self.period), self.period, 0.0)
        self.next_due[~np.isfinite(self.period)] = np.inf

    def plan(self, now: float, cycle_seconds: float) -> tuple[Indices, Floats]:
        end = now + cycle_seconds
        due = np.flatnonzero(self.next_due < end)
        count = np.floor((end - self.next_due[due]) / self.period[due]).astype(np.int64) + 1
        index = np.repeat(due, count)
        k = np.arange(len(index)) - np.repeat(np.cumsum(count) - count, count)
        when = self.next_due[index] + k * self.period[index]
        self.next_due[due] += count * self.period[due]
        return index, when

    def observe(self, seen: Observation) -> None:
        pass
