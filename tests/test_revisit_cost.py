from __future__ import annotations

import pytest

from webcrawl.revisit import BillingModel, CostProfile, HealthTracker, RunningCost, expected_cost

PAGE = CostProfile(full_bytes=50_000, not_modified_bytes=400, failed_bytes=2_000, failure_rate=0.2)


def test_bandwidth_counts_headers_and_failed_transfers() -> None:
    # 0.2 / 0.8 = 0.25 failed attempts per answered visit, each 2,000 bytes.
    assert float(expected_cost(BillingModel.BANDWIDTH, PAGE)) == pytest.approx(50_000 + 0.25 * 2_000)


def test_credits_charge_successes_only_and_ignore_size() -> None:
    assert float(expected_cost(BillingModel.CREDITS, PAGE)) == 1.0
    big = CostProfile(full_bytes=5_000_000, failure_rate=0.5)  # a rendered page: same credit
    assert float(expected_cost(BillingModel.CREDITS, big)) == 1.0


def test_requests_charge_every_attempt() -> None:
    assert float(expected_cost(BillingModel.REQUESTS, PAGE)) == pytest.approx(1.25)


def test_304_is_cheaper_only_where_validators_are_trusted() -> None:
    untrusted = expected_cost(BillingModel.BANDWIDTH, PAGE, p_unchanged=0.9)
    trusted = expected_cost(BillingModel.BANDWIDTH, PAGE, p_unchanged=0.9, validators_trusted=True)
    assert float(untrusted) == pytest.approx(50_500)
    assert float(trusted) == pytest.approx(0.9 * 400 + 0.1 * 50_000 + 500)
    api = CostProfile(full_bytes=1, credits=1.0, not_modified_credits=0.2)
    assert float(expected_cost(BillingModel.CREDITS, api, p_unchanged=0.5, validators_trusted=True)) == pytest.approx(0.6)
    # Vectorised over pages' change probabilities.
    many = expected_cost(BillingModel.BANDWIDTH, PAGE, p_unchanged=[0.0, 1.0], validators_trusted=True)
    assert many.tolist() == [pytest.approx(50_500), pytest.approx(900)]


def test_health_multiplier_raises_cost_and_recovers() -> None:
    health = HealthTracker(penalty=4.0, half_life_seconds=60.0)
    assert health.multiplier(0.0) == 1.0
    for i in range(10):
        health.observe(ok=False, now=float(i))
    sick = health.multiplier(10.0)
    assert sick > 4.0
    assert float(expected_cost(BillingModel.CREDITS, PAGE, health=sick)) == pytest.approx(sick)
    for i in range(50):
        health.observe(ok=True, now=11.0 + i)
    assert health.multiplier(61.0) < 2.0
    assert health.multiplier(10_000.0) == pytest.approx(1.0, abs=1e-3)  # time heals too


def test_running_cost_learns_profile() -> None:
    running = RunningCost(alpha=0.1)
    assert running.profile(default_full_bytes=30_000).full_bytes == 30_000
    for _ in range(8):
        running.observe("full", 40_000)
    running.observe("not_modified", 300)
    running.observe("failed", 1_000)
    p = running.profile(default_full_bytes=30_000)
    assert p.full_bytes == 40_000 and p.not_modified_bytes == 300 and p.failed_bytes == 1_000
    assert p.failure_rate == pytest.approx(0.1)
    with pytest.raises(ValueError, match="outcome"):
        running.observe("maybe", 1)
    with pytest.raises(ValueError, match="failure_rate"):
        CostProfile(full_bytes=1, failure_rate=2)


def test_profile_of_arrays_prices_every_page_at_once() -> None:
    import numpy as np

    profile = CostProfile(full_bytes=np.array([10_000.0, 50_000.0]), not_modified_bytes=np.array([500.0, 500.0]))
    cost = expected_cost(BillingModel.BANDWIDTH, profile, p_unchanged=np.array([0.5, 0.9]), validators_trusted=True)
    assert cost.tolist() == [pytest.approx(5_250), pytest.approx(5_450)]
    with pytest.raises(ValueError, match="failure_rate"):
        CostProfile(full_bytes=1.0, failure_rate=np.array([0.1, 1.5]))
