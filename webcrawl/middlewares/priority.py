"""Cost-aware priority: every request the spider yields gets its purpose, page type, expected cost
and a priority = value x gain / expected cost (revisit-model.md section 4).

Known pages' revisits come out of their hosts' due queues when the allocator says
(:mod:`webcrawl.extensions.allocator`). What the spider yields is mostly new: seeds, links,
sitemap entries (URLs the seen filter has not met) and sitemaps; besides, rechecks of known pages
a lister stopped showing (``meta["webcrawl_known"]``). For each:

- ``meta["webcrawl_purpose"]``: kept when set; else ``robots`` for a ``/robots.txt``, ``sitemap``
  for one of the site's sitemaps, ``discovery`` otherwise.
- ``meta["webcrawl_page_type"]``: kept when set, else the site's first matching page type.
- value: the page type's tier (:data:`TIER_VALUES`), or the first of its URL rules that matches.
- gain: a first copy of a page changing at the prior's rate, fresh until the next cycle:
  ``(1 - exp(-rate * cycle)) / rate`` (one event under the ``events`` objective). The prior: one
  change per ``WEBCRAWL_PRIOR_CHANGE_SECONDS`` (7 days), shape ``WEBCRAWL_PRIOR_SHAPE`` (0.5).
- ``meta["webcrawl_expected_cost"]``: the page type's mean cost as the allocator last published
  it (``WEBCRAWL_COST_DEFAULT_BYTES`` or one credit or request until measured), times the host's
  health multiplier.
- ``request.priority`` = :func:`scrapy_priority` of the score, inside a band
  (:func:`webcrawl.revisit.priority.band_for`): robots.txt, then sitemaps, then known pages, then
  pages a page read again newly lists and pages without a page type a hub links, then the rest.

No Redis round trip per request: published costs and host health are read at most every few
seconds, and a host this process has not read yet counts as healthy until its read, sent behind
the reactor, answers. Place it at 40 in ``SPIDER_MIDDLEWARES``, after Scrapy's depth, URL-length
and referer middlewares, so what they drop is not scored.

Stats: ``webcrawl/priority/requests`` and ``webcrawl/priority/requests/{purpose}``.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware
from scrapy.utils.httpobj import urlparse_cached

from webcrawl import meta as M
from webcrawl.config import DEFAULT_PRIOR, configured_prior
from webcrawl.revisit import GammaPrior, Objective
from webcrawl.revisit.priority import BANDS, STEPS_PER_DECADE, band_for, scrapy_priority
from webcrawl.runtime import CrawlRuntime

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

__all__ = ["BANDS", "STEPS_PER_DECADE", "TIER_VALUES", "PriorityMiddleware", "band_for",
           "scrapy_priority"]

STATS = "webcrawl/priority/"
_REFRESH_SECONDS = 5.0
#: Site tiers (1 low .. 4 critical) as values: about 3x a level, like the model's default tiers.
TIER_VALUES: dict[int, float] = {1: 1.0, 2: 3.0, 3: 10.0, 4: 30.0}
class PriorityMiddleware(BaseSpiderMiddleware):
    """Purpose, page type, expected cost and priority on every request (module docstring)."""

    def __init__(self, stats: StatsCollector, *, site: Any = None, prior: GammaPrior | None = None,
                 default_cost: float = 1.0, published: Callable[[], dict[str, float]] | None = None,
                 health: Callable[[str], float] | None = None) -> None:
        self.crawler = None  # type: ignore[assignment]  # plain values only (see from_crawler)
        self.stats = stats
        self.site = site
        self.prior = prior or DEFAULT_PRIOR
        self.default_cost = default_cost
        self.published = published
        self.health = health or (lambda host: 1.0)
        self.objective = Objective(getattr(site, "objective", "freshness"))
        budget = getattr(site, "budget", None)
        self.cycle_seconds = float(getattr(budget, "cycle_seconds", 86_400.0))
        self.sitemaps = frozenset(getattr(site, "sitemaps", ()))
        self._costs: dict[str, float] = {}
        self._costs_at = -math.inf

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_PRIORITY_ENABLED", True):
            raise NotConfigured("cost-aware priorities are off: set WEBCRAWL_PRIORITY_ENABLED = True")
        assert crawler.stats is not None
        runtime = CrawlRuntime.of(crawler)
        half_life = settings.getfloat("WEBCRAWL_HEALTH_HALF_LIFE_SECONDS", 600.0)
        penalty = settings.getfloat("WEBCRAWL_HEALTH_PENALTY", 4.0)

        def health(host: str) -> float:
            # A host this process never read scores as healthy while its read goes behind: a
            # round trip for each new host of a page's links held the reactor on wide crawls.
            known = runtime.hosts.health(host, wait=False)
            return 1.0 + penalty * known.bad_rate(runtime.clock.time(), half_life)

        return cls(crawler.stats, site=runtime.site, prior=configured_prior(settings),
                   default_cost=runtime.default_cost(), published=runtime.published, health=health)

    def get_processed_request(self, request: Request, response: Response | None) -> Request | None:
        meta = request.meta
        purpose = meta.get(M.PURPOSE) or self._purpose(request)
        meta[M.PURPOSE] = purpose
        if M.PAGE_TYPE not in meta:
            match = self.site.page_type_for(request.url) if self.site is not None else None
            meta[M.PAGE_TYPE] = match.name if match is not None else None
        self.stats.inc_value(STATS + "requests")
        self.stats.inc_value(STATS + f"requests/{purpose}")
        score, cost = self.score(request, meta[M.PAGE_TYPE])
        meta[M.EXPECTED_COST] = cost
        meta[M.PRIORITY] = score
        request.priority = scrapy_priority(score, band_for(purpose, bool(meta.get(M.KNOWN)),
                                                           bool(meta.get(M.NEWLY_LISTED)),
                                                           bool(meta.get(M.HUB_CANDIDATE))))
        return request

    def _purpose(self, request: Request) -> str:
        if urlparse_cached(request).path == "/robots.txt":
            return "robots"
        return "sitemap" if request.url in self.sitemaps else "discovery"

    def expected_cost(self, page_type: str | None, host: str) -> float:
        if self.published is not None and time.monotonic() - self._costs_at > _REFRESH_SECONDS:
            self._costs_at = time.monotonic()
            self._costs = {k[5:]: v for k, v in self.published().items() if k.startswith("cost:")}
        base = self._costs.get(page_type or "-") or self.default_cost
        return max(base * self.health(host), 1e-9)

    def score(self, request: Request, page_type: str | None) -> tuple[float, float]:
        """``(value * gain / expected cost, expected cost)`` of a first fetch of ``request``."""
        host = urlparse_cached(request).hostname or ""
        value = self._value(page_type, request.url)
        rate = self.prior.mean
        if self.objective is Objective.EVENTS:
            g = 1.0
        else:
            g = -math.expm1(-rate * self.cycle_seconds) / rate
        cost = self.expected_cost(page_type, host)
        return value * g / cost, cost

    def _kind(self, page_type: str | None) -> Any:
        if self.site is None or page_type is None:
            return None
        for kind in self.site.page_types:
            if kind.name == page_type:
                return kind
        return None

    def _value(self, page_type: str | None, url: str | None = None) -> float:
        kind = self._kind(page_type)
        if kind is None:
            return 1.0
        tier_for = getattr(kind, "tier_for", None)
        tier = tier_for(url) if tier_for is not None else kind.tier
        return TIER_VALUES.get(tier, 1.0)
