"""Revisit rates within a budget rate and each host's capacity (revisit-model.md section 5):
pure, vectorised, no I/O.

:func:`allocate_rates` solves, for every known page, its visit frequency ``f`` (visits per second)
maximising ``sum(value * F)`` subject to ``sum(cost * f) <= budget_rate`` and, for every host,
``sum of its pages' f <= capacity`` (1 / the host's delay, Crawl-delay or backoff): water-filling
with one multiplier for the budget (``mu``) and one per host (``nu``). Each page's frequency is
where its marginal value per cost meets the multipliers,

    value * dF/df = mu * cost + nu_host,

which for the freshness objective, ``F = (f / rate)(1 - exp(-rate / f))``, gives
``f = rate / h^-1((mu * cost + nu) * rate / value)`` with ``h(x) = 1 - (1 + x) exp(-x)``; a page
whose ``value / (rate * (mu * cost + nu))`` never reaches 1 gets no visits: it changes too fast to
be kept fresh at an affordable rate, or is worth too little (the optimum's rule, Cho &
Garcia-Molina, TODS 2003). For the events objective (changes caught, ``f (1 - exp(-rate / f))``
per second), ``f = rate / h^-1((mu * cost + nu) / value)``: fast pages get more visits.

Hosts are solved by a fixed point: ``mu`` by bisection for the budget with the hosts' ``nu``
fixed, then ``nu`` of every host over its capacity by a vectorised bisection with ``mu`` fixed,
a few rounds. Money never waits on a host that cannot take it: what a capped host cannot use
goes to the other hosts' pages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .gain import Objective

Floats = NDArray[np.float64]
Ints = NDArray[np.intp]

__all__ = ["Allocation", "allocate_rates", "expected_freshness", "frequencies"]

_X = np.logspace(-7, 3, 20001)
_H = -np.expm1(-_X) - _X * np.exp(-_X)  # h(x), kept precise for small x


def _h_inverse(target: Floats) -> Floats:
    """x with h(x) = target for target in (0, 1); inf where target >= 1 (or NaN)."""
    t = np.nan_to_num(target, nan=np.inf, posinf=np.inf)
    small = t < _H[0]
    x = np.interp(np.clip(t, _H[0], _H[-1]), _H, _X)
    x = np.where(small, np.sqrt(2.0 * np.maximum(t, 0.0)), x)  # h(x) ~ x^2 / 2 near 0
    return np.where(t >= _H[-1], np.inf, x)


def frequencies(price: Floats, rate: Floats, value: Floats, objective: Objective) -> Floats:
    """Each page's frequency where its marginal value meets ``price`` (= mu * cost + nu)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = rate if objective is Objective.FRESHNESS else np.ones_like(rate)
        target = np.where(value > 0, price * scale / value, np.inf)
        x = _h_inverse(target)
        f = np.where(np.isfinite(x) & (x > 0) & (rate > 0), rate / x, 0.0)
    return f


@dataclass(frozen=True)
class Allocation:
    """Visit frequencies (per second, one per page), the budget multiplier, the multiplier of each
    host (0 where the host's capacity does not bind), and the spend rate they add up to."""

    frequency: Floats
    mu: float
    nu: Floats
    spend_rate: float

    def intervals(self) -> Floats:
        """Seconds between visits (inf for pages that get none)."""
        with np.errstate(divide="ignore"):
            return np.where(self.frequency > 0, 1.0 / np.where(self.frequency > 0, self.frequency, 1.0), np.inf)


def allocate_rates(rate: Floats, value: Floats, cost: Floats, host: Ints, capacity: Floats,
                   budget_rate: float, *, objective: Objective = Objective.FRESHNESS,
                   rounds: int = 6, iterations: int = 48) -> Allocation:
    """Frequencies of every page (see the module docstring).

    ``rate``, ``value``, ``cost`` (> 0), ``host`` (index into ``capacity``) are per page;
    ``capacity`` is visits per second per host (inf: no limit). ``budget_rate`` is cost per
    second. The spend rate returned is at most ``budget_rate`` (less when every page that is
    worth a visit is already at its host's capacity).
    """
    rate, value, cost = (np.asarray(a, dtype=float) for a in (rate, value, cost))
    host = np.asarray(host, dtype=np.intp)
    capacity = np.asarray(capacity, dtype=float)
    nhosts = len(capacity)
    nu = np.zeros(nhosts)
    n = len(rate)
    if n == 0 or budget_rate <= 0:
        return Allocation(np.zeros(n), float("inf"), nu, 0.0)
    mu = 1.0
    for _ in range(rounds):
        mu = _solve_mu(rate, value, cost, nu[host], budget_rate, objective, iterations)
        f = frequencies(mu * cost + nu[host], rate, value, objective)
        load = np.bincount(host, weights=f, minlength=nhosts)
        over = load > capacity * (1 + 1e-9)
        binding = nu > 0
        if not over.any() and not (binding & (load < capacity * (1 - 1e-3))).any():
            break
        nu = _solve_nu(rate, value, cost, host, capacity, mu, nu, objective, iterations)
    f = frequencies(mu * cost + nu[host], rate, value, objective)
    return Allocation(f, float(mu), nu, float((cost * f).sum()))


def _solve_mu(rate: Floats, value: Floats, cost: Floats, nu: Floats, budget_rate: float,
              objective: Objective, iterations: int) -> float:
    """The budget multiplier (bisection on its log): spend falls as mu rises."""
    lo, hi = -60.0, 60.0
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        spent = float((cost * frequencies(np.exp(mid) * cost + nu, rate, value, objective)).sum())
        lo, hi = (mid, hi) if spent > budget_rate else (lo, mid)
    return float(np.exp(hi))


def _solve_nu(rate: Floats, value: Floats, cost: Floats, host: Ints, capacity: Floats, mu: float,
              nu: Floats, objective: Objective, iterations: int) -> Floats:
    """Each host's multiplier with ``mu`` fixed: 0 where the host's pages fit its capacity, else
    the value (bisected on a log scale, every host at once) that brings them down to it."""
    nhosts = len(capacity)
    free = frequencies(mu * cost, rate, value, objective)
    load = np.bincount(host, weights=free, minlength=nhosts)
    capped = load > capacity
    out = np.zeros(nhosts)
    if not capped.any():
        return out
    rows = np.flatnonzero(capped[host])
    r, v, c, h = rate[rows], value[rows], cost[rows], host[rows]
    # The price at which a host's pages fit lies between mu * min(cost) (no nu) and the price
    # that stops every page; bisect log(nu) per host over a wide bracket.
    lo = np.full(nhosts, -60.0)
    hi = np.full(nhosts, 60.0)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        f = frequencies(mu * c + np.exp(mid[h]), r, v, objective)
        host_load = np.bincount(h, weights=f, minlength=nhosts)
        too_much = host_load > capacity
        lo = np.where(capped & too_much, mid, lo)
        hi = np.where(capped & ~too_much, mid, hi)
    out[capped] = np.exp(hi[capped])
    return out


def expected_freshness(rate: Floats, frequency: Floats) -> Floats:
    """Time-averaged freshness of each page under periodic visits at ``frequency``."""
    rate, frequency = np.asarray(rate, dtype=float), np.asarray(frequency, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(frequency > 0, rate / np.where(frequency > 0, frequency, 1.0), np.inf)
        fresh = np.where(x > 0, -np.expm1(-x) / np.where(x > 0, x, 1.0), 1.0)
    return np.where(np.isinf(x) & (rate > 0), 0.0, np.where(np.isinf(x), 1.0, fresh))
