"""The planner's settings, read and checked once, and the state objects it works on.

| setting | default | meaning |
| --- | --- | --- |
| ``WEBCRAWL_PLANNER_ENABLED`` | ``True`` | plan each cycle |
| ``WEBCRAWL_PLANNER_POLICY`` | ``"learned"`` | ``learned`` (value x gain / cost) or ``uniform`` (oldest first: a baseline) |
| ``WEBCRAWL_CYCLE_CONTINUOUS`` | ``False`` | keep running and plan a new cycle every cycle length |
| ``WEBCRAWL_CYCLE_SECONDS`` | ``None`` | cycle length; ``None``: the site file's ``budget.cycle_seconds`` |
| ``WEBCRAWL_BUDGET_PER_CYCLE`` | ``None`` | budget of a cycle; ``None``: the site file's ``budget.amount_per_cycle`` |
| ``WEBCRAWL_PLANNER_TICK_SECONDS`` | ``1.0`` | heartbeat and index sync period |
| ``WEBCRAWL_PLANNER_SETTLE_SECONDS`` | ``1.0`` | age of an index mark before its record is synced |
| ``WEBCRAWL_PLANNER_LOCK_SECONDS`` | ``60.0`` | expiry of the planning lock (and longest wait for it) |
| ``WEBCRAWL_PLANNER_SEED`` | ``None`` | seed of the verification sample |
| ``WEBCRAWL_PRIOR_CHANGE_SECONDS``, ``WEBCRAWL_PRIOR_SHAPE`` | ``604800``, ``0.5`` | the prior of a page type with no history (shared with the priority middleware) |
| ``WEBCRAWL_COST_DEFAULT_BYTES`` | ``50000`` | a visit's bytes before any was measured (bandwidth billing; shared) |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from webcrawl.clock import SystemClock
from webcrawl.extensions._planner_hooks import IndexHooks
from webcrawl.extensions._planner_score import Scoring
from webcrawl.middlewares.conditional import change_context
from webcrawl.config import configured_prior
from webcrawl.revisit import BillingModel, Objective, Reserves
from webcrawl.scheduler import crawl_frontier
from webcrawl.state.costs import cost_context
from webcrawl.state.frontier import Frontier
from webcrawl.state.pages import PageIndex
from webcrawl.state.sitemaps import SitemapStore

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from webcrawl.state.ledger import LedgerStore

__all__ = ["PlannerParts", "planner_parts"]


@dataclass
class PlannerParts:
    ledger: LedgerStore
    index: PageIndex
    frontier: Frontier
    scoring: Scoring
    hooks: IndexHooks
    continuous: bool
    tick_seconds: float
    lock_seconds: float
    seed: int | None


def _positive(settings: BaseSettings, name: str, default: Any) -> float:
    raw = settings.get(name, default)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0:
        raise ValueError(f"{name}={raw!r}: expected a number > 0")
    return value


def default_cost(billing: BillingModel, settings: BaseSettings) -> float:
    if billing is BillingModel.BANDWIDTH:
        return _positive(settings, "WEBCRAWL_COST_DEFAULT_BYTES", 50_000.0)
    return 1.0


def planner_parts(crawler: Crawler) -> PlannerParts:
    """Everything the planner needs, from the crawler's settings and site (``NotConfigured``
    without a site file, ``ValueError`` naming a bad setting)."""
    settings = crawler.settings
    site = getattr(crawler.spider, "site", None)
    if site is None:
        raise NotConfigured("the cycle planner needs a site-file spider (its budget and page types)")
    policy = settings.get("WEBCRAWL_PLANNER_POLICY", "learned")
    cycle_seconds = settings.get("WEBCRAWL_CYCLE_SECONDS", None)
    budget = settings.get("WEBCRAWL_BUDGET_PER_CYCLE", None)
    cycle_seconds = site.budget.cycle_seconds if cycle_seconds in (None, "") else _positive(
        settings, "WEBCRAWL_CYCLE_SECONDS", None)
    budget = site.budget.amount_per_cycle if budget in (None, "") else _positive(
        settings, "WEBCRAWL_BUDGET_PER_CYCLE", None)
    costs = cost_context(crawler)
    change = change_context(crawler)
    r = site.budget.reserves
    prior = configured_prior(settings)
    type_costs = {t.name: costs.costs.means(t.name).get("billed", 0.0) for t in site.page_types}
    scoring = Scoring(
        budget=float(budget), cycle_seconds=float(cycle_seconds),
        reserves=Reserves(discovery=r.discovery, reestimation=r.reestimation, verification=r.verification),
        objective=Objective(site.objective), tiers={t.name: t.tier for t in site.page_types},
        default_cost=default_cost(costs.billing, settings), type_costs=type_costs, prior=prior,
        policy=policy)
    _, frontier = crawl_frontier(crawler)
    client, keys = frontier.client, frontier.keys
    index = PageIndex(client, keys)
    sitemaps = SitemapStore(client, keys, mode=lambda host: site.trust.for_host(host).sitemaps)
    hooks = IndexHooks(index, sitemaps, change.history, canonical=change.canonicalizer.canonical,
                       clock=SystemClock(),
                       settle=_positive(settings, "WEBCRAWL_PLANNER_SETTLE_SECONDS", 1.0))
    seed = settings.get("WEBCRAWL_PLANNER_SEED", None)
    return PlannerParts(
        ledger=costs.ledger, index=index, frontier=frontier, scoring=scoring, hooks=hooks,
        continuous=settings.getbool("WEBCRAWL_CYCLE_CONTINUOUS", False),
        tick_seconds=_positive(settings, "WEBCRAWL_PLANNER_TICK_SECONDS", 1.0),
        lock_seconds=_positive(settings, "WEBCRAWL_PLANNER_LOCK_SECONDS", 60.0),
        seed=None if seed in (None, "") else int(seed))
