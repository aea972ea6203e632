from __future__ import annotations

import numpy as np
import pytest

from webcrawl.revisit import CycleLedger


def test_admits_within_budget_and_books_actual_cost() -> None:
    ledger = CycleLedger(budget=10.0)
    assert ledger.admit(4.0) and ledger.admit(4.0)
    assert not ledger.admit(4.0) and ledger.refused == 1  # 12 > 10: waits for the next cycle
    assert ledger.remaining == pytest.approx(2.0)
    ledger.land(4.0, 3.0)  # cheaper than expected (a 304)
    assert ledger.admit(3.0)
    assert ledger.committed == pytest.approx(3.0 + 4.0 + 3.0)
    with pytest.raises(ValueError):
        CycleLedger(budget=-1.0)


def test_overshoot_is_bounded_by_what_was_in_flight() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        ledger = CycleLedger(budget=100.0)
        flying: list[float] = []
        worst_excess = 0.0
        for _ in range(200):
            expected = float(rng.uniform(1, 10))
            if ledger.admit(expected):
                flying.append(expected)
            if flying and rng.random() < 0.5:
                e = flying.pop(int(rng.integers(len(flying))))
                actual = e * float(rng.uniform(0.5, 1.5))
                worst_excess += max(actual - e, 0.0)
                ledger.land(e, actual)
        for e in flying:
            actual = e * 1.5
            worst_excess += actual - e
            ledger.land(e, actual)
        assert ledger.overshoot <= worst_excess + 1e-9
