"""What a visit buys: freshness gain and the "events" objective (revisit-model.md sections 1 and 3).

Every function takes numpy arrays or floats (broadcast together) and returns the same shape.
Rates are changes per second, times are seconds. A page changes as a Poisson process with rate
``rate``; a copy is *fresh* while the live page has not changed since the copy was fetched.
"""

from __future__ import annotations

from enum import Enum

import numpy as np
from numpy.typing import ArrayLike, NDArray

Floats = NDArray[np.float64]


class Objective(str, Enum):
    """What a site wants from its revisits (chosen in the site config)."""

    #: Fraction of time the copy equals the live page (Cho & Garcia-Molina's freshness).
    FRESHNESS = "freshness"
    #: Number of changes caught: every price move, every stock-out counts on its own.
    EVENTS = "events"


def change_probability(rate: ArrayLike, since: ArrayLike) -> Floats:
    """P(the page changed in the ``since`` seconds after the last visit) = 1 - exp(-rate * since)."""
    rate, since = np.asarray(rate, dtype=float), np.asarray(since, dtype=float)
    return -np.expm1(-rate * since)


def freshness_gain(rate: ArrayLike, since: ArrayLike, interval: ArrayLike) -> Floats:
    """Expected fresh seconds bought by visiting now.

    ``gain = (1 - exp(-rate*since)) * (1 - exp(-rate*interval)) / rate``: the chance the copy is
    stale now, times the expected fresh time until the next visit ``interval`` seconds later
    (``interval`` itself when ``rate`` is 0, so a never-changing page gains 0). Non-negative,
    increasing in ``since``; for a fixed visit rate it peaks at pages changing about as often as
    they can be visited.
    """
    rate = np.asarray(rate, dtype=float)
    since, interval = np.asarray(since, dtype=float), np.asarray(interval, dtype=float)
    stale = -np.expm1(-rate * since)
    # (1 - exp(-r I)) / r tends to I as r -> 0; compute it without dividing by zero.
    safe = np.where(rate > 0, rate, 1.0)
    fresh_after = np.where(rate > 0, -np.expm1(-safe * interval) / safe, interval)
    return stale * fresh_after


def events_gain(rate: ArrayLike, since: ArrayLike) -> Floats:
    """Expected number of changes since the last visit (rate * since): the "events" objective.

    Unlike freshness, this grows without bound with the rate, so fast pages deserve more visits;
    a visit catches at most the latest state, so this is an upper bound on what it reveals.
    """
    return np.asarray(rate, dtype=float) * np.asarray(since, dtype=float)


def marginal_freshness_gain(rate: ArrayLike, since: ArrayLike) -> Floats:
    """Fresh seconds a visit adds to a page revisited periodically every ``since`` seconds.

    ``(1 - exp(-rate*t)) / rate - t * exp(-rate*t)``: the derivative of the page's fresh time per
    period with respect to its visit frequency (revisit-model.md, reference policy), so a greedy
    planner that takes pages while ``value * this / cost`` clears a budget-set cutoff visits each
    page at exactly the Lagrangian optimum's frequency, the cutoff playing the multiplier. It
    equals :func:`freshness_gain` with ``interval = ln((e^x - 1) / x) / rate`` (x = rate * t):
    about ``t / 2`` for slow pages, ``t`` for fast ones. :func:`freshness_gain` with ``interval =
    since`` prices each visit as if it were an extra one, and so overrates slow pages up to 2x.
    """
    rate, since = np.asarray(rate, dtype=float), np.asarray(since, dtype=float)
    x = rate * since
    small = x < 1e-3
    xs = np.where(small, x, 0.0)
    # 1 - (1 + x) e^-x cancels badly for small x; its series there is x^2/2 - x^3/3 + x^4/8.
    h = np.where(small, xs * xs * (0.5 - xs / 3 + xs * xs / 8), -np.expm1(-x) - x * np.exp(-x))
    safe = np.where(rate > 0, rate, 1.0)
    return np.where(rate > 0, h / safe, 0.0)


def gain(
    objective: Objective, rate: ArrayLike, since: ArrayLike, interval: ArrayLike | None = None
) -> Floats:
    """The gain of a visit under ``objective``.

    Freshness: :func:`freshness_gain` with the planned ``interval`` when one is given, else the
    steady-state :func:`marginal_freshness_gain` (what the cycle planner uses by default)."""
    if objective is Objective.EVENTS:
        return events_gain(rate, since)
    if interval is None:
        return marginal_freshness_gain(rate, since)
    return freshness_gain(rate, since, interval)


def average_freshness(rate: ArrayLike, interval: ArrayLike) -> Floats:
    """Time-averaged freshness F under visits every ``interval`` seconds.

    ``F = (1 - exp(-rate*interval)) / (rate*interval)`` (1 when rate*interval is 0, 0 when the
    page is never visited, i.e. ``interval`` is infinite and the rate positive).
    """
    x = np.asarray(rate, dtype=float) * np.asarray(interval, dtype=float)
    with np.errstate(invalid="ignore"):
        safe = np.where((x > 0) & np.isfinite(x), x, 1.0)
        out = np.where(x > 0, -np.expm1(-safe) / safe, 1.0)
    return np.where(np.isinf(x), 0.0, out)
