"""Change-rate estimation from a page's history (revisit-model.md section 2).

Three layers, each vectorised over pages:

1. :func:`censored_mle`: the maximum-likelihood rate of the page's own visits, which only tell
   *whether* the record changed in each interval. It solves the score equation

       sum_b n_b t_b / (exp(rate t_b) - 1) + k / rate = U + E (+ half an interval, see below)

   (``n_b`` changed intervals of length ``t_b``; ``k`` exact changes over ``E`` seconds since
   them; ``U`` unchanged seconds) by Newton steps on log(rate) inside a bisection bracket: the
   left side falls monotonically, so the bracket cannot lose the root. With ``bias_reduced`` (the
   default) the exposure gets half an extra unchanged interval of the page's mean length: for
   regular intervals ``I`` this is exactly Cho & Garcia-Molina's bias-reduced estimator
   ``-ln((n - X + 0.5) / (n + 0.5)) / I`` (without it, the plain MLE ``-ln((n - X) / n) / I``),
   and it keeps a page that changed at every visit finite.
2. :func:`effective_data`: the likelihood summarised as Poisson data, ``events`` changes over
   ``exposure`` seconds, matched at its maximum (same mode and curvature: ``events = mle**2 *
   information``, ``exposure = events / mle``; the plain MLE, or the bias-reduced one for a page
   that changed at every visit). Exact for pages that never changed (``exp(-rate U)`` *is*
   Poisson with no events) and for exact change times. The group priors are fitted on it.
3. :func:`estimate_rates`: the posterior mean under the page's Gamma prior. Where the page has
   seen at least :data:`INFORMATIVE_UNCHANGED` unchanged intervals, and at least one per
   :data:`SATURATED_RATIO` changed ones, the conjugate formula on the effective data,
   ``(shape + events) / (rate + exposure)``; elsewhere (its visits nearly always find a change)
   the likelihood is a flat-topped ramp that no Gamma matches (the conjugate formula then falls
   20-60% short), so the posterior is integrated numerically on a log grid of rates instead.
   tests/test_revisit_estimate.py compares both with the exact posterior.

Why the posterior mean rather than the MAP: with the dispersed priors that real groups fit
(shape < 1) the MAP of a page with no change seen is 0, which the planner would read as "never
changes"; the mean stays positive and shrinks as unchanged visits accumulate.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .history import HistoryTable, PageHistory
from .prior import EffectiveData, posterior_mean

Floats = NDArray[np.float64]
_LOG_LO, _LOG_HI = np.log(1e-12), np.log(10.0)  # rates between one per 30,000 years and 10/s
_ITERATIONS = 100  # at most; Newton usually stops within ten
#: Pages with fewer unchanged intervals than this (and some censored change) get the numerical
#: posterior rather than the conjugate approximation.
INFORMATIVE_UNCHANGED = 6
#: ... or fewer than one unchanged interval per this many changed ones: the likelihood is then too
#: skewed for a Gamma, which goes wrong when the group's prior disagrees with the page.
SATURATED_RATIO = 3
_GRID = np.exp(np.linspace(np.log(1e-10), np.log(1e-1), 128))  # 18% steps: these posteriors are wide and smooth


def _columns(history: PageHistory | HistoryTable) -> HistoryTable:
    return HistoryTable.from_pages([history]) if isinstance(history, PageHistory) else history


def _score_terms(rate: Floats, counts: Floats, mean_t: Floats) -> tuple[Floats, Floats]:
    """Per page: sum_b n_b t_b / (e^{rate t_b} - 1) and its information sum_b n_b t_b^2 e^x/(e^x-1)^2."""
    x = np.minimum(rate[:, None] * mean_t, 700.0)
    e = np.exp(-x)
    d = -np.expm1(-x)
    score = (counts * mean_t * e / d).sum(axis=1)
    info = (counts * mean_t * mean_t * e / (d * d)).sum(axis=1)
    return score, info


def _prepare(table: HistoryTable, bias_reduced: bool) -> tuple[Floats, Floats, Floats, Floats]:
    used = table.changed_counts.any(axis=0)  # skip bins no page uses
    counts = table.changed_counts[:, used].astype(float)
    mean_t = np.where(counts > 0, table.changed_seconds[:, used] / np.maximum(counts, 1), 1.0)
    k = table.exact_changes.astype(float)
    exposure = table.unchanged_seconds + table.exact_seconds
    if bias_reduced:
        # Half an unchanged interval of the page's mean censored length, where censored changes
        # exist (without them the likelihood is already Poisson and needs no correction).
        censored = table.visits - table.exact_changes
        censored_seconds = table.unchanged_seconds + table.changed_seconds.sum(axis=1)
        half = 0.5 * censored_seconds / np.maximum(censored, 1)
        exposure = exposure + np.where(counts.sum(axis=1) > 0, half, 0.0)
    return counts, mean_t, k, exposure


def censored_mle(history: PageHistory | HistoryTable, *, bias_reduced: bool = True) -> Floats:
    """Maximum-likelihood change rate of each page (changes per second).

    0 where no change was seen; NaN where nothing was observed; ``inf`` for a page that changed at
    every visit when ``bias_reduced`` is False (its likelihood keeps rising with the rate).
    """
    table = _columns(history)
    counts, mean_t, k, exposure = _prepare(table, bias_reduced)
    any_change = (counts.sum(axis=1) + k) > 0
    solvable = any_change & (exposure > 0)
    out = np.where(any_change, np.inf, 0.0)
    if solvable.any():
        rows = np.flatnonzero(solvable)
        out[rows] = _solve(counts[rows], mean_t[rows], k[rows], exposure[rows])
    return np.where(table.visits > 0, out, np.nan)


def _solve(counts: Floats, mean_t: Floats, k: Floats, exposure: Floats) -> Floats:
    """Root of score(rate) = exposure, per row: Newton steps on log(rate) kept inside a bisection
    bracket, so it converges fast where the score is smooth and cannot diverge where it is not.
    Rows leave the loop as they converge (most take a handful of steps)."""
    lo = np.full(len(k), _LOG_LO)
    hi = np.full(len(k), _LOG_HI)
    # Start from changes / exposure, the MLE if every change had been seen.
    u = np.clip(np.log((counts.sum(axis=1) + k) / exposure), _LOG_LO + 1, _LOG_HI - 1)
    act = np.arange(len(k))
    for _ in range(_ITERATIONS):
        ua = u[act]
        rate = np.exp(ua)
        score, info = _score_terms(rate, counts[act], mean_t[act])
        g = score + k[act] / rate - exposure[act]  # falls as the rate rises
        lo[act] = np.where(g > 0, ua, lo[act])
        hi[act] = np.where(g > 0, hi[act], ua)
        newton = ua + g / (rate * (info + k[act] / (rate * rate)))  # u - g / (dg/du)
        inside = (newton >= lo[act]) & (newton <= hi[act])
        nxt = np.where(inside, newton, 0.5 * (lo[act] + hi[act]))
        u[act] = nxt
        act = act[np.abs(nxt - ua) >= 1e-12]
        if not len(act):
            break
    return np.exp(u)


def effective_data(history: PageHistory | HistoryTable) -> EffectiveData:
    """Summarise each page's likelihood as ``events`` changes over ``exposure`` seconds."""
    table = _columns(history)
    # Match the likelihood itself (plain MLE); only where that is infinite (a change at every
    # visit) fall back to the bias-reduced mode, the one finite summary such a page has.
    mode = censored_mle(table, bias_reduced=False)
    endless = np.flatnonzero(np.isinf(mode))
    if len(endless):
        mode[endless] = censored_mle(table.take(endless))
    counts, mean_t, k, _ = _prepare(table, bias_reduced=False)
    changed = np.isfinite(mode) & (mode > 0)
    rate = np.where(changed, mode, 1.0)
    _, info = _score_terms(rate, counts, mean_t)
    events = np.where(changed, rate * rate * info + k, 0.0)
    # No change seen: the likelihood exp(-rate * U) is already Poisson with 0 events over U.
    span = np.where(changed, events / rate, table.unchanged_seconds)
    return EffectiveData(events=events, exposure=np.where(table.visits > 0, span, 0.0), mle=mode)


def _grid_posterior_mean(table: HistoryTable, shape: Floats, rate: Floats, grid: Floats = _GRID) -> Floats:
    """Posterior mean by summation over a log grid of rates (exact censored likelihood)."""
    counts, mean_t, k, _ = _prepare(table, bias_reduced=False)
    exposure = table.unchanged_seconds + table.exact_seconds
    log_grid = np.log(grid)
    loglik = np.zeros((len(table), len(grid)))
    for b in range(counts.shape[1]):  # one bin at a time keeps memory at pages x grid
        x = np.maximum(mean_t[:, b, None] * grid[None, :], 1e-300)
        loglik += counts[:, b, None] * np.log(-np.expm1(-x))
    # Prior density x Jacobian of d(log rate): rate^(shape - 1) * rate = rate^shape.
    logpost = loglik + (shape + k)[:, None] * log_grid - (rate + exposure)[:, None] * grid
    w = np.exp(logpost - logpost.max(axis=1, keepdims=True))
    return (w * grid).sum(axis=1) / w.sum(axis=1)


def estimate_rates(
    history: PageHistory | HistoryTable, shape: ArrayLike, rate: ArrayLike, data: EffectiveData | None = None
) -> Floats:
    """Posterior mean change rate of each page under its Gamma prior (``shape``/``rate`` scalars or
    per-page arrays). ``data``: the pages' :func:`effective_data` if already computed (it only
    changes when the history does, so a caller refitting priors can keep it)."""
    table = _columns(history)
    n = len(table)
    data = effective_data(table) if data is None else data
    shape_a = np.broadcast_to(np.asarray(shape, dtype=float), (n,))
    rate_a = np.broadcast_to(np.asarray(rate, dtype=float), (n,))
    out = posterior_mean(data.events, data.exposure, shape_a, rate_a)
    unchanged = table.visits - table.changes
    saturated = ((unchanged < INFORMATIVE_UNCHANGED) | (unchanged * SATURATED_RATIO < table.changes)) & (
        table.changes > table.exact_changes)
    if saturated.any():
        rows = np.flatnonzero(saturated)
        out[rows] = _grid_posterior_mean(table.take(rows), shape_a[rows], rate_a[rows])
    return out


def posterior_mean_exact(page: PageHistory, shape: float, rate: float, points: int = 4000) -> float:
    """The posterior mean by fine numerical integration (slow; for checking the approximations)."""
    grid = np.exp(np.linspace(_LOG_LO, _LOG_HI, points))
    table = _columns(page)
    return float(_grid_posterior_mean(table, np.array([shape]), np.array([rate]), grid)[0])


def cho_garcia_molina(visits: ArrayLike, changes: ArrayLike, interval: ArrayLike) -> Floats:
    """Cho & Garcia-Molina's bias-reduced estimator for regular intervals (ACM TOIT 2003)."""
    n, x = np.asarray(visits, dtype=float), np.asarray(changes, dtype=float)
    return -np.log((n - x + 0.5) / (n + 0.5)) / np.asarray(interval, dtype=float)


def naive_rate(history: PageHistory | HistoryTable) -> Floats:
    """Changes seen / seconds observed: biased low when visits are sparse. For comparison only."""
    table = _columns(history)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(table.seconds > 0, table.changes / table.seconds, np.nan)
