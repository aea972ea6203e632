"""The cycle planner's arithmetic (revisit-model.md section 5): pure, vectorised, no I/O.

Given every known page as numpy columns and a cycle budget, :func:`plan_cycle` returns which
pages to fetch this cycle and why. Four shares of the budget:

- *verification*: a uniform random sample of all known pages, whatever their scores, so the
  report can check the model's assumptions on pages the scores did not choose;
- *discovery*: an allowance for new URLs (they have no history, never outrank known pages, and
  are picked by the frontier, not here): ``min(share, discovery_demand)``;
- *revisit*: pages by decreasing ``value * gain / cost`` until the share is spent;
- *re-estimation*: among pages the revisit pass left, the longest-unvisited first. Those are the
  pages the scores have written off (estimated never to change, or not worth their cost); without
  this share a wrong estimate would never be corrected. Oldest-first is a round robin: every page
  is eventually re-checked, and a page just checked goes to the back.

Unused shares flow on: verification's and discovery's leftovers to the revisit pass, the revisit
pass's to re-estimation, re-estimation's back to further revisits and then to discovery. What is
left after that is ``unspent``. Pages not planned simply wait: their priority grows with the time
since their last visit, so nothing is lost, only deferred.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np
from numpy.typing import NDArray

from .gain import Objective, gain

Floats = NDArray[np.float64]
Indices = NDArray[np.intp]


class Purpose(str, Enum):
    """Why a request is made (the values are what requests carry as their purpose)."""

    DISCOVERY = "discovery"
    REVISIT = "revisit"
    REESTIMATION = "re-estimation"
    VERIFICATION = "verification"


@dataclass(frozen=True)
class Reserves:
    """Shares of each cycle's budget kept out of the revisit pass (fractions; revisit gets the rest)."""

    discovery: float = 0.10
    reestimation: float = 0.05
    verification: float = 0.02

    def __post_init__(self) -> None:
        shares = (self.discovery, self.reestimation, self.verification)
        if any(not 0 <= s <= 1 for s in shares) or sum(shares) > 1:
            raise ValueError(f"{self!r}: each reserve share must be in [0, 1] and their sum <= 1")

    @property
    def revisit(self) -> float:
        return 1.0 - self.discovery - self.reestimation - self.verification


@dataclass(frozen=True)
class PlanInput:
    """Every known page, one entry per page in each column (same length).

    ``rate``: estimated changes per second; ``since``: seconds since the last visit; ``value``;
    ``cost``: expected cost of a visit (> 0); ``interval``: the planned next interval for
    :func:`~webcrawl.revisit.freshness_gain` (``None``, the default: the steady-state
    :func:`~webcrawl.revisit.marginal_freshness_gain`, under which the greedy cut reproduces the
    Lagrangian optimum's frequencies).
    ``priority``, when given, replaces value * gain / cost (a caller that scores incrementally).
    """

    rate: Floats
    since: Floats
    value: Floats
    cost: Floats
    interval: Floats | None = None
    priority: Floats | None = None

    def __post_init__(self) -> None:
        n = len(self.cost)
        for name in ("rate", "since", "value", "interval", "priority"):
            col = getattr(self, name)
            if col is not None and len(col) != n:
                raise ValueError(f"PlanInput.{name} has {len(col)} entries, cost has {n}")
        if n and not np.all(self.cost > 0):
            raise ValueError("PlanInput.cost: every expected cost must be > 0")

    def __len__(self) -> int:
        return len(self.cost)

    def scores(self, objective: Objective = Objective.FRESHNESS) -> Floats:
        if self.priority is not None:
            return np.asarray(self.priority, dtype=float)
        return self.value * gain(objective, self.rate, self.since, self.interval) / self.cost


@dataclass(frozen=True)
class Plan:
    """One cycle's plan. Page indices refer to the rows of the :class:`PlanInput`; no page appears
    twice. ``revisit`` is in decreasing priority, ``reestimation`` oldest first."""

    revisit: Indices
    reestimation: Indices
    verification: Indices
    discovery_allowance: float
    spend: dict[Purpose, float] = field(default_factory=dict)  #: expected spend per purpose
    unspent: float = 0.0

    def indices(self) -> Indices:
        return np.concatenate([self.revisit, self.reestimation, self.verification])

    def purposes(self) -> list[Purpose]:
        """The purpose of each entry of :meth:`indices`."""
        return ([Purpose.REVISIT] * len(self.revisit) + [Purpose.REESTIMATION] * len(self.reestimation)
                + [Purpose.VERIFICATION] * len(self.verification))

    @property
    def total(self) -> float:
        return sum(self.spend.values())


def _prefix(order: Indices, cost: Floats, budget: float) -> tuple[Indices, float]:
    """The longest prefix of ``order`` whose cost fits ``budget``, and its cost."""
    if budget <= 0 or not len(order):
        return order[:0], 0.0
    spent = np.cumsum(cost[order])
    k = int(np.searchsorted(spent, budget * (1 + 1e-12), side="right"))
    return order[:k], float(spent[k - 1]) if k else 0.0


def plan_cycle(
    pages: PlanInput, budget: float, reserves: Reserves, *, rng: np.random.Generator,
    discovery_demand: float = 0.0, objective: Objective = Objective.FRESHNESS,
) -> Plan:
    """Plan one cycle within ``budget`` (the site's cost unit). Expected spend never exceeds it.

    ``discovery_demand``: expected cost of the new URLs waiting (the discovery share is capped by
    it). ``rng`` draws the verification sample (inject a seeded one for reproducible plans).
    O(n log n) in the number of pages: a full sort by priority and one by age.
    """
    if not budget >= 0:
        raise ValueError(f"budget={budget!r}: expected a cost >= 0")
    n = len(pages)
    cost = np.asarray(pages.cost, dtype=float)
    free = np.ones(n, dtype=bool)

    verification, ver_spent = _prefix(rng.permutation(n), cost, reserves.verification * budget)
    free[verification] = False
    discovery = min(reserves.discovery * budget, max(discovery_demand, 0.0))
    pool = (reserves.verification * budget - ver_spent) + (reserves.discovery * budget - discovery)

    score = pages.scores(objective)
    candidates = np.flatnonzero(free & (score > 0) & np.isfinite(score))
    by_priority = candidates[np.argsort(-score[candidates], kind="stable")]
    revisit, rev_spent = _prefix(by_priority, cost, reserves.revisit * budget + pool)
    pool = reserves.revisit * budget + pool - rev_spent
    free[revisit] = False

    left = np.flatnonzero(free)
    by_age = left[np.argsort(-np.asarray(pages.since, dtype=float)[left], kind="stable")]
    reestimation, re_spent = _prefix(by_age, cost, reserves.reestimation * budget + pool)
    pool = reserves.reestimation * budget + pool - re_spent
    free[reestimation] = False

    # Re-estimation could not use it all: more revisits, then more discovery.
    rest = by_priority[len(revisit):]
    more, more_spent = _prefix(rest[free[rest]], cost, pool)
    revisit = np.concatenate([revisit, more])
    rev_spent += more_spent
    pool -= more_spent
    extra = min(pool, max(discovery_demand, 0.0) - discovery)
    discovery += max(extra, 0.0)
    pool -= max(extra, 0.0)
    spend = {
        Purpose.REVISIT: rev_spent, Purpose.REESTIMATION: re_spent,
        Purpose.VERIFICATION: ver_spent, Purpose.DISCOVERY: discovery,
    }
    return Plan(revisit, reestimation, verification, discovery, spend, max(pool, 0.0))
