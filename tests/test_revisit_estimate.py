from __future__ import annotations

import numpy as np
import pytest

from webcrawl.revisit import (
    EffectiveData, GammaPrior, HistoryTable, PageHistory, censored_mle, cho_garcia_molina,
    effective_data, estimate_rates, fit_group_priors, naive_rate, posterior_mean, posterior_mean_exact,
)

DAY = 86400.0


def simulate(rates: np.ndarray, visits: int, rng: np.random.Generator, spread: float = 0.5) -> HistoryTable:
    """Visits every ~day (log-uniform jitter of +-``spread`` in log2), censored outcomes."""
    table = HistoryTable(len(rates))
    for _ in range(visits):
        t = DAY * 2.0 ** rng.uniform(-spread, spread, len(rates))
        table.observe(np.arange(len(rates)), t, rng.random(len(rates)) < -np.expm1(-rates * t))
    return table


def test_censored_mle_recovers_rate_where_naive_is_biased() -> None:
    rng = np.random.default_rng(1)
    for per_day in (0.3, 1.0, 2.0):
        rates = np.full(400, per_day / DAY)
        table = simulate(rates, 200, rng)
        mle = np.median(censored_mle(table)) * DAY
        naive = np.median(naive_rate(table)) * DAY
        assert mle == pytest.approx(per_day, rel=0.08)
        if per_day >= 1.0:
            assert naive < 0.7 * per_day  # changes faster than visits look slower


@pytest.mark.parametrize(("n", "x"), [(10, 0), (10, 3), (10, 10), (50, 17), (3, 3), (200, 199)])
def test_regular_intervals_match_cho_garcia_molina(n: int, x: int) -> None:
    page = PageHistory()
    for i in range(n):
        page.observe(DAY, i < x)
    expected = float(cho_garcia_molina(n, x, DAY))
    assert float(censored_mle(page)[0]) == pytest.approx(expected, rel=1e-9, abs=1e-18)
    plain = float(censored_mle(page, bias_reduced=False)[0])
    if x < n:
        assert plain == pytest.approx(-np.log((n - x) / n) / DAY, rel=1e-9, abs=1e-18)
    else:
        assert plain == np.inf  # changed at every visit: the plain MLE diverges


def test_edge_cases() -> None:
    assert np.isnan(censored_mle(PageHistory())[0])
    never = PageHistory()
    for _ in range(5):
        never.observe(DAY, False)
    assert censored_mle(never)[0] == 0.0
    data = effective_data(never)
    assert (data.events[0], data.exposure[0]) == (0.0, 5 * DAY)  # exactly Poisson: 0 in 5 days
    empty = effective_data(PageHistory())
    assert (empty.events[0], empty.exposure[0]) == (0.0, 0.0)


def test_exact_change_times_are_poisson_data() -> None:
    page = PageHistory()
    page.observe(DAY, True, change_age=0.25 * DAY)
    page.observe(DAY, True, change_age=0.5 * DAY)
    page.observe(DAY, False)
    assert float(censored_mle(page)[0]) == pytest.approx(2 / (1.75 * DAY))
    data = effective_data(page)
    assert data.events[0] == pytest.approx(2.0) and data.exposure[0] == pytest.approx(1.75 * DAY)


def test_exact_change_times_estimate_fast_pages_that_censoring_cannot() -> None:
    rng = np.random.default_rng(5)
    rate = 6 / DAY  # changes every 4 hours, visited daily: nearly every visit sees a change
    censored, exact = PageHistory(), PageHistory()
    for _ in range(60):
        changed = rng.random() < -np.expm1(-rate * DAY)
        age = -np.log1p(rng.random() * np.expm1(-rate * DAY)) / rate
        censored.observe(DAY, changed)
        exact.observe(DAY, changed, change_age=age if changed else None)
    assert float(censored_mle(censored)[0]) < 0.8 * rate
    assert float(censored_mle(exact)[0]) == pytest.approx(rate, rel=0.25)


@pytest.mark.parametrize(("x", "n"), [(0, 4), (2, 4), (4, 4), (5, 20), (19, 20), (60, 200)])
def test_poisson_approximation_close_to_exact_posterior(x: int, n: int) -> None:
    prior = GammaPrior.from_mean(1 / (3 * DAY), shape=0.5)
    page = PageHistory()
    for i in range(n):
        page.observe(DAY * (1.0 if i % 2 else 1.3), i < x)
    approx = float(estimate_rates(page, prior.shape, prior.rate)[0])
    assert approx == pytest.approx(posterior_mean_exact(page, prior.shape, prior.rate), rel=0.05)


def test_shrinkage_pulls_short_histories_toward_the_group() -> None:
    prior = GammaPrior.from_mean(1 / (10 * DAY), shape=2.0)
    short, long = PageHistory(), PageHistory()
    for i in range(3):
        short.observe(DAY, True)
    for i in range(300):
        long.observe(DAY, True)
    assert float(estimate_rates(PageHistory(), prior.shape, prior.rate)[0]) == pytest.approx(prior.mean)
    s = float(estimate_rates(short, prior.shape, prior.rate)[0])
    mle = float(censored_mle(short)[0])
    assert prior.mean < s < mle  # between the group and the page's own extreme estimate
    lg = float(estimate_rates(long, prior.shape, prior.rate)[0])
    assert lg > s  # more evidence: more weight on the page's own data


def test_empirical_bayes_recovers_gamma_prior_and_beats_the_mle() -> None:
    rng = np.random.default_rng(7)
    shape, mean = 1.5, 1 / (4 * DAY)
    true = rng.gamma(shape, mean / shape, 3000)
    table = simulate(true, 8, rng)  # eight visits each: too few for a good MLE
    data = effective_data(table)
    priors = fit_group_priors(np.zeros(3000, dtype=np.intp), data, GammaPrior.from_mean(1 / DAY))
    assert priors.fitted[0]
    assert priors.shape[0] / priors.rate[0] == pytest.approx(mean, rel=0.15)
    assert 0.5 * shape < priors.shape[0] < 2 * shape
    post = posterior_mean(data.events, data.exposure, priors.shape[0], priors.rate[0])
    mse_post = np.mean((post - true) ** 2)
    mse_mle = np.mean((censored_mle(table) - true) ** 2)
    assert mse_post < 0.8 * mse_mle


def test_groups_without_history_use_the_configured_prior() -> None:
    fallback = GammaPrior.from_mean(1 / (7 * DAY), shape=0.5)
    events = np.array([1.0, 0.0, 0.0, 2.0])
    exposure = np.array([DAY, 3 * DAY, 0.0, 2 * DAY])
    data = EffectiveData(events, exposure, np.zeros(4))
    priors = fit_group_priors(np.array([0, 1, 2, 0]), data, fallback, ngroups=4, min_pages=5)
    assert not priors.fitted.any()
    # Group 3 has no pages at all, group 2 none observed: the configured prior itself.
    assert priors.prior(3) == fallback and priors.prior(2) == fallback
    # Group 1 saw no change in 3 days: the configured prior, moved toward slower rates.
    assert priors.shape[1] == fallback.shape and priors.rate[1] == pytest.approx(fallback.rate + 3 * DAY)
    with pytest.raises(ValueError, match="GammaPrior"):
        GammaPrior(0.0, 1.0)
