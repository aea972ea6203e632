"""Scoring every known page for the cycle planner: rates, value, expected cost, the plan.

Pure numpy over :class:`webcrawl.state.pages.PageColumns` (no Scrapy, no Redis): the extension
loads the columns, this module turns them into a :class:`webcrawl.revisit.Plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from webcrawl.config import DEFAULT_PRIOR
from webcrawl.revisit import (
    EffectiveData, GammaPrior, GroupPriors, Objective, Plan, PlanInput, Reserves, estimate_rates,
    fit_group_priors, plan_cycle,
)
from webcrawl.state.pages import PageColumns

__all__ = ["POLICIES", "Scoring", "TIER_VALUES", "score_and_plan"]

#: Value of a page by its type's tier (site files: 1 low .. 4 critical): a factor of about 3 a
#: step, so "high" is worth 10 "low" pages, as in the revisit model's default tiers.
TIER_VALUES = {1: 1.0, 2: 3.0, 3: 10.0, 4: 30.0}
POLICIES = ("learned", "uniform")
_CHUNK = 50_000  # pages estimated at once: bounds the grid posterior's memory


@dataclass(frozen=True)
class Scoring:
    """How a site scores its pages (plain values, from the site file and settings)."""

    budget: float
    cycle_seconds: float
    reserves: Reserves
    objective: Objective = Objective.FRESHNESS
    tiers: dict[str, int] = field(default_factory=dict)  #: page type name -> tier 1..4
    default_cost: float = 1.0  #: a visit's cost where nothing was measured (site unit)
    type_costs: dict[str, float] = field(default_factory=dict)  #: measured mean per page type
    prior: GammaPrior = DEFAULT_PRIOR
    policy: str = "learned"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"WEBCRAWL_PLANNER_POLICY={self.policy!r}: expected one of {POLICIES}")


def estimate(columns: PageColumns, prior: GammaPrior) -> tuple[NDArray[np.float64], GroupPriors]:
    """Every page's posterior change rate under its page type's empirical-Bayes prior."""
    r = columns.records
    group = r["type"].astype(np.intp)
    ngroups = int(group.max()) + 1 if len(group) else 1
    data = EffectiveData(r["events"].astype(float), r["exposure"].astype(float), np.zeros(len(r)))
    priors = fit_group_priors(group, data, prior, ngroups=ngroups)
    rates = np.empty(len(r))
    for start in range(0, len(r), _CHUNK):
        rows = np.arange(start, min(start + _CHUNK, len(r)))
        part = EffectiveData(data.events[rows], data.exposure[rows], data.mle[rows])
        rates[rows] = estimate_rates(columns.history_table(rows), priors.shape[group[rows]],
                                     priors.rate[group[rows]], part)
    return rates, priors


def costs(columns: PageColumns, scoring: Scoring) -> NDArray[np.float64]:
    """Expected cost of a visit to each page: its own measured mean, else its page type's, else
    ``default_cost``. The cost middleware adds to a page's ``billed`` only once its history exists,
    i.e. from its second observation on: the mean is ``billed / (fetches - 1)``."""
    r = columns.records
    by_id = {tid: scoring.type_costs[name] for name, tid in columns.types.items() if name in scoring.type_costs}
    ngroups = max([*columns.types.values(), 0]) + 1
    fallback = np.full(ngroups, scoring.default_cost)
    for tid, cost in by_id.items():
        if cost > 0:
            fallback[tid] = cost
    measured = (r["fetches"] > 1) & (r["billed"] > 0)
    own = np.where(measured, r["billed"] / np.maximum(r["fetches"] - 1, 1), 0.0)
    return np.maximum(np.where(measured, own, fallback[r["type"].astype(np.intp)]), 1e-9)


def values(columns: PageColumns, scoring: Scoring) -> NDArray[np.float64]:
    """Each page's value: the tier a URL rule or record field gave it at its last fetch
    (``columns.tiers``, see :mod:`webcrawl.state.pages`), else its page type's tier."""
    ngroups = max([*columns.types.values(), 0]) + 1
    table = np.full(ngroups, TIER_VALUES[1])
    for name, tid in columns.types.items():
        table[tid] = TIER_VALUES.get(scoring.tiers.get(name, 1), 1.0)
    value = table[columns.records["type"].astype(np.intp)]
    if columns.tiers is not None and columns.tiers.any():
        by_tier = np.array([0.0, *(TIER_VALUES[t] for t in (1, 2, 3, 4))])
        tiers = columns.tiers.astype(np.intp)
        value = np.where((tiers >= 1) & (tiers <= 4), by_tier[np.clip(tiers, 0, 4)], value)
    return value


def score_and_plan(columns: PageColumns, scoring: Scoring, now: float, rng: np.random.Generator,
                   discovery_demand: float = 0.0, dated: NDArray[np.float64] | None = None,
                   ) -> tuple[Plan, PlanInput]:
    """Plan one cycle over every indexed page. Visits are assumed to land mid-cycle.

    ``learned``: ``value * gain / cost`` with estimated rates; ``uniform`` (a baseline): the
    pages longest unvisited first, whatever they cost or how often they change.
    ``dated`` (learned only): per page, a trusted sitemap ``lastmod`` (NaN where none). A page
    dated after its last fetch has changed: its change probability is 1, it goes first. A page
    dated before it has not: it is not revisited (re-estimation and verification may still pick it).
    """
    since = np.maximum(now + 0.5 * scoring.cycle_seconds - columns.records["last_fetched"], 0.0)
    cost = costs(columns, scoring)
    if scoring.policy == "uniform":
        pages = PlanInput(rate=np.zeros(len(columns)), since=since, value=np.ones(len(columns)),
                          cost=cost, priority=since + 1e-9)
    else:
        rates, _ = estimate(columns, scoring.prior)
        pages = PlanInput(rate=rates, since=since, value=values(columns, scoring), cost=cost)
        if dated is not None and np.isfinite(dated).any():
            score = pages.scores(scoring.objective)
            last = columns.records["last_fetched"]
            changed, unchanged = dated > last, dated <= last  # NaN compares False
            top = float(np.nanmax(np.where(np.isfinite(score), score, 0.0), initial=0.0)) + 1.0
            # Known changes first, by value per cost; then the model's scores.
            boosted = np.where(changed, top * (1.0 + pages.value / cost), np.where(unchanged, 0.0, score))
            pages = PlanInput(rate=rates, since=since, value=pages.value, cost=cost, priority=boosted)
    plan = plan_cycle(pages, scoring.budget, scoring.reserves, rng=rng,
                      discovery_demand=discovery_demand, objective=scoring.objective)
    return plan, pages
