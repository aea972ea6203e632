from __future__ import annotations

import numpy as np
import pytest

from webcrawl.revisit import Objective, PlanInput, Purpose, Reserves, marginal_freshness_gain, plan_cycle

DAY = 86400.0


def pages(n: int, seed: int = 0, rate: np.ndarray | None = None) -> PlanInput:
    rng = np.random.default_rng(seed)
    return PlanInput(
        rate=rng.lognormal(np.log(1 / (3 * DAY)), 2.0, n) if rate is None else rate,
        since=rng.uniform(0, 30 * DAY, n),
        value=rng.choice([1.0, 3.0, 10.0], n),
        cost=rng.lognormal(0.0, 0.5, n),
    )


def check_disjoint(plan_indices: np.ndarray) -> None:
    assert len(np.unique(plan_indices)) == len(plan_indices)


def test_budget_and_reserves_are_kept() -> None:
    p = pages(5000)
    budget = 0.1 * p.cost.sum()
    reserves = Reserves(discovery=0.1, reestimation=0.05, verification=0.02)
    plan = plan_cycle(p, budget, reserves, rng=np.random.default_rng(1), discovery_demand=1e9)
    check_disjoint(plan.indices())
    assert plan.total + plan.unspent == pytest.approx(budget)
    assert plan.total <= budget * (1 + 1e-9)
    biggest = p.cost.max()
    # Its share, plus the crumbs the other passes could not fit (they flow to discovery last).
    assert 0.1 * budget <= plan.discovery_allowance <= 0.1 * budget + 3 * biggest
    assert budget * 0.02 - biggest < plan.spend[Purpose.VERIFICATION] <= budget * 0.02
    assert budget * 0.05 - biggest < plan.spend[Purpose.REESTIMATION] <= budget * 0.05 + biggest
    assert plan.spend[Purpose.REVISIT] > budget * 0.83 - 3 * biggest
    assert plan.spend[Purpose.REVISIT] == pytest.approx(p.cost[plan.revisit].sum())
    assert len(plan.purposes()) == len(plan.indices())


def test_revisits_are_the_top_priorities_and_reestimation_the_oldest() -> None:
    p = pages(3000, seed=2)
    plan = plan_cycle(p, 0.2 * p.cost.sum(), Reserves(0.0, 0.05, 0.02), rng=np.random.default_rng(3))
    score = p.value * marginal_freshness_gain(p.rate, p.since) / p.cost
    assert np.all(np.diff(score[plan.revisit]) <= 0)
    others = np.setdiff1d(np.arange(3000), np.concatenate([plan.revisit, plan.verification]))
    # Every page left out of the revisit pass (and not sampled) scores at most the first one skipped.
    skipped = others[score[others] > score[plan.revisit].min()]
    assert len(skipped) <= 1
    rest = np.setdiff1d(others, plan.reestimation)
    assert p.since[plan.reestimation].min() >= p.since[rest].max()


def test_unused_shares_flow_to_the_others() -> None:
    p = pages(2000, seed=4)
    budget = 0.1 * p.cost.sum()
    reserves = Reserves(discovery=0.2, reestimation=0.05, verification=0.02)
    # No new URLs: discovery's share goes to revisits.
    plan = plan_cycle(p, budget, reserves, rng=np.random.default_rng(5), discovery_demand=0.0)
    assert plan.discovery_allowance == 0.0
    assert plan.spend[Purpose.REVISIT] > budget * 0.9 - 3 * p.cost.max()
    # Nothing scores (no page is thought to change): re-estimation takes the revisit share.
    flat = PlanInput(rate=np.zeros(2000), since=p.since, value=p.value, cost=p.cost)
    plan = plan_cycle(flat, budget, reserves, rng=np.random.default_rng(5), discovery_demand=0.0)
    assert len(plan.revisit) == 0
    assert plan.spend[Purpose.REESTIMATION] > budget * 0.97 - 3 * p.cost.max()
    # A budget larger than everything: all pages planned once, the rest to discovery, then unspent.
    plan = plan_cycle(p, 10 * p.cost.sum(), reserves, rng=np.random.default_rng(5), discovery_demand=5.0)
    check_disjoint(plan.indices())
    assert len(plan.indices()) == 2000 and plan.discovery_allowance == 5.0
    assert plan.unspent == pytest.approx(10 * p.cost.sum() - p.cost.sum() - 5.0)


def test_verification_sample_is_uniform() -> None:
    p = pages(500, seed=6)
    counts = np.zeros(500)
    for seed in range(300):
        plan = plan_cycle(p, 0.5 * p.cost.sum(), Reserves(0.0, 0.0, 0.1), rng=np.random.default_rng(seed))
        counts[plan.verification] += 1
    top = np.argsort(-(p.value * marginal_freshness_gain(p.rate, p.since) / p.cost))[:250]
    assert counts[top].mean() == pytest.approx(counts.mean(), rel=0.1)  # blind to the scores
    assert counts.std() < 3 * np.sqrt(counts.mean())


def reference_plan(p: PlanInput, budget: float, reserves: Reserves, verification: np.ndarray) -> tuple[list[int], list[int]]:
    """The same rules, one page at a time (no discovery demand)."""
    free = set(range(len(p))) - set(verification.tolist())
    pool = reserves.verification * budget - p.cost[verification].sum() + reserves.discovery * budget
    score = p.scores()
    left = reserves.revisit * budget + pool
    revisit = []
    for i in sorted(free, key=lambda i: (-score[i], i)):
        if score[i] <= 0 or p.cost[i] > left * (1 + 1e-12):
            break
        revisit.append(i)
        left -= p.cost[i]
    free -= set(revisit)
    left += reserves.reestimation * budget
    reest = []
    for i in sorted(free, key=lambda i: (-p.since[i], i)):
        if p.cost[i] > left * (1 + 1e-12):
            break
        reest.append(i)
        left -= p.cost[i]
    return revisit, reest


def test_ten_thousand_pages_match_a_page_by_page_reference() -> None:
    p = pages(10_000, seed=8)
    reserves = Reserves(discovery=0.05, reestimation=0.05, verification=0.02)
    budget = 0.05 * p.cost.sum()
    plan = plan_cycle(p, budget, reserves, rng=np.random.default_rng(9))
    revisit, reest = reference_plan(p, budget, reserves, plan.verification)
    assert plan.revisit.tolist()[: len(revisit)] == revisit
    assert plan.reestimation.tolist() == reest
    assert plan.total <= budget * (1 + 1e-9)
    check_disjoint(plan.indices())


def test_events_objective_and_validation() -> None:
    p = pages(100, seed=10)
    plan = plan_cycle(p, 5.0, Reserves(0, 0, 0), rng=np.random.default_rng(0), objective=Objective.EVENTS)
    events = p.value * p.rate * p.since / p.cost
    assert plan.revisit[0] == int(np.argmax(events))
    with pytest.raises(ValueError, match="reserve"):
        Reserves(discovery=0.6, reestimation=0.3, verification=0.2)
    with pytest.raises(ValueError, match="cost"):
        PlanInput(rate=np.ones(2), since=np.ones(2), value=np.ones(2), cost=np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="entries"):
        PlanInput(rate=np.ones(3), since=np.ones(2), value=np.ones(2), cost=np.ones(2))
    with pytest.raises(ValueError, match="budget"):
        plan_cycle(p, -1.0, Reserves(), rng=np.random.default_rng(0))
    empty = plan_cycle(pages(0), 10.0, Reserves(), rng=np.random.default_rng(0), discovery_demand=1.0)
    assert len(empty.indices()) == 0 and empty.discovery_allowance == 1.0 and empty.unspent == pytest.approx(9.0)
