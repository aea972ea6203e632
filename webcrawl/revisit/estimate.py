"""Change-rate estimation from a page's history (revisit-model.md section 2).

Three layers, each vectorised over pages:

1. :func:`censored_mle`: the maximum-likelihood rate of the page's own visits, which only tell
   *whether* the record changed in each interval. It solves the score equation

       sum_b n_b t_b / (exp(rate t_b) - 1) + k / rate = U + E (+ half an interval, see below)

   (``n_b`` changed intervals of length ``t_b``; ``k`` exact changes over ``E`` seconds since
   them; ``U`` unchanged seconds) by bisection on log(rate): the left side falls monotonically, so
   bisection cannot miss. With ``bias_reduced`` (the default) the exposure gets half an extra
   unchanged interval of the page's mean length: for regular intervals ``I`` this is exactly Cho &
   Garcia-Molina's bias-reduced estimator ``-ln((n - X + 0.5) / (n + 0.5)) / I`` (without it, the
   plain MLE ``-ln((n - X) / n) / I``), and it keeps a page that changed at every visit finite.
2. :func:`effective_data`: the page's likelihood summarised as Poisson data, ``events`` changes
   over ``exposure`` seconds, matched to the censored likelihood at its maximum (same mode, same
   curvature: ``events = mle**2 * information``, ``exposure = events / mle``). Exact for pages
   that never changed (``exp(-rate U)`` *is* Poisson with no events) and for exact change times;
   for censored changes it shrinks ``events`` as the visits saturate (a page that changed at every
   visit has told us little), which is the right direction.
3. :func:`posterior_mean`: a Gamma(shape, rate) prior is conjugate to Poisson data, so the
   posterior mean is ``(shape + events) / (rate + exposure)``. The prior comes from the page's
   group (site + page type) by :func:`fit_group_priors` (empirical Bayes, method of moments), or a
   configured one for groups with too little history.

Why the Poisson approximation rather than an exact 1-D posterior: it is closed form, needs the
per-page likelihood summary only once per visit (priors can be refitted for all pages in O(n)),
and :func:`posterior_mean_exact` (numerical integration, kept for checking) agrees within a few
per cent on the cases the tests try. Why the posterior mean rather than the MAP: with the
dispersed priors that real groups fit (shape < 1) the MAP of a page with no changes seen is 0,
which the planner would read as "never changes".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .history import HistoryTable, PageHistory

Floats = NDArray[np.float64]
_LOG_LO, _LOG_HI = np.log(1e-12), np.log(10.0)  # rates between one per 30,000 years and 10/s
_ITERATIONS = 56


@dataclass(frozen=True)
class GammaPrior:
    """A Gamma prior on the change rate: ``shape`` pseudo-changes seen over ``rate`` seconds."""

    shape: float
    rate: float

    def __post_init__(self) -> None:
        if not (self.shape > 0 and self.rate > 0 and np.isfinite(self.shape) and np.isfinite(self.rate)):
            raise ValueError(f"GammaPrior({self.shape!r}, {self.rate!r}): shape and rate must be finite and > 0")

    @property
    def mean(self) -> float:
        return self.shape / self.rate

    @classmethod
    def from_mean(cls, mean_rate: float, shape: float = 0.5) -> GammaPrior:
        """A prior with this mean (changes per second); small ``shape`` = weak prior."""
        return cls(shape, shape / mean_rate)


@dataclass(frozen=True)
class EffectiveData:
    """Each page's likelihood as Poisson data (see the module docstring)."""

    events: Floats
    exposure: Floats
    mle: Floats  #: the bias-reduced censored MLE (0 for pages with no changes, NaN with no visits)


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
        censored = table.visits - table.exact_changes
        censored_seconds = table.unchanged_seconds + table.changed_seconds.sum(axis=1)
        exposure = exposure + np.where(censored > 0, 0.5 * censored_seconds / np.maximum(censored, 1), 0.0)
    return counts, mean_t, k, exposure


def censored_mle(history: PageHistory | HistoryTable, *, bias_reduced: bool = True) -> Floats:
    """Maximum-likelihood change rate of each page (changes per second).

    0 where no change was seen; NaN where nothing was observed; ``inf`` for a page that changed at
    every visit when ``bias_reduced`` is False (its likelihood keeps rising with the rate).
    """
    table = _columns(history)
    counts, mean_t, k, exposure = _prepare(table, bias_reduced)
    lo = np.full(len(table), _LOG_LO)
    hi = np.full(len(table), _LOG_HI)
    for _ in range(_ITERATIONS):
        mid = 0.5 * (lo + hi)
        rate = np.exp(mid)
        score, _ = _score_terms(rate, counts, mean_t)
        rising = score + k / rate > exposure
        lo = np.where(rising, mid, lo)
        hi = np.where(rising, hi, mid)
    out = np.exp(0.5 * (lo + hi))
    any_change = (counts.sum(axis=1) + k) > 0
    out = np.where(any_change, out, 0.0)
    out = np.where(any_change & (exposure <= 0), np.inf, out)
    return np.where(table.visits > 0, out, np.nan)


def effective_data(history: PageHistory | HistoryTable) -> EffectiveData:
    """Summarise each page's likelihood as ``events`` changes over ``exposure`` seconds."""
    table = _columns(history)
    mle = censored_mle(table)
    counts, mean_t, k, exposure = _prepare(table, bias_reduced=True)
    changed = np.isfinite(mle) & (mle > 0)
    rate = np.where(changed, mle, 1.0)
    _, info = _score_terms(rate, counts, mean_t)
    events = np.where(changed, rate * rate * info + k, 0.0)
    # No change seen: the likelihood exp(-rate * U) is already Poisson with 0 events over U.
    span = np.where(changed, events / rate, table.unchanged_seconds)
    return EffectiveData(events=events, exposure=np.where(table.visits > 0, span, 0.0), mle=mle)


def posterior_mean(events: ArrayLike, exposure: ArrayLike, shape: ArrayLike, rate: ArrayLike) -> Floats:
    """Posterior mean change rate under a Gamma(shape, rate) prior: (shape + events) / (rate + exposure).

    ``shape``/``rate`` broadcast: pass scalars of one prior, or per-page arrays (``prior[group]``).
    """
    return (np.asarray(shape) + np.asarray(events)) / (np.asarray(rate) + np.asarray(exposure))


@dataclass(frozen=True)
class GroupPriors:
    """Fitted Gamma priors, one per group id 0..n-1 (arrays indexable by a page's group)."""

    shape: Floats
    rate: Floats
    fitted: NDArray[np.bool_]  #: False where the group fell back to the configured prior

    def prior(self, group: int) -> GammaPrior:
        return GammaPrior(float(self.shape[group]), float(self.rate[group]))


def fit_group_priors(
    group: ArrayLike, data: EffectiveData, fallback: GammaPrior, *, ngroups: int | None = None,
    min_pages: int = 5, max_shape: float = 20.0, min_shape: float = 0.05,
) -> GroupPriors:
    """Empirical-Bayes Gamma prior per group, by the method of moments on the pages' effective data.

    With per-page ``events`` k_i over ``exposure`` T_i and rates r_i = k_i / T_i, the group mean is
    m = sum k / sum T and the between-page variance of the true rates is

        v = max(sum T_i (r_i - m)^2 - (N - 1) m, 0) / (sum T - sum T^2 / sum T)

    (the Poisson noise ``m / T_i`` of each page's own rate subtracted); shape = m^2 / v and rate =
    m / v, with shape clipped to [min_shape, max_shape] so no group prior outweighs ``max_shape``
    changes of a page's own. Moments rather than the marginal likelihood: closed form over all
    groups at once, and robust to the heavy tails the Gamma shape does not capture. A group with
    fewer than ``min_pages`` observed pages, or with no change seen at all, gets ``fallback``
    updated by its average page's data (shape + sum k / N, rate + sum T / N).
    """
    g = np.asarray(group, dtype=np.intp)
    n = int(ngroups if ngroups is not None else (g.max() + 1 if g.size else 0))
    seen = data.exposure > 0
    k, t, gs = data.events[seen], data.exposure[seen], g[seen]
    count = np.bincount(gs, minlength=n).astype(float)
    sk, st = np.bincount(gs, k, minlength=n), np.bincount(gs, t, minlength=n)
    st2 = np.bincount(gs, t * t, minlength=n)
    m = sk / np.maximum(st, 1e-300)
    s = np.bincount(gs, t * (k / t - m[gs]) ** 2, minlength=n)
    denom = st - st2 / np.maximum(st, 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.maximum(s - (count - 1) * m, 0.0) / denom
        shape = np.clip(np.where(v > 0, m * m / v, max_shape), min_shape, max_shape)
    fitted = (count >= min_pages) & (sk > 0) & (denom > 0) & np.isfinite(shape)
    safe_m = np.where(fitted, m, 1.0)
    pooled_shape = fallback.shape + sk / np.maximum(count, 1)
    pooled_rate = fallback.rate + st / np.maximum(count, 1)
    return GroupPriors(
        shape=np.where(fitted, shape, pooled_shape),
        rate=np.where(fitted, shape / safe_m, pooled_rate),
        fitted=fitted,
    )


def estimate_rates(history: PageHistory | HistoryTable, shape: ArrayLike, rate: ArrayLike) -> Floats:
    """Posterior mean rate of each page under its prior (shape/rate scalars or per-page arrays)."""
    data = effective_data(history)
    return posterior_mean(data.events, data.exposure, shape, rate)


def posterior_mean_exact(page: PageHistory, prior: GammaPrior, points: int = 4000) -> float:
    """The posterior mean by numerical integration on a log grid (slow; for checking the
    Poisson approximation of :func:`effective_data`)."""
    table = _columns(page)
    counts, mean_t, k, _ = _prepare(table, bias_reduced=False)
    exposure = page.unchanged_seconds + page.exact_seconds
    rates = np.exp(np.linspace(_LOG_LO, _LOG_HI, points))
    x = np.minimum(rates[:, None] * mean_t[0], 700.0)
    loglik = (counts[0] * np.log(-np.expm1(-np.maximum(x, 1e-300)))).sum(axis=1)
    logpost = loglik + (prior.shape + k[0]) * np.log(rates) - (prior.rate + exposure) * rates
    w = np.exp(logpost - logpost.max())  # density * rate: the d(log rate) Jacobian
    return float((w * rates).sum() / w.sum())


def cho_garcia_molina(visits: ArrayLike, changes: ArrayLike, interval: ArrayLike) -> Floats:
    """Cho & Garcia-Molina's bias-reduced estimator for regular intervals (ACM TOIT 2003)."""
    n, x = np.asarray(visits, dtype=float), np.asarray(changes, dtype=float)
    return -np.log((n - x + 0.5) / (n + 0.5)) / np.asarray(interval, dtype=float)


def naive_rate(history: PageHistory | HistoryTable) -> Floats:
    """Changes seen / seconds observed: biased low when visits are sparse. For comparison only."""
    table = _columns(history)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(table.seconds > 0, table.changes / table.seconds, np.nan)
