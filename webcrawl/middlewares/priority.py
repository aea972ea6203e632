"""Cost-aware priority: every request the spider yields gets its purpose, page type, expected cost
and a priority = value x gain / expected cost (revisit-model.md section 4; issue 5, item 2).

For each request (start requests and spider output):

- ``meta["webcrawl_purpose"]``: kept when set (``discovery``, ``revisit``, ``reestimation`` or
  ``re-estimation``, ``verification``, ``robots``, ``sitemap``, ``listing``); else ``robots`` for a
  ``/robots.txt``, ``sitemap`` for one of the site's sitemaps, ``discovery`` otherwise.
- ``meta["webcrawl_page_type"]``: kept when set, else the site's first matching page type (``None``
  when none matches).
- value: the page's tier (:data:`TIER_VALUES`), 1 without a site or page type. The tier is the
  page type's, overridden (docs/sites.md, ``value_rules`` / ``value_field``) by the tier the
  record-hash pipeline stored in a known page's history at its last fetch (``value_tier``: its
  record field, or a URL rule; read only for page types with a ``value_field``), else by the
  first of the page type's URL rules matching the request's URL.
- gain (:func:`webcrawl.revisit.gain` under the site's objective): for a page with a history, with
  its posterior change rate (its own visits shrunk toward the prior) and the time since its last
  fetch; for a new page (purpose ``discovery``, or no history) the prior's rate, and the fresh time
  a first copy buys until the next cycle, ``(1 - exp(-rate * cycle)) / rate`` (one event under the
  ``events`` objective). The prior: one change per ``WEBCRAWL_PRIOR_CHANGE_SECONDS`` (7 days),
  shape ``WEBCRAWL_PRIOR_SHAPE`` (0.5).
- ``meta["webcrawl_expected_cost"]``: :func:`webcrawl.revisit.expected_cost` in the site's billing
  model, from the page type's measured averages (``WEBCRAWL_COST_DEFAULT_BYTES`` until measured),
  a 304's price where the host's validators are trusted and the page has some, times the host's
  health multiplier (:class:`~webcrawl.state.costs.CostStore`).
- ``meta["webcrawl_priority"]`` (the score) and ``request.priority`` = :func:`scrapy_priority`:
  ``band + round(STEPS_PER_DECADE * log10(score))``, clipped inside the band. Bands keep the
  model's rule that new URLs never outrank known pages: robots.txt, then sitemaps, then known pages
  (revisits, re-estimation, verification, listings with a history), then discovery. A request that
  already carries ``webcrawl_priority`` and ``webcrawl_expected_cost`` (the cycle planner's) is only
  mapped, not scored again.

A known page costs one Redis read (its history); a discovery none beyond the cached cost profile
and host health. Place it at 40 in ``SPIDER_MIDDLEWARES``: after Scrapy's depth, URL-length and
referer middlewares, so what they drop is not scored and nothing re-prioritises afterwards.

Stats: ``webcrawl/priority/requests`` and ``webcrawl/priority/requests/{purpose}``,
``webcrawl/priority/known`` (scored from a page history), ``webcrawl/priority/planned`` (mapped only).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware
from scrapy.utils.httpobj import urlparse_cached

from webcrawl.config import DEFAULT_PRIOR, configured_prior
from webcrawl.clock import SystemClock
from webcrawl.middlewares.conditional import change_context
from webcrawl.revisit import BillingModel, GammaPrior, Objective, estimate_rates, expected_cost, gain
from webcrawl.state.costs import cost_context
from webcrawl.state.history import HistoryStore

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

    from webcrawl.clock import Clock
    from webcrawl.state.costs import CostStore
    from webcrawl.state.history import PageRecord

__all__ = ["BANDS", "STEPS_PER_DECADE", "TIER_VALUES", "PriorityMiddleware", "band_for",
           "scrapy_priority"]

STATS = "webcrawl/priority/"
#: Site tiers (1 low .. 4 critical) as values: about 3x a level, like the model's default tiers.
TIER_VALUES: dict[int, float] = {1: 1.0, 2: 3.0, 3: 10.0, 4: 30.0}
STEPS_PER_DECADE = 100  # priorities 2.3% apart in score are still ordered
_HALF_SPAN = 2000  # scores from 1e-20 to 1e20 keep their order inside a band
#: The integer priority band of each kind of request, best first.
BANDS: dict[str, int] = {"robots": 30_000, "sitemap": 20_000, "known": 10_000, "discovery": 0}
KNOWN_PURPOSES = frozenset({"revisit", "reestimation", "re-estimation", "verification", "listing"})


def band_for(purpose: str, known: bool) -> int:
    """The band of a request: robots.txt and sitemaps by purpose, then pages with a history."""
    if purpose in ("robots", "sitemap"):
        return BANDS[purpose]
    return BANDS["known"] if known else BANDS["discovery"]


def scrapy_priority(score: float, band: int = 0) -> int:
    """Scrapy's integer ``Request.priority`` for a ``value * gain / cost`` score: monotone
    (non-decreasing) in the score, inside ``band +- 2001``; a zero score is the band's lowest."""
    if not score > 0:
        return band - _HALF_SPAN - 1
    steps = round(STEPS_PER_DECADE * math.log10(score)) if math.isfinite(score) else _HALF_SPAN
    return band + max(-_HALF_SPAN, min(_HALF_SPAN, steps))


class PriorityMiddleware(BaseSpiderMiddleware):
    """Purpose, page type, expected cost and priority on every request (module docstring)."""

    def __init__(self, costs: CostStore, history: HistoryStore, stats: StatsCollector, *,
                 billing: BillingModel, site: Any = None, prior: GammaPrior | None = None,
                 trusted: Callable[[str], bool] | None = None,
                 canonical: Callable[[str], str | None] | None = None, clock: Clock | None = None,
                 default_bytes: float = 50_000.0) -> None:
        self.crawler = None  # type: ignore[assignment]  # plain values only (see from_crawler)
        self.costs = costs
        self.history = history
        self.stats = stats
        self.billing = billing
        self.site = site
        self.prior = prior or DEFAULT_PRIOR
        self.trusted = trusted or (lambda host: False)
        self.canonical = canonical or (lambda url: url)
        self.clock = clock or SystemClock()
        self.default_bytes = default_bytes
        self.objective = Objective(getattr(site, "objective", "freshness"))
        budget = getattr(site, "budget", None)
        self.cycle_seconds = float(getattr(budget, "cycle_seconds", 86_400.0))
        self.sitemaps = frozenset(getattr(site, "sitemaps", ()))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_PRIORITY_ENABLED", True):
            raise NotConfigured("cost-aware priorities are off: set WEBCRAWL_PRIORITY_ENABLED = True")
        assert crawler.stats is not None
        context = cost_context(crawler)
        change = change_context(crawler)
        site = context.site
        rules = getattr(site, "trust", None)

        def trusted(host: str) -> bool:
            mode = rules.for_host(host).validators if rules is not None else "learn"
            return mode == "always" or (mode == "learn" and change.trust.get(host).state == "trusted")

        return cls(context.costs, change.history, crawler.stats, billing=context.billing, site=site,
                   prior=configured_prior(settings), trusted=trusted,
                   canonical=context.canonical,
                   default_bytes=settings.getfloat("WEBCRAWL_COST_DEFAULT_BYTES", 50_000.0))

    def get_processed_request(self, request: Request, response: Response | None) -> Request | None:
        meta = request.meta
        purpose = meta.get("webcrawl_purpose") or self._purpose(request)
        meta["webcrawl_purpose"] = purpose
        if "webcrawl_page_type" not in meta:
            match = self.site.page_type_for(request.url) if self.site is not None else None
            meta["webcrawl_page_type"] = match.name if match is not None else None
        self.stats.inc_value(STATS + "requests")
        self.stats.inc_value(STATS + f"requests/{purpose}")
        if "webcrawl_priority" in meta and "webcrawl_expected_cost" in meta:
            self.stats.inc_value(STATS + "planned")
            request.priority = scrapy_priority(float(meta["webcrawl_priority"]),
                                               band_for(purpose, purpose in KNOWN_PURPOSES))
            return request
        record, url = None, None
        if purpose in KNOWN_PURPOSES:
            url = meta.get("webcrawl_canonical_url") or self.canonical(request.url)
            record = self.history.get(url) if url else None
            if record is not None:
                self.stats.inc_value(STATS + "known")
        score, cost = self.score(request, meta["webcrawl_page_type"], record,
                                 stored_tier=self._stored_tier(meta["webcrawl_page_type"], url)
                                 if record is not None else None)
        meta["webcrawl_expected_cost"] = cost
        meta["webcrawl_priority"] = score
        request.priority = scrapy_priority(score, band_for(purpose, record is not None))
        return request

    def _purpose(self, request: Request) -> str:
        if urlparse_cached(request).path == "/robots.txt":
            return "robots"
        return "sitemap" if request.url in self.sitemaps else "discovery"

    def score(self, request: Request, page_type: str | None, record: PageRecord | None,
              stored_tier: int | None = None) -> tuple[float, float]:
        """``(value * gain / expected cost, expected cost)`` of fetching ``request`` now;
        ``stored_tier``: the page's ``value_tier`` from its history (a record field's tier)."""
        now = self.clock.time()
        host = urlparse_cached(request).hostname or ""
        value = self._value(page_type, request.url, stored_tier)
        p_unchanged, validators = 0.0, False
        if record is None or record.last_fetched <= 0:
            rate = self.prior.mean
            if self.objective is Objective.EVENTS:
                g = 1.0
            else:
                g = -math.expm1(-rate * self.cycle_seconds) / rate
        else:
            rate = float(estimate_rates(record.page_history(), self.prior.shape, self.prior.rate)[0])
            since = max(now - record.last_fetched, 0.0)
            g = float(gain(self.objective, rate, since))
            p_unchanged = math.exp(-rate * since)
            validators = bool(record.etag or record.last_modified) and self.trusted(host)
        profile = self.costs.profile(page_type, self.default_bytes)
        cost = float(expected_cost(self.billing, profile, p_unchanged=p_unchanged,
                                   validators_trusted=validators,
                                   health=self.costs.multiplier(host, now)))
        cost = max(cost, 1e-9)
        return value * g / cost, cost

    def _kind(self, page_type: str | None) -> Any:
        if self.site is None or page_type is None:
            return None
        for kind in self.site.page_types:
            if kind.name == page_type:
                return kind
        return None

    def _stored_tier(self, page_type: str | None, url: str | None) -> int | None:
        """The ``value_tier`` of a known page whose type has a record ``value_field`` (one Redis
        read, only for those types); ``None`` when none is stored."""
        kind = self._kind(page_type)
        if kind is None or getattr(kind, "value_field", None) is None or not url:
            return None
        raw = self.history.client.hget(self.history.keys.page(url), "value_tier")
        tier = int(raw) if raw else 0
        return tier if 1 <= tier <= 4 else None

    def _value(self, page_type: str | None, url: str | None = None,
               stored_tier: int | None = None) -> float:
        kind = self._kind(page_type)
        if kind is None:
            return 1.0
        if stored_tier is not None:
            return TIER_VALUES.get(stored_tier, 1.0)
        tier_for = getattr(kind, "tier_for", None)
        tier = tier_for(url) if tier_for is not None else kind.tier
        return TIER_VALUES.get(tier, 1.0)
