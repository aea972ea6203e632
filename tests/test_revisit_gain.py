from __future__ import annotations

import numpy as np
import pytest

from webcrawl.revisit import (
    Objective, average_freshness, change_probability, events_gain, freshness_gain, gain,
    marginal_freshness_gain,
)

DAY = 86400.0

# revisit-model.md section 3: t = I = 1 day, gain in days.
SANITY = [
    (15 * 60, 0.010), (3600, 0.042), (6 * 3600, 0.241), (DAY, 0.400),
    (7 * DAY, 0.124), (30 * DAY, 0.032), (365 * DAY, 0.003),
]


@pytest.mark.parametrize(("every", "expected"), SANITY)
def test_sanity_table(every: float, expected: float) -> None:
    assert round(float(freshness_gain(1 / every, DAY, DAY)) / DAY, 3) == expected


def test_sanity_table_vectorised() -> None:
    rates = np.array([1 / e for e, _ in SANITY])
    got = np.round(freshness_gain(rates, DAY, DAY) / DAY, 3)
    assert got.tolist() == [g for _, g in SANITY]


def test_zero_rate_gains_nothing_and_is_finite() -> None:
    assert freshness_gain(0.0, DAY, DAY) == 0.0
    assert freshness_gain(np.array([0.0, 1e-300]), DAY, DAY).tolist() == [0.0, pytest.approx(0.0)]


def test_gain_rises_with_time_since_visit_and_peaks_near_affordable_rate() -> None:
    since = np.array([0.0, 0.5 * DAY, DAY, 2 * DAY])
    g = freshness_gain(1 / DAY, since, DAY)
    assert g[0] == 0 and np.all(np.diff(g) > 0)
    rates = 1 / np.array([900, 3600, 6 * 3600, DAY, 7 * DAY])
    assert int(np.argmax(freshness_gain(rates, DAY, DAY))) == 3


def test_events_objective_favours_fast_pages() -> None:
    rates = 1 / np.array([900.0, DAY, 30 * DAY])
    e = gain(Objective.EVENTS, rates, DAY)
    assert e[0] == pytest.approx(96.0) and np.all(np.diff(e) < 0)
    assert events_gain(1 / DAY, 2 * DAY) == pytest.approx(2.0)
    # The freshness objective does the opposite for the fastest page.
    f = gain(Objective.FRESHNESS, rates, DAY)
    assert f[0] < f[1]


def test_default_gain_is_the_marginal_gain_of_a_periodic_schedule() -> None:
    rate = 1 / DAY
    t = np.array([1.0, 60.0, 3600.0, DAY, 10 * DAY, 1000 * DAY])
    got = gain(Objective.FRESHNESS, rate, t)
    assert np.allclose(got, marginal_freshness_gain(rate, t), rtol=1e-12)
    # d/df of the fresh time per period, by finite differences on F(rate, f) * period.
    f = 1 / t
    eps = 1e-6 * f

    def fresh_rate(freq: np.ndarray) -> np.ndarray:
        return average_freshness(rate, 1 / freq)

    derivative = (fresh_rate(f + eps) - fresh_rate(f - eps)) / (2 * eps)
    assert np.allclose(got[1:], derivative[1:], rtol=1e-4)
    # Equal to the section-3 gain at the interval ln((e^x - 1) / x) / rate.
    x = rate * t[:-1]
    interval = np.log(np.expm1(x) / x) / rate
    assert np.allclose(got[:-1], freshness_gain(rate, t[:-1], interval), rtol=1e-9)
    assert gain(Objective.FRESHNESS, 0.0, DAY) == 0.0
    assert gain(Objective.FRESHNESS, rate, DAY, 2 * DAY) == pytest.approx(freshness_gain(rate, DAY, 2 * DAY))


def test_average_freshness_and_change_probability() -> None:
    assert average_freshness(1 / DAY, DAY) == pytest.approx(1 - np.exp(-1))
    assert average_freshness(0.0, DAY) == 1.0
    assert average_freshness(1 / DAY, np.inf) == 0.0
    assert change_probability(1 / DAY, DAY) == pytest.approx(1 - np.exp(-1))
