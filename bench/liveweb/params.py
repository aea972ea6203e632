"""The parameters of a test web: its shops and what each does wrong or right, the run's length
and the time axis, and (optionally) the lifecycle of its products: deaths, restores, moves and
temporary redirects. A :class:`ScenarioParams` plus its seed determines everything the server
serves; it travels to the server process and back to the evaluator as JSON."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

VALIDATORS = ("honest", "ignored", "absent")
LASTMODS = ("accurate", "bogus_now", "bogus_old", "absent")

#: Value of a page by tier (1 low, 2 normal, 3 high, 4 critical): the same scale the crawler's
#: site file declares by page type (and URL rule for critical products).
TIER_VALUES: dict[int, float] = {1: 1.0, 2: 3.0, 3: 10.0, 4: 30.0}

#: Mean change intervals of products, in "days", mixed like Cho & Garcia-Molina's measurements:
#: (share of products, shortest, longest mean interval); log-uniform inside a band.
CHANGE_BANDS: tuple[tuple[float, float, float], ...] = (
    (0.23, 1 / 32, 1.0),   # faster than daily
    (0.15, 1.0, 7.0),      # daily to weekly
    (0.16, 7.0, 30.0),     # weekly to monthly
    (0.16, 30.0, 120.0),   # monthly to four months
    (0.30, 120.0, 1000.0),  # slower
)

#: Which record field a change event touches (price and stock show in listings, the
#: description does not).
CHANGE_FIELDS: tuple[tuple[str, float], ...] = (("price", 0.4), ("stock", 0.2),
                                                 ("description", 0.4))


@dataclass(frozen=True)
class ShopSpec:
    """One shop on its own loopback host.

    ``validators``: ``honest`` (ETag = version, Last-Modified = last change, 304 when current),
    ``ignored`` (sends both, always answers 200) or ``absent``. ``lastmod`` in its sitemap:
    ``accurate`` (last change of the record), ``bogus_now`` (the time the sitemap is served),
    ``bogus_old`` (a fixed date in 2020) or ``absent``. ``sitemap_index``: sitemap.xml is an index
    of two child sitemaps. ``sitemap_in_site_file``: False when the sitemap is announced only by
    robots.txt. ``crawl_delay``: robots.txt ``Crawl-delay`` (0: none). ``throttled``: answers 429
    to every request during the run's throttle window.
    """

    products: int
    validators: str = "honest"
    lastmod: str = "accurate"
    sitemap_index: bool = False
    sitemap_in_site_file: bool = True
    crawl_delay: float = 0.0
    throttled: bool = False
    sitemap: bool = True

    def __post_init__(self) -> None:
        if not self.sitemap and (self.sitemap_index or self.sitemap_in_site_file):
            raise ValueError("a shop without a sitemap has no sitemap index and names none in a "
                             "site file (sitemap_index and sitemap_in_site_file must be False)")
        if self.products < 1:
            raise ValueError(f"a shop needs at least one product, got {self.products!r}")
        if self.validators not in VALIDATORS:
            raise ValueError(f"validators: got {self.validators!r}, expected one of {VALIDATORS}")
        if self.lastmod not in LASTMODS:
            raise ValueError(f"lastmod: got {self.lastmod!r}, expected one of {LASTMODS}")


DEFAULT_SHOPS: tuple[ShopSpec, ...] = (
    ShopSpec(290, "honest", "accurate", sitemap_index=True),
    ShopSpec(290, "ignored", "accurate", throttled=True),
    ShopSpec(200, "absent", "bogus_now", crawl_delay=1.0),
    ShopSpec(290, "honest", "absent", sitemap_in_site_file=False),
)


def _share(name: str, value: float) -> None:
    if not 0 <= value <= 1:
        raise ValueError(f"{name}: expected a share between 0 and 1, got {value!r}")


def _span(name: str, value: tuple[float, float], top: float = 1.0) -> None:
    lo, hi = value
    if not 0 <= lo <= hi <= top:
        raise ValueError(f"{name}: expected shares 0 <= a <= b <= {top:g}, got {value!r}")


@dataclass(frozen=True)
class Lifecycle:
    """What happens to products besides their record changes. Each product present from the
    start gets at most one fate, drawn with these shares: it **dies** (404 or 410 from then on,
    left out of listings and sitemaps; some come back later at the same URL, some of those with
    a changed record), it **moves** to a new slug (the old URL answers 301 or 308 to the new
    one, listings and sitemaps link the new one; the record may change at the move) or it
    answers a **temporary redirect** (302 or 307 to its category) for a while. Times are shares
    of the run: a fate begins in ``start_between``; a restored product stays dead for
    ``dead_for``; a temporary redirect lasts ``temp_for``."""

    death_share: float = 0.08
    gone_share: float = 0.5
    restore_share: float = 0.5
    restore_change_share: float = 0.5
    move_share: float = 0.06
    move_308_share: float = 0.3
    move_change_share: float = 0.5
    temp_share: float = 0.04
    temp_307_share: float = 0.5
    start_between: tuple[float, float] = (0.25, 0.7)
    dead_for: tuple[float, float] = (0.15, 0.3)
    temp_for: tuple[float, float] = (0.05, 0.15)

    def __post_init__(self) -> None:
        for name in ("death_share", "gone_share", "restore_share", "restore_change_share",
                     "move_share", "move_308_share", "move_change_share", "temp_share",
                     "temp_307_share"):
            _share(name, getattr(self, name))
        if self.death_share + self.move_share + self.temp_share > 1:
            raise ValueError("death_share + move_share + temp_share must not exceed 1")
        for name in ("start_between", "dead_for", "temp_for"):
            _span(name, getattr(self, name))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Lifecycle:
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**values)


@dataclass(frozen=True)
class ScenarioParams:
    """Everything that shapes a run; times in real seconds (``day_seconds`` of them make a
    "day" of the change model). The throttle window is a share of the run, ``retry_after`` 0
    means a sixth of the window (at least 1 s). ``lifecycle``: None (the default) for a web
    whose pages only change and are born; see :meth:`with_lifecycle`."""

    seed: int = 1
    minutes: float = 10.0
    shops: tuple[ShopSpec, ...] = DEFAULT_SHOPS
    day_seconds: float = 60.0
    per_category: int = 20
    sitemap_only_share: float = 0.08
    born_share: float = 0.05
    born_sitemap_only_share: float = 0.12
    critical_share: float = 0.10
    throttle_window: tuple[float, float] = (0.4, 0.5)
    retry_after: float = 0.0
    min_delay: float = 0.2
    first_host: str = "127.0.0.2"
    born_between: tuple[float, float] = field(default=(0.05, 0.85))
    lifecycle: Lifecycle | None = None

    def __post_init__(self) -> None:
        if self.minutes <= 0 or self.day_seconds <= 0:
            raise ValueError("minutes and day_seconds must be positive")
        if not self.shops or len(self.shops) > 250:
            raise ValueError(f"between 1 and 250 shops, got {len(self.shops)}")
        lo, hi = self.throttle_window
        if not 0 <= lo <= hi <= 1:
            raise ValueError(f"throttle_window must be shares 0 <= a <= b <= 1, got {(lo, hi)}")
        if not self.first_host.startswith("127."):
            raise ValueError(f"hosts must be loopback addresses, got {self.first_host!r}")

    @property
    def duration(self) -> float:
        return self.minutes * 60.0

    @property
    def horizon(self) -> float:
        """Change events are generated up to here (a server left running longer stays put)."""
        return self.duration * 1.25 + 120.0

    @property
    def window(self) -> tuple[float, float]:
        """The throttle window in seconds from the start."""
        return self.throttle_window[0] * self.duration, self.throttle_window[1] * self.duration

    @property
    def retry_after_seconds(self) -> int:
        if self.retry_after > 0:
            return max(1, math.ceil(self.retry_after))
        a, b = self.window
        return max(1, round((b - a) / 6))

    @property
    def hosts(self) -> list[str]:
        prefix, _, last = self.first_host.rpartition(".")
        if int(last) + len(self.shops) > 255:
            raise ValueError("too many shops for the loopback range after first_host")
        return [f"{prefix}.{int(last) + i}" for i in range(len(self.shops))]

    @property
    def no_sitemap(self) -> tuple[int, ...]:
        """The shops without a sitemap (0-based)."""
        return tuple(i for i, s in enumerate(self.shops) if not s.sitemap)

    def with_lifecycle(self, no_sitemap: Iterable[int] = (2, 3),
                       lifecycle: Lifecycle | None = None) -> ScenarioParams:
        """These parameters with products that die, come back, move and redirect for a while
        (``lifecycle``, default :class:`Lifecycle()`), the shops ``no_sitemap`` (0-based;
        default two of four) without any sitemap, and more births, later: 8% of products born
        between a fifth and 65% of the run, so every shop has births after the warm-up and
        early enough to be scored against two cycles."""
        gone = set(no_sitemap)
        if not gone <= set(range(len(self.shops))):
            raise ValueError(f"no_sitemap: shops are 0 to {len(self.shops) - 1}, "
                             f"got {sorted(gone)}")
        shops = tuple(replace(s, sitemap=False, sitemap_index=False, sitemap_in_site_file=False)
                      if i in gone else s for i, s in enumerate(self.shops))
        return replace(self, shops=shops, lifecycle=lifecycle or Lifecycle(), born_share=0.08,
                       born_between=(0.2, 0.65))

    @classmethod
    def small(cls, seed: int = 1, minutes: float = 2.0, **overrides: Any) -> ScenarioParams:
        """A fast scenario for tests: the same four kinds of shop, about 150 pages."""
        shops = tuple(replace(s, products=max(8, s.products // 8)) for s in DEFAULT_SHOPS)
        return cls(seed=seed, minutes=minutes, shops=shops, **overrides)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shops"] = [asdict(s) for s in self.shops]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScenarioParams:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown scenario parameters: {sorted(unknown)}")
        values = dict(data)
        if "shops" in values:
            values["shops"] = tuple(ShopSpec(**s) for s in values["shops"])
        for key in ("throttle_window", "born_between"):
            if key in values:
                values[key] = tuple(values[key])
        if values.get("lifecycle") is not None:
            values["lifecycle"] = Lifecycle.from_dict(values["lifecycle"])
        return cls(**values)
