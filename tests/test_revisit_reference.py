from __future__ import annotations

import numpy as np
import pytest

from webcrawl.revisit import (
    marginal_freshness_gain, optimal_frequencies, proportional_frequencies, uniform_frequencies,
    value_weighted_freshness,
)

DAY = 86400.0


@pytest.fixture
def world() -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(0)
    n = 4000
    rate = 1 / np.exp(rng.uniform(np.log(900), np.log(365 * DAY), n))
    value = rng.choice([1.0, 3.0, 10.0], n)
    cost = rng.lognormal(0, 0.5, n)
    return rate, value, cost, cost.sum() / (3 * DAY)


def test_all_allocations_spend_the_budget(world: tuple[np.ndarray, np.ndarray, np.ndarray, float]) -> None:
    rate, value, cost, budget = world
    for f in (uniform_frequencies(cost, budget), proportional_frequencies(rate, cost, budget),
              optimal_frequencies(rate, value, cost, budget)):
        assert (cost * f).sum() == pytest.approx(budget, rel=1e-6)


def test_optimum_beats_uniform_beats_proportional(world: tuple[np.ndarray, np.ndarray, np.ndarray, float]) -> None:
    rate, value, cost, budget = world
    fresh = {name: value_weighted_freshness(rate, value, f) for name, f in [
        ("uniform", uniform_frequencies(cost, budget)),
        ("proportional", proportional_frequencies(rate, cost, budget)),
        ("optimal", optimal_frequencies(rate, value, cost, budget)),
    ]}
    assert fresh["optimal"] > fresh["uniform"] > fresh["proportional"]


def test_optimum_equalises_marginal_value_and_skips_pages_too_fast_to_chase(
    world: tuple[np.ndarray, np.ndarray, np.ndarray, float],
) -> None:
    rate, value, cost, budget = world
    f = optimal_frequencies(rate, value, cost, budget)
    visited = f > 0
    marginal = value * marginal_freshness_gain(rate, 1 / np.where(visited, f, 1.0)) / cost
    mu = np.median(marginal[visited])
    assert np.allclose(marginal[visited], mu, rtol=1e-3)
    # Unvisited pages could not reach the threshold at any frequency: value / (cost * rate) <= mu.
    assert np.all(value[~visited] / (cost[~visited] * rate[~visited]) <= mu * (1 + 1e-6))
    assert np.median(rate[~visited]) > 10 * np.median(rate[visited])
