"""Reference revisit allocations with the true change rates, under a spend rate and per-host caps.

A page with change rate ``lam`` visited every ``1/f`` seconds is fresh a share
``F(lam, f) = (f / lam) (1 - exp(-lam / f))`` of the time (1 when ``lam`` = 0). The optimum
maximises ``sum w v F(lam, f)`` subject to ``sum w c f <= budget`` and, per host h,
``sum_{i in h} w f <= cap_h`` (``w``: the share of the scored window a page exists). Its KKT
conditions give ``v dF/df (lam, f) = mu c + nu_h`` on visited pages, with
``dF/df = (1 - (1 + x) e^-x) / lam`` at ``x = lam / f``; a page whose marginal value at f -> 0
(``v / lam``) does not exceed ``mu c + nu_h`` gets no visits. ``mu`` is found by bisection on
the budget and each ``nu_h`` by bisection on its host's cap (water-filling). Uniform gives every
page the same frequency and proportional a frequency proportional to ``lam``, each lowered on a
host to fit its cap, at the same spend.
"""

from __future__ import annotations

import numpy as np

__all__ = ["freshness", "marginal", "optimal_frequencies", "proportional_frequencies",
           "uniform_frequencies", "value_freshness"]

_X = np.logspace(-6, np.log10(700.0), 8000)
_PHI = -np.expm1(-_X) - _X * np.exp(-_X)  # 1 - (1 + x) e^-x, increasing from 0 to 1
_ITER = 60


def freshness(lam: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``F(lam, f)``: 1 where ``lam`` = 0, 0 where ``lam`` > 0 and ``f`` = 0."""
    lam, f = np.broadcast_arrays(np.asarray(lam, float), np.asarray(f, float))
    out = np.where(lam <= 0, 1.0, 0.0)
    live = (lam > 0) & (f > 0)
    x = lam[live] / f[live]
    out[live] = -np.expm1(-x) / x
    return out


def marginal(lam: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``dF/df`` (per unit of frequency): ``1 / lam`` at f = 0, 0 where ``lam`` = 0."""
    lam, f = np.broadcast_arrays(np.asarray(lam, float), np.asarray(f, float))
    out = np.zeros_like(lam)
    start = (lam > 0) & (f <= 0)
    out[start] = 1.0 / lam[start]
    live = (lam > 0) & (f > 0)
    x = np.minimum(lam[live] / f[live], 700.0)
    out[live] = (-np.expm1(-x) - x * np.exp(-x)) / lam[live]
    return out


def _x_for(y: np.ndarray) -> np.ndarray:
    """Solve ``1 - (1 + x) e^-x = y`` for ``0 < y < 1`` (table, then Newton steps)."""
    x = np.exp(np.interp(y, _PHI, np.log(_X)))
    small = y < _PHI[0]
    x[small] = np.sqrt(2 * y[small])  # phi(x) ~ x^2 / 2
    for _ in range(3):
        moderate = x < 30  # beyond, phi is 1 to double precision: nothing to polish
        xm = x[moderate]
        step = (-np.expm1(-xm) - xm * np.exp(-xm) - y[moderate]) / (xm * np.exp(-xm))
        x[moderate] = np.clip(xm - step, xm / 2, xm * 2)
    return x


def _frequencies(mu: float, nu: np.ndarray, value: np.ndarray, lam: np.ndarray,
                 cost: np.ndarray, host: np.ndarray) -> np.ndarray:
    f = np.zeros_like(lam)
    live = (lam > 0) & (value > 0)
    y = (mu * cost[live] + nu[host[live]]) * lam[live] / value[live]
    visit = y < 1
    idx = np.flatnonzero(live)[visit]
    f[idx] = lam[idx] / _x_for(y[visit])
    return f


def _load(f: np.ndarray, weight: np.ndarray, host: np.ndarray, hosts: int) -> np.ndarray:
    return np.bincount(host, weights=weight * f, minlength=hosts)


def _host_prices(mu: float, value: np.ndarray, lam: np.ndarray, cost: np.ndarray,
                 host: np.ndarray, caps: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Per-host multipliers ``nu`` making every host fit its cap at budget price ``mu``."""
    hosts = len(caps)
    nu = np.zeros(hosts)
    over = _load(_frequencies(mu, nu, value, lam, cost, host), weight, host, hosts) > caps
    if not over.any():
        return nu
    live = (lam > 0) & (value > 0)
    top = np.zeros(hosts)
    np.maximum.at(top, host[live], value[live] / lam[live])
    lo, hi = np.zeros(hosts), np.where(over, top, 0.0)
    for _ in range(_ITER):
        mid = np.where(over, (lo + hi) / 2, 0.0)
        too_much = _load(_frequencies(mu, mid, value, lam, cost, host), weight, host, hosts) > caps
        lo = np.where(over & too_much, mid, lo)
        hi = np.where(over & ~too_much, mid, hi)
    return hi  # the feasible side


def optimal_frequencies(value: np.ndarray, lam: np.ndarray, cost: np.ndarray, budget: float,
                        host: np.ndarray | None = None, caps: np.ndarray | None = None,
                        weight: np.ndarray | None = None) -> np.ndarray:
    """Visit frequencies (per second) maximising value-weighted freshness at spend rate
    ``budget`` (cost units per second) within per-host ``caps`` (visits per second; host ids
    index ``caps``; none: no caps)."""
    value, lam, cost = (np.asarray(a, float) for a in (value, lam, cost))
    host, caps, weight = _defaults(len(lam), host, caps, weight)
    live = (lam > 0) & (value > 0)
    if not live.any() or budget <= 0:
        return np.zeros_like(lam)
    mu_hi = float(np.max(value[live] / (lam[live] * cost[live])))
    mu_lo = mu_hi * 1e-15

    def spend(mu: float) -> tuple[float, np.ndarray]:
        f = _frequencies(mu, _host_prices(mu, value, lam, cost, host, caps, weight),
                         value, lam, cost, host)
        return float(np.sum(weight * cost * f)), f

    total, f = spend(mu_lo)
    if total <= budget:
        return f  # the hosts cannot take the budget: every cap binds
    lo, hi = np.log(mu_lo), np.log(mu_hi)
    for _ in range(_ITER):
        mid = (lo + hi) / 2
        if spend(float(np.exp(mid)))[0] > budget:
            lo = mid
        else:
            hi = mid
    return spend(float(np.exp(hi)))[1]


def _defaults(n: int, host: np.ndarray | None, caps: np.ndarray | None,
              weight: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    host = np.zeros(n, dtype=np.int64) if host is None else np.asarray(host, dtype=np.int64)
    caps = np.full(int(host.max(initial=0)) + 1, np.inf) if caps is None else np.asarray(caps, float)
    weight = np.ones(n) if weight is None else np.asarray(weight, float)
    return host, caps, weight


def _level(shape: np.ndarray, cost: np.ndarray, budget: float, host: np.ndarray,
           caps: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Frequencies ``k * shape``, each host's scaled down to its cap, with k set by the budget."""
    hosts = len(caps)
    demand = np.bincount(host, weights=weight * shape, minlength=hosts)
    with np.errstate(divide="ignore", invalid="ignore"):
        host_k = np.where(demand > 0, caps / demand, np.inf)  # k at which each host saturates

    def freq(k: float) -> np.ndarray:
        return shape * np.minimum(k, host_k[host])

    unit = float(np.sum(weight * cost * shape))
    if unit <= 0 or budget <= 0:
        return np.zeros_like(shape)
    finite = host_k[np.isfinite(host_k)]
    k_max = max(budget / unit, float(finite.max()) if finite.size else 0.0) * 2
    if np.sum(weight * cost * freq(k_max)) <= budget:
        return freq(k_max)
    lo, hi = 0.0, k_max
    for _ in range(_ITER):
        mid = (lo + hi) / 2
        if np.sum(weight * cost * freq(mid)) > budget:
            hi = mid
        else:
            lo = mid
    return freq(lo)


def uniform_frequencies(cost: np.ndarray, budget: float, host: np.ndarray | None = None,
                        caps: np.ndarray | None = None, weight: np.ndarray | None = None,
                        ) -> np.ndarray:
    """The same frequency for every page (lowered on a host to fit its cap), spending ``budget``."""
    cost = np.asarray(cost, float)
    host, caps, weight = _defaults(len(cost), host, caps, weight)
    return _level(np.ones_like(cost), cost, budget, host, caps, weight)


def proportional_frequencies(lam: np.ndarray, cost: np.ndarray, budget: float,
                             host: np.ndarray | None = None, caps: np.ndarray | None = None,
                             weight: np.ndarray | None = None) -> np.ndarray:
    """Frequencies proportional to ``lam`` (lowered on a host to fit its cap), spending ``budget``."""
    lam, cost = np.asarray(lam, float), np.asarray(cost, float)
    host, caps, weight = _defaults(len(lam), host, caps, weight)
    return _level(lam, cost, budget, host, caps, weight)


def value_freshness(value: np.ndarray, lam: np.ndarray, f: np.ndarray,
                    weight: np.ndarray | None = None) -> float:
    """``sum w v F / sum w v``: the time-averaged value-weighted freshness of an allocation."""
    value = np.asarray(value, float)
    weight = np.ones_like(value) if weight is None else np.asarray(weight, float)
    total = float(np.sum(weight * value))
    return float(np.sum(weight * value * freshness(lam, f))) / total if total > 0 else 0.0
