"""Rate allocation within a budget and per-host capacities (webcrawl.revisit.allocate)."""

from __future__ import annotations

import numpy as np
import pytest

from webcrawl.revisit import Objective, optimal_frequencies, value_weighted_freshness
from webcrawl.revisit.allocate import allocate_rates, expected_freshness


def pages(n: int, hosts: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    rate = 1 / rng.choice([10, 60, 300, 3600, 86_400], n)
    value = rng.choice([1.0, 3.0, 10.0], n)
    cost = rng.uniform(0.5, 2.0, n)
    host = rng.integers(0, hosts, n)
    return rate, value, cost, host


def test_without_binding_caps_it_is_the_reference_optimum() -> None:
    rate, value, cost, host = pages(500, 4)
    got = allocate_rates(rate, value, cost, host, np.full(4, np.inf), 2.0)
    want = optimal_frequencies(rate, value, cost, 2.0)
    assert got.spend_rate == pytest.approx(2.0, rel=1e-3)
    assert value_weighted_freshness(rate, value, got.frequency) == pytest.approx(
        value_weighted_freshness(rate, value, want), abs=1e-4)
    assert np.allclose(got.frequency, want, rtol=1e-2, atol=1e-9)


def test_a_host_capacity_binds_and_the_money_goes_elsewhere() -> None:
    rate, value, cost, host = pages(400, 2, seed=3)
    free = allocate_rates(rate, value, cost, host, np.full(2, np.inf), 4.0)
    load = np.bincount(host, weights=free.frequency, minlength=2)
    cap = np.array([load[0] / 3, np.inf])
    got = allocate_rates(rate, value, cost, host, cap, 4.0)
    new_load = np.bincount(host, weights=got.frequency, minlength=2)
    assert new_load[0] == pytest.approx(cap[0], rel=1e-3)
    assert got.nu[0] > 0 and got.nu[1] == 0
    assert got.spend_rate == pytest.approx(4.0, rel=1e-3), "budget parked on the capped host"
    assert new_load[1] > load[1]
    # Better than scaling the capped host's pages down uniformly (a feasible alternative).
    scaled = free.frequency.copy()
    scaled[host == 0] /= 3
    scaled[host == 1] *= (4.0 - (cost * scaled)[host == 0].sum()) / (cost * scaled)[host == 1].sum()
    assert value_weighted_freshness(rate, value, got.frequency) >= value_weighted_freshness(
        rate, value, scaled) - 1e-9


def test_the_optimum_skips_pages_that_change_too_fast() -> None:
    rate = np.array([1.0, 1 / 600, 1 / 600])
    got = allocate_rates(rate, np.ones(3), np.ones(3), np.zeros(3, dtype=np.intp),
                         np.array([np.inf]), 0.01)
    assert got.frequency[0] == 0 and got.frequency[1] > 0


def test_events_objective_favours_fast_pages() -> None:
    rate = np.array([1 / 60, 1 / 6000])
    got = allocate_rates(rate, np.ones(2), np.ones(2), np.zeros(2, dtype=np.intp),
                         np.array([np.inf]), 0.02, objective=Objective.EVENTS)
    assert got.frequency[0] > got.frequency[1]


def test_expected_freshness() -> None:
    assert expected_freshness(np.array([0.0, 1.0, 1.0]), np.array([0.0, 0.0, 1e9])).tolist() == \
        pytest.approx([1.0, 0.0, 1.0], abs=1e-6)
