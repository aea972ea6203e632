from __future__ import annotations

import numpy as np
import pytest

from webcrawl.revisit import Clock, ManualClock, SystemClock, uniform_frequencies, value_weighted_freshness
from webcrawl.revisit.simulate import CHO_GM_MIX, DAY, PeriodicPolicy, Truth, run, synthetic_population


def test_clocks() -> None:
    clock = ManualClock(100.0)
    assert isinstance(clock, Clock) and isinstance(SystemClock(), Clock)
    assert clock.advance(5) == 105.0 and clock.time() == 105.0
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.set(0.0)


def test_population_follows_the_mix() -> None:
    pop = synthetic_population(20_000, np.random.default_rng(0))
    interval = 1 / pop.rate
    assert interval.min() >= 900 and interval.max() <= 365 * DAY
    edges = [hi for _, _, hi in CHO_GM_MIX]
    shares = np.diff(np.concatenate([[0], np.searchsorted(np.sort(interval), edges)])) / len(pop)
    assert shares == pytest.approx([s for s, _, _ in CHO_GM_MIX], abs=0.015)
    assert set(np.unique(pop.value)) == {1.0, 3.0, 10.0}
    assert np.all(pop.fetched <= 0)


def test_truth_answers_visits_consistently() -> None:
    pop = synthetic_population(2000, np.random.default_rng(1))
    truth = Truth(pop, np.random.default_rng(2), start=0.0, end=10 * DAY)
    seen = truth.visit(np.arange(2000), np.full(2000, DAY))
    assert np.all(seen.interval == DAY - pop.fetched)
    dated = ~np.isnan(seen.last_modified_age)
    assert np.array_equal(dated, pop.lastmod)
    # A reliable Last-Modified is newer than our previous fetch exactly when the page changed.
    assert np.array_equal((seen.last_modified_age <= seen.interval)[dated], seen.changed[dated])
    expected = -np.expm1(-pop.rate * seen.interval)
    assert seen.changed.mean() == pytest.approx(expected.mean(), abs=0.03)


def test_measured_freshness_matches_the_analytic_one() -> None:
    rng = np.random.default_rng(3)
    pop = synthetic_population(3000, rng)
    fast = type(pop)(pop.rate * 30, pop.value, pop.cost, pop.group, pop.lastmod, pop.fetched)  # reach steady state sooner
    budget = fast.cost.sum() / (2 * DAY)
    f = uniform_frequencies(fast.cost, budget)
    result = run(PeriodicPolicy(f, np.random.default_rng(4)), fast, np.random.default_rng(5),
                 cycle_seconds=6 * 3600, cycles=4 * 40, warmup_cycles=4 * 10)
    assert result.freshness == pytest.approx(value_weighted_freshness(fast.rate, fast.value, f), abs=0.02)
    assert result.spend / (budget * result.seconds) == pytest.approx(1.0, rel=0.02)
    assert 0 < result.changes <= result.visits and result.cost_per_change > 0


def test_periodic_policy_visits_fast_pages_several_times_a_cycle() -> None:
    policy = PeriodicPolicy(np.array([4 / 3600, 0.0, 1 / (2 * 3600)]), np.random.default_rng(0))
    index, when = policy.plan(0.0, 3600.0)
    assert np.sum(index == 0) == 4 and np.sum(index == 1) == 0 and np.sum(index == 2) <= 1
    assert np.all((when >= 0) & (when < 3600))


def test_conditional_visits_pay_a_304_when_unchanged() -> None:
    pop = synthetic_population(1000, np.random.default_rng(6))
    plain = Truth(pop, np.random.default_rng(7), start=-1e9, end=1e9)
    cheap = Truth(pop, np.random.default_rng(7), start=-1e9, end=1e9)
    every = np.arange(1000)
    a = plain.visit(every, np.full(1000, DAY))
    b = cheap.visit(every, np.full(1000, DAY), conditional=True)
    assert np.array_equal(a.changed, b.changed)
    assert plain.spend == pytest.approx(pop.cost.sum())
    assert cheap.spend == pytest.approx(pop.cost[a.changed].sum() + 1.0 * (~a.changed).sum())
