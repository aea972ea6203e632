"""Gamma priors on change rates, fitted per group by empirical Bayes (revisit-model.md section 2).

A group is a site + page type. Its pages' rates are modelled as draws from Gamma(shape, rate):
``shape`` pseudo-changes seen over ``rate`` pseudo-seconds. A page's own history then pulls its
estimate away from the group's mean as evidence accumulates (see estimate.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

Floats = NDArray[np.float64]


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
    """Each page's likelihood summarised as Poisson data: ``events`` changes over ``exposure``
    seconds (see :func:`webcrawl.revisit.effective_data`)."""

    events: Floats
    exposure: Floats
    #: where the match was made: the plain censored MLE, or the bias-reduced one for pages that
    #: changed at every visit (0 for pages with no change seen, NaN with no visits)
    mle: Floats


@dataclass(frozen=True)
class GroupPriors:
    """Fitted Gamma priors, one per group id 0..n-1 (arrays indexable by a page's group)."""

    shape: Floats
    rate: Floats
    fitted: NDArray[np.bool_]  #: False where the group fell back to the configured prior

    def prior(self, group: int) -> GammaPrior:
        return GammaPrior(float(self.shape[group]), float(self.rate[group]))


def posterior_mean(events: ArrayLike, exposure: ArrayLike, shape: ArrayLike, rate: ArrayLike) -> Floats:
    """Posterior mean rate of Poisson data under a Gamma(shape, rate) prior:
    (shape + events) / (rate + exposure). Arguments broadcast (scalars of one prior, or per-page
    arrays such as ``priors.shape[group]``)."""
    return (np.asarray(shape) + np.asarray(events)) / (np.asarray(rate) + np.asarray(exposure))


def fit_group_priors(
    group: ArrayLike, data: EffectiveData, fallback: GammaPrior, *, ngroups: int | None = None,
    min_pages: int = 5, max_shape: float = 20.0, min_shape: float = 0.05,
) -> GroupPriors:
    """Empirical-Bayes Gamma prior per group, by the method of moments on the pages' effective data.

    With per-page ``events`` k_i over ``exposure`` T_i and rates r_i = k_i / T_i, the group mean is
    m = sum k / sum T and the between-page variance of the true rates is

        v = max(sum T_i (r_i - m)^2 - (N - 1) m, 0) / (sum T - sum T^2 / sum T)

    (the Poisson noise ``m / T_i`` of each page's own rate subtracted; the expectation of the sum
    is v (sum T - sum T^2 / sum T) + (N - 1) m); shape = m^2 / v and rate = m / v, with shape
    clipped to [min_shape, max_shape] so no group prior outweighs ``max_shape`` changes of a page's
    own. Moments rather than the marginal likelihood: closed form for all groups at once (one
    ``bincount`` each), no optimiser to fail on groups of three pages. A group with fewer than
    ``min_pages`` observed pages, or with no change seen at all, gets ``fallback`` updated by its
    average page's data (shape + sum k / N, rate + sum T / N): a group whose pages never changed
    in a month moves its new pages toward "slow".
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
