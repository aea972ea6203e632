"""Priority of a visit: value x gain / expected cost (revisit-model.md section 4).

Value is a business judgement: a tier per page type from the site config (three or four levels
are enough), optionally overridden by a URL rule or by a field of the extracted record.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

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
