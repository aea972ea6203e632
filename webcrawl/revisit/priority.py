"""Priority of a visit: value x gain / expected cost (revisit-model.md section 4).

Value is a business judgement: a tier per page type from the site config (three or four levels
are enough), optionally overridden by a URL rule or by a field of the extracted record.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

# -- Scrapy's integer priorities: bands by kind of request, scores ordered inside a band ---------

STEPS_PER_DECADE = 100  # priorities 2.3% apart in score are still ordered
_HALF_SPAN = 2000  # scores from 1e-20 to 1e20 keep their order inside a band
#: The integer priority band of each kind of request, best first (a request derived from a known
#: page's revisit, such as the redirect of a page that moved, goes before every new URL).
BANDS: dict[str, int] = {"robots": 30_000, "sitemap": 20_000, "newly_listed": 5_000,
                         "known": 10_000, "discovery": 0}


def band_for(purpose: str, known: bool = False, newly_listed: bool = False,
             hub_candidate: bool = False) -> int:
    """The band of a request: robots.txt and sitemaps by purpose, then URLs a page or sitemap
    read again lists for the first time (new pages, found within a reading's time) and pages
    without a page type a hub or seed links (likely hubs: they lead to new pages), then pages."""
    if purpose in ("robots", "sitemap"):
        return BANDS[purpose]
    if (newly_listed or hub_candidate) and not known:
        return BANDS["newly_listed"]
    return BANDS["known"] if known else BANDS["discovery"]


def scrapy_priority(score: float, band: int = 0) -> int:
    """Scrapy's integer ``Request.priority`` for a ``value * gain / cost`` score: monotone
    (non-decreasing) in the score, inside ``band +- 2001``; a zero score is the band's lowest."""
    if not score > 0:
        return band - _HALF_SPAN - 1
    steps = round(STEPS_PER_DECADE * math.log10(score)) if math.isfinite(score) else _HALF_SPAN
    return band + max(-_HALF_SPAN, min(_HALF_SPAN, steps))


#: Scrapy's priority of a known page's revisit: the top of the known pages' band, so what its
#: answer leads to (a redirect, kept at this priority + 2) is fetched before any new URL.
REVISIT_PRIORITY = BANDS["known"] + _HALF_SPAN


#: Default tier values: a ratio of 10 between the best and the worst is what "tiers" usually mean.
DEFAULT_TIERS: Mapping[str, float] = {"high": 10.0, "medium": 3.0, "low": 1.0}


def priority(value: ArrayLike, gain: ArrayLike, cost: ArrayLike) -> NDArray[np.float64]:
    """``value * gain / cost``; 0 where the gain or value is 0, ``inf`` never (cost must be > 0)."""
    c = np.asarray(cost, dtype=float)
    if np.any(~(c > 0)):
        raise ValueError("priority: every expected cost must be > 0 (a free fetch has no priority order)")
    return np.asarray(value, dtype=float) * np.asarray(gain, dtype=float) / c


@dataclass(frozen=True)
class ValueRule:
    """Pages whose URL matches ``pattern`` (``re.search``) are worth ``value``."""

    pattern: str
    value: float
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.value >= 0:
            raise ValueError(f"ValueRule({self.pattern!r}): value={self.value!r}, expected >= 0")
        object.__setattr__(self, "_regex", re.compile(self.pattern))

    def matches(self, url: str) -> bool:
        return self._regex.search(url) is not None


@dataclass(frozen=True)
class ValuePolicy:
    """How a site values its pages.

    Precedence, most specific first: a record field (``record_field``: a number is the value
    itself; a string is looked up in ``tiers``), then the first matching URL rule, then the page
    type's tier. An unknown tier name is a configuration error, raised at construction or lookup.
    """

    tiers: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TIERS))
    page_type_tier: Mapping[str, str] = field(default_factory=dict)
    default_tier: str = "medium"
    url_rules: tuple[ValueRule, ...] = ()
    record_field: str | None = None

    def __post_init__(self) -> None:
        for name, v in self.tiers.items():
            if not v >= 0:
                raise ValueError(f"value tier {name!r}={v!r}: expected a number >= 0")
        for page_type, tier in {**self.page_type_tier, "(default)": self.default_tier}.items():
            if tier not in self.tiers:
                raise ValueError(
                    f"page type {page_type!r} has tier {tier!r}; expected one of {sorted(self.tiers)}"
                )

    def value(self, page_type: str | None, url: str | None = None, record: Mapping[str, Any] | None = None) -> float:
        """The value of one page."""
        if self.record_field is not None and record is not None and record.get(self.record_field) is not None:
            raw = record[self.record_field]
            if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw >= 0:
                return float(raw)
            if isinstance(raw, str) and raw in self.tiers:
                return self.tiers[raw]
        if url is not None:
            for rule in self.url_rules:
                if rule.matches(url):
                    return rule.value
        tier = self.page_type_tier.get(page_type or "", self.default_tier)
        return self.tiers[tier]
