"""Expected cost of a visit in a site's billing model (revisit-model.md section 4).

A *visit* is one page fetch that ends in an answer; the failed attempts it takes on the way are
part of its cost when the billing model charges for them. Costs are in the site's unit: bytes for
bandwidth billing, credits for a scraping API, requests for request-counted plans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np
from numpy.typing import ArrayLike, NDArray

Amount = float | NDArray[np.float64]  # a figure for one page, or one per page
_MAX_FAILURE_RATE = 0.99  # a host failing every attempt would make every visit infinitely dear


class BillingModel(str, Enum):
    #: Every byte through the gateway, headers included; failed transfers count for what they sent.
    BANDWIDTH = "bandwidth"
    #: A credit per successful response, rendered or not; failures are free.
    CREDITS = "credits"
    #: Every attempt counts once, whatever it returns.
    REQUESTS = "requests"


@dataclass(frozen=True)
class CostProfile:
    """Measured averages for a page or its page type (see :class:`RunningCost`)."""

    full_bytes: Amount  #: bytes on the wire of a full response: request + response headers + body
    not_modified_bytes: Amount = 0.0  #: bytes of a conditional request answered 304
    failed_bytes: Amount = 0.0  #: bytes sent and received by an attempt before it failed
    failure_rate: Amount = 0.0  #: fraction of attempts that fail (errors, timeouts, 429/503)
    credits: Amount = 1.0  #: credits per successful response (rendering costs the same)
    not_modified_credits: Amount = 1.0  #: credits of a 304; 1 unless the API prices it lower

    def __post_init__(self) -> None:
        # Fields may also be numpy arrays (one entry per page), priced in one call.
        if not np.all((np.asarray(self.failure_rate) >= 0) & (np.asarray(self.failure_rate) <= 1)):
            raise ValueError(f"CostProfile.failure_rate={self.failure_rate!r}: expected 0..1")
        figures = (self.full_bytes, self.not_modified_bytes, self.failed_bytes, self.credits)
        if any(np.any(np.asarray(v) < 0) for v in figures):
            raise ValueError(f"{self!r}: byte and credit figures must be >= 0")


def expected_cost(
    billing: BillingModel, profile: CostProfile, *, p_unchanged: ArrayLike = 0.0,
    validators_trusted: bool = False, health: ArrayLike = 1.0,
) -> NDArray[np.float64]:
    """Expected cost of one visit.

    ``p_unchanged``: the model's probability that the record has not changed since the last visit
    (``exp(-rate * since)``); used only where the host's validators are trusted, since only then is
    an unchanged page answered by a cheap 304. ``health`` (>= 1, see :class:`HealthTracker`)
    multiplies the result while the domain is unhealthy. Failed attempts before the answer:
    f / (1 - f) of them on average for failure rate f. Arrays broadcast: a profile whose fields
    are per-page arrays prices every page at once.
    """
    f = np.minimum(profile.failure_rate, _MAX_FAILURE_RATE)
    retries = f / (1.0 - f)
    p304 = np.asarray(p_unchanged, dtype=float) if validators_trusted else np.zeros(())
    if billing is BillingModel.BANDWIDTH:
        answer = p304 * profile.not_modified_bytes + (1 - p304) * profile.full_bytes
        cost = answer + retries * profile.failed_bytes
    elif billing is BillingModel.CREDITS:
        cost = p304 * profile.not_modified_credits + (1 - p304) * profile.credits
    elif billing is BillingModel.REQUESTS:
        cost = np.ones_like(p304) * (1.0 + retries)  # a 304 is a request like any other
    else:  # pragma: no cover - exhaustive enum
        raise ValueError(f"unknown billing model {billing!r}")
    return np.asarray(cost * np.asarray(health, dtype=float), dtype=float)


class RunningCost:
    """Running averages of measured fetches, for one page or page type.

    Exponentially weighted (weight ``alpha`` for the newest measurement, after a plain mean over
    the first ``1 / alpha`` ones), so a page that grows or a host that starts failing shows up
    within a few dozen fetches.
    """

    def __init__(self, alpha: float = 0.1) -> None:
        if not 0 < alpha <= 1:
            raise ValueError(f"RunningCost(alpha={alpha!r}): expected 0 < alpha <= 1")
        self.alpha = alpha
        self._means: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    def _update(self, key: str, value: float) -> None:
        n = self._counts.get(key, 0) + 1
        self._counts[key] = n
        old = self._means.get(key, value)
        self._means[key] = old + max(self.alpha, 1.0 / n) * (value - old)

    def observe(self, outcome: str, wire_bytes: float) -> None:
        """Record one attempt: ``outcome`` is "full" (200 with a body), "not_modified" (304) or
        "failed" (error, timeout, 429/503; ``wire_bytes`` is what it transferred)."""
        if outcome not in ("full", "not_modified", "failed"):
            raise ValueError(f"outcome={outcome!r}: expected 'full', 'not_modified' or 'failed'")
        if not wire_bytes >= 0:
            raise ValueError(f"wire_bytes={wire_bytes!r}: expected bytes >= 0")
        self._update(outcome, float(wire_bytes))
        self._update("failure", 1.0 if outcome == "failed" else 0.0)

    def profile(self, default_full_bytes: float) -> CostProfile:
        """The averages so far; ``default_full_bytes`` until a full response has been measured."""
        full = self._means.get("full", default_full_bytes)
        return CostProfile(
            full_bytes=full,
            not_modified_bytes=self._means.get("not_modified", 0.0),
            failed_bytes=self._means.get("failed", 0.0),
            failure_rate=self._means.get("failure", 0.0),
        )


class HealthTracker:
    """A domain's cost multiplier: 1 when healthy, up to ``1 + penalty`` while it throttles or fails.

    The bad-outcome rate is an exponentially weighted average in *time* (``half_life_seconds``),
    so the multiplier decays back to 1 once the domain answers well again, or simply as time
    passes without new failures.
    """

    def __init__(self, penalty: float = 4.0, half_life_seconds: float = 600.0) -> None:
        if penalty < 0 or half_life_seconds <= 0:
            raise ValueError("HealthTracker: penalty must be >= 0 and half_life_seconds > 0")
        self.penalty = penalty
        self.half_life = half_life_seconds
        self._bad = 0.0
        self._weight = 0.0
        self._at: float | None = None

    def _decay(self, now: float) -> None:
        if self._at is not None and now > self._at:
            factor = math.exp2(-(now - self._at) / self.half_life)
            self._bad *= factor
            self._weight *= factor
        self._at = now if self._at is None else max(self._at, now)

    def observe(self, ok: bool, now: float) -> None:
        """Record one fetch outcome: ``ok`` False for 429, 503, timeouts and connection errors."""
        self._decay(now)
        self._bad += 0.0 if ok else 1.0
        self._weight += 1.0

    def bad_rate(self, now: float) -> float:
        self._decay(now)
        # Decay toward "healthy": the missing weight counts as good outcomes.
        return self._bad / max(self._weight, 1.0)

    def multiplier(self, now: float) -> float:
        """``1 + penalty * bad_rate``: the factor :func:`expected_cost` takes as ``health``."""
        return 1.0 + self.penalty * self.bad_rate(now)
