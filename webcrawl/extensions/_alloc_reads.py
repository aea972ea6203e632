"""What the allocator reads from Redis besides the page records: each host's delay, backoff hold,
health and sitemap trust, the spend bucket and the queues' earliest turns (for the controller
gain), and the plan's whole input (:class:`webcrawl.extensions._alloc_plan.AllocInput`).

Everything here runs on the allocator's worker thread (:mod:`webcrawl.extensions._alloc_worker`),
never on the reactor: it only reads Redis and the crawl's fixed configuration (and
:class:`PlanSettings` reads the settings, once).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from webcrawl.config import configured_prior, positive_setting
from webcrawl.extensions._alloc_plan import AllocInput
from webcrawl.revisit import Objective, TrustTracker
from webcrawl.state.hosts import DomainHealth

if TYPE_CHECKING:
    from webcrawl.extensions._alloc_table import PageTable
    from webcrawl.revisit import GammaPrior
    from webcrawl.runtime import CrawlRuntime
    from webcrawl.sites import SiteConfig

__all__ = ["OVERDUE_SECONDS", "GainControl", "HostFigures", "PlanSettings", "alloc_input",
           "read_hosts"]

#: Revisits waiting this long on hosts whose turn came, with the bucket dry, mean more is
#: planned than the budget pays for.
OVERDUE_SECONDS = 2.0


@dataclass(frozen=True)
class PlanSettings:
    """The allocation's fixed terms, read once from the settings and the site file."""

    budget: float
    cycle_seconds: float
    period: float
    sitemap_seconds: float
    prior: GammaPrior
    seed: int | None
    health_half_life: float
    health_penalty: float

    @classmethod
    def of(cls, settings: Any, site: SiteConfig) -> PlanSettings:
        """``WEBCRAWL_CYCLE_SECONDS``, ``WEBCRAWL_BUDGET_PER_CYCLE`` (else the site file's),
        ``WEBCRAWL_ALLOCATOR_SECONDS`` (a twelfth of the cycle, 2 to 30 s), the site's sitemap
        period, the prior, ``WEBCRAWL_PLANNER_SEED`` and the health penalty's terms."""
        cycle_seconds = positive_setting(settings, "WEBCRAWL_CYCLE_SECONDS", None) or site.budget.cycle_seconds
        seed = settings.get("WEBCRAWL_PLANNER_SEED", None)
        return cls(
            budget=positive_setting(settings, "WEBCRAWL_BUDGET_PER_CYCLE", None) or site.budget.amount_per_cycle,
            cycle_seconds=cycle_seconds,
            period=positive_setting(settings, "WEBCRAWL_ALLOCATOR_SECONDS", None) or min(
                max(cycle_seconds / 12, 2.0), 30.0),
            sitemap_seconds=site.budget.sitemap_seconds or cycle_seconds / 4,
            prior=configured_prior(settings), seed=None if seed in (None, "") else int(seed),
            health_half_life=settings.getfloat("WEBCRAWL_HEALTH_HALF_LIFE_SECONDS", 600.0),
            health_penalty=settings.getfloat("WEBCRAWL_HEALTH_PENALTY", 4.0))


@dataclass
class HostFigures:
    """Per host (in the table's host order): delay (s), hold (server time), cost multiplier,
    whether its sitemap dates are trusted."""

    delay: np.ndarray
    hold: np.ndarray
    health: np.ndarray
    trusted: np.ndarray


def read_hosts(runtime: CrawlRuntime, hosts: list[str], now: float, half_life: float,
               penalty: float) -> HostFigures:
    """Every shard's delays, health records and sitemap trust, in one pipeline."""
    default = runtime.config.domain_delay
    out = HostFigures(np.full(len(hosts), default), np.zeros(len(hosts)), np.ones(len(hosts)),
                      np.zeros(len(hosts), dtype=bool))
    index = {h: i for i, h in enumerate(hosts)}
    pipe = runtime.client.pipeline(transaction=False)
    for shard in runtime.layout.all_shards:
        pipe.hgetall(shard.delay)
        pipe.hgetall(shard.health)
        pipe.hgetall(shard.trust_sitemaps)
    replies = pipe.execute()
    tracker = runtime.sitemap_trust
    for i in range(0, len(replies), 3):
        for h, v in replies[i].items():
            j = index.get(h.decode())
            if j is not None:
                out.delay[j] = max(float(v), default)
        for h, v in replies[i + 1].items():
            j = index.get(h.decode())
            if j is not None:
                state = DomainHealth(*struct.unpack("<dddId", v))
                out.hold[j] = state.until
                out.health[j] = 1.0 + penalty * state.bad_rate(now, half_life)
        for h, v in replies[i + 2].items():
            j = index.get(h.decode())
            if j is not None:
                t = json.loads(v)
                out.trusted[j] = TrustTracker(
                    tracker.min_agreements, tracker.max_disagreement_rate, tracker.memory,
                    int(t.get("comparisons", 0)), float(t.get("disagreement_rate", 1.0)),
                    tracker.both_ways, int(t.get("loud", 0)), int(t.get("quiet", 0))).trusted
    site = runtime.site
    assert site is not None
    for j, host in enumerate(hosts):
        mode = site.trust.for_host(host).sitemaps
        if mode != "learn":
            out.trusted[j] = mode == "always"
    return out


class GainControl:
    """The controller gain on the revisit budget: raised while the bucket overflows (money nobody
    could spend), lowered slowly while the bucket is dry and revisits wait on hosts whose turn
    has come (more is planned than the budget pays for), left alone otherwise (spent as planned,
    or new URLs taking what revisits left). A continuous crawl's only."""

    def __init__(self) -> None:
        self.gain = 1.0
        self._mark: tuple[float, float, float] | None = None  # (time, wasted, granted)

    def reset(self) -> None:
        """The bucket was configured for a new cycle: its counters start over."""
        self._mark = None

    def adjust(self, runtime: CrawlRuntime, now: float, pages: int) -> float:
        state = runtime.bucket.read()
        mark = self._mark
        self._mark = (now, state.wasted, state.granted)
        if mark is None or state.rate <= 0 or now <= mark[0]:
            return self.gain
        idle = max(state.wasted - mark[1], 0.0) / (state.rate * (now - mark[0]))
        if idle > 0.02 and pages:
            self.gain = min(self.gain * (1 + 2 * idle), 8.0)
        elif state.tokens < state.rate * 0.5:
            due = [d for _, d in runtime.queue.earliest() if d is not None]
            if due and min(due) < now - OVERDUE_SECONDS:
                self.gain = max(self.gain * 0.97, 0.5)
        return self.gain


def alloc_input(runtime: CrawlRuntime, table: PageTable, terms: PlanSettings, seeds: Any,
                now: float, backlog: float, gain: float) -> AllocInput:
    """The plan's input: the table's records, the hosts' figures as Redis holds them now, the
    site's shares, tiers and listing types."""
    site = runtime.site
    assert site is not None
    hosts = read_hosts(runtime, table.hosts, now, terms.health_half_life, terms.health_penalty)
    types = runtime.types
    r = site.budget.reserves
    shares = {"discovery": r.discovery, "reestimation": r.reestimation,
              "verification": r.verification, "detectors": r.detectors}
    seed = np.zeros(len(table), dtype=bool)
    seed_rows = table.rows_of(list(seeds))
    seed[seed_rows[seed_rows >= 0]] = True
    return AllocInput(
        rows=table.records, host=table.host_of, delay=hosts.delay, hold_until=hosts.hold,
        health=hosts.health, sitemap_trusted=hosts.trusted, seed=seed, now=now,
        budget_rate=terms.budget / terms.cycle_seconds, period=terms.period,
        cycle_seconds=terms.cycle_seconds, sitemap_seconds=terms.sitemap_seconds, shares=shares,
        type_tier={types.id(t.name): t.tier for t in site.page_types},
        listing_types=frozenset(types.id(t.name) for t in site.page_types if t.listing is not None),
        prior=terms.prior, default_cost=runtime.default_cost(), backlog=backlog,
        gain=gain, objective=Objective(site.objective), seed_rng=terms.seed, listed=table.listings)
