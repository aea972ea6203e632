"""Reference allocations of a visit budget (revisit-model.md "the reference policy").

Given the true rates, values and costs of all pages and a budget ``spend_rate`` (cost per second),
each function returns every page's visit frequency (visits per second) with
``sum(cost * frequency) == spend_rate``:

- :func:`uniform_frequencies`: every page as often as every other;
- :func:`proportional_frequencies`: in proportion to its change rate;
- :func:`optimal_frequencies`: the Lagrangian optimum of ``sum(value * F(rate, f))``, with
  ``F = (f / rate)(1 - exp(-rate / f))`` the time-averaged freshness under visits every ``1/f``.

The optimum equalises the marginal value per cost ``value * dF/df / cost = mu`` over the pages it
visits. With ``x = rate / f``, ``dF/df = h(x) / rate`` where ``h(x) = 1 - (1 + x) exp(-x)`` rises
from 0 to 1, so each page's frequency is ``rate / h^-1(mu * cost * rate / value)``, and a page
whose ``value / (cost * rate)`` never reaches ``mu`` (it changes too fast to be worth chasing) gets
no visits. ``mu`` is found by bisection on the budget.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .gain import average_freshness

Floats = NDArray[np.float64]
_X = np.logspace(-7, 3, 40001)
_H = -np.expm1(-_X) - _X * np.exp(-_X)  # h(x), written to keep precision for small x


def _h_inverse(target: Floats) -> Floats:
    """x with h(x) = target, for target in (0, 1); inf for target >= 1."""
    small = target < _H[0]
    x = np.interp(target, _H, _X)
    x = np.where(small, np.sqrt(2.0 * np.maximum(target, 0.0)), x)  # h(x) ~ x^2 / 2 near 0
    return np.where(target >= _H[-1], np.inf, x)


def uniform_frequencies(cost: ArrayLike, spend_rate: float) -> Floats:
    c = np.asarray(cost, dtype=float)
    return np.full(c.shape, spend_rate / c.sum())


def proportional_frequencies(rate: ArrayLike, cost: ArrayLike, spend_rate: float) -> Floats:
    r, c = np.asarray(rate, dtype=float), np.asarray(cost, dtype=float)
    return r * (spend_rate / (c * r).sum())


def _frequencies_at(mu: float, rate: Floats, value: Floats, cost: Floats) -> Floats:
    target = mu * cost * rate / np.where(value > 0, value, np.nan)
    x = _h_inverse(np.nan_to_num(target, nan=np.inf))
    with np.errstate(divide="ignore"):
        f = np.where(np.isfinite(x) & (rate > 0), rate / x, 0.0)
    return f


def optimal_frequencies(
    rate: ArrayLike, value: ArrayLike, cost: ArrayLike, spend_rate: float, *, iterations: int = 100
) -> Floats:
    """The optimum's visit frequencies (visits per second; 0 = never revisit)."""
    r, v, c = (np.asarray(a, dtype=float) for a in (rate, value, cost))
    if spend_rate <= 0:
        return np.zeros_like(r)
    lo, hi = -80.0, 80.0  # bisection on ln(mu): spend falls as mu rises
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        spent = float((c * _frequencies_at(float(np.exp(mid)), r, v, c)).sum())
        lo, hi = (mid, hi) if spent > spend_rate else (lo, mid)
    return _frequencies_at(float(np.exp(hi)), r, v, c)


def value_weighted_freshness(rate: ArrayLike, value: ArrayLike, frequency: ArrayLike) -> float:
    """Expected ``sum(value * F) / sum(value)`` under periodic visits at ``frequency``."""
    f = np.asarray(frequency, dtype=float)
    with np.errstate(divide="ignore"):
        interval = np.where(f > 0, 1.0 / np.where(f > 0, f, 1.0), np.inf)
    fresh = average_freshness(rate, interval)
    v = np.asarray(value, dtype=float)
    return float((v * fresh).sum() / v.sum())
