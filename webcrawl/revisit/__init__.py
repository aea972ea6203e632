"""The revisit model: which known page to fetch again, and when (see docs/revisit.md).

Pure functions and small classes over numpy arrays; no Scrapy, no Redis, no I/O, no wall clock
(a :class:`Clock` is injected). The Scrapy components wire it in: they keep a
:class:`PageHistory` per page, estimate its rate with :func:`effective_data` and
:func:`estimate_rates` under the group priors of :func:`fit_group_priors`, price visits with
:func:`expected_cost`, and plan each cycle with :func:`plan_cycle`.
"""

from __future__ import annotations

from webcrawl.clock import Clock, ManualClock, SystemClock
from .cost import BillingModel, CostProfile, HealthTracker, RunningCost, expected_cost
from .estimate import (
    INFORMATIVE_UNCHANGED, censored_mle, cho_garcia_molina, effective_data, estimate_rates,
    naive_rate, posterior_mean_exact,
)
from .gain import (
    Objective, average_freshness, change_probability, events_gain, freshness_gain, gain,
    marginal_freshness_gain,
)
from .history import NBINS, HistoryTable, PageHistory, interval_bin
from .ledger import CycleLedger
from .planner import Plan, PlanInput, Purpose, Reserves, plan_cycle
from .prior import EffectiveData, GammaPrior, GroupPriors, fit_group_priors, posterior_mean
from .priority import DEFAULT_TIERS, ValuePolicy, ValueRule, priority
from .reference import (
    optimal_frequencies, proportional_frequencies, uniform_frequencies, value_weighted_freshness,
)
from .trust import TrustTracker

__all__ = [
    "BillingModel", "Clock", "CostProfile", "CycleLedger", "DEFAULT_TIERS", "EffectiveData", "GammaPrior",
    "GroupPriors", "HealthTracker", "HistoryTable", "INFORMATIVE_UNCHANGED", "NBINS", "Objective",
    "PageHistory", "Plan", "PlanInput", "Purpose", "Reserves", "RunningCost", "ManualClock",
    "SystemClock", "TrustTracker", "ValuePolicy", "ValueRule", "average_freshness", "censored_mle",
    "change_probability", "cho_garcia_molina", "effective_data", "estimate_rates", "events_gain",
    "expected_cost", "fit_group_priors", "freshness_gain", "gain", "interval_bin",
    "marginal_freshness_gain", "naive_rate", "optimal_frequencies", "plan_cycle", "posterior_mean",
    "posterior_mean_exact", "priority", "proportional_frequencies", "uniform_frequencies",
    "value_weighted_freshness",
]
