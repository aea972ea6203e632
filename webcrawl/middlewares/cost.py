"""Cost and health: what each fetch cost in the site's billing model, and backoff for hosts that
throttle or fail (issue 5, item 3; revisit-model.md section 4).

Every attempt that reaches the network is measured once, in :meth:`process_response` or
:meth:`process_exception`, in the unit of the site's ``budget.billing``:

| billing | an answer | a failure (429, 5xx, timeout, connection error) |
| --- | --- | --- |
| ``bandwidth`` | request + response bytes on the wire (status line, headers, body as sent) | the same for a failed answer; the request's bytes for a transfer cut off or timed out; 0 when no connection was made |
| ``credits`` | 1 (a 304, a redirect, a 404 are answers) | 0 |
| ``requests`` | 1 | 1 |

The cost goes to the page type's running averages and the page's history
(:class:`~webcrawl.state.costs.CostStore`), and is booked in the cycle ledger
(:meth:`LedgerStore.land <webcrawl.state.ledger.LedgerStore.land>`): the cycle in
``meta["webcrawl_cycle"]`` or else the current one, releasing ``meta["webcrawl_reserved"]`` (what
an admit reserved; released once, so a retry books only its cost), purpose and page type from
``meta["webcrawl_purpose"]`` / ``meta["webcrawl_page_type"]``.

It also keeps the cycle's findings for the report (:meth:`LedgerStore.record_outcome`): each page's
verdict (``new``, ``changed``, ``unchanged``) from the record-hash pipeline, read off the
``item_scraped`` / ``item_dropped`` signals, and ``unchanged`` for a 304 to our validators (a 304
the conditional middleware then verifies counts once more, with the verification's verdict).

Health: a 429 or 503 (``WEBCRAWL_HEALTH_HTTP_CODES``), a timeout or a connection error is a bad
outcome for the host. It pushes the host's next-allowed time back for every process of the crawl
(``hold(domain, until)``, :func:`webcrawl.scheduler.domain_hold_setter`) by ``Retry-After`` when the
answer has one (seconds, or an HTTP date read against the answer's own ``Date``), else by
``WEBCRAWL_BACKOFF_BASE_SECONDS * 2 ** (n - 1)`` for the n-th bad outcome in a row, at most
``WEBCRAWL_BACKOFF_MAX_SECONDS``; and it raises the host's health multiplier (the expected cost the
priority middleware and the planner see). Any good answer ends the streak; the multiplier decays
back to 1 with ``WEBCRAWL_HEALTH_HALF_LIFE_SECONDS``.

Place it at 660: above RetryMiddleware (550), HttpCompressionMiddleware (590), RedirectMiddleware
(600) and the conditional middleware (650), so it sees every attempt and hop with its body as sent.

Stats: ``webcrawl/cost/total`` and ``webcrawl/cost/total/{page_type}`` (site unit),
``webcrawl/cost/attempts`` and ``webcrawl/cost/attempts/{full,not_modified,failed}``,
``webcrawl/cost/wire_bytes``, ``webcrawl/cost/unbooked`` (no cycle to book into),
``webcrawl/health/bad`` and ``webcrawl/health/bad/{429,503,...,timeout,connection}``,
``webcrawl/health/backoff`` (holds) and ``webcrawl/health/backoff/retry_after``,
``webcrawl/health/recovered`` (a host answering well after a bad streak).
"""

from __future__ import annotations

import logging
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    NotConfigured,
    ResponseDataLossError,
)
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.request import request_httprepr
from twisted.internet import error as net
from twisted.internet.defer import TimeoutError as DeferTimeoutError
from twisted.web._newclient import ResponseFailed

from webcrawl import meta
from webcrawl.clock import SystemClock
from webcrawl.items import PageItem
from webcrawl.middlewares.conditional import wire_bytes
from webcrawl.revisit import BillingModel
from webcrawl.scheduler import domain_hold_setter
from webcrawl.state.costs import backoff_seconds, cost_context

if TYPE_CHECKING:
    from collections.abc import Callable, Collection
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.http.headers import Headers
    from scrapy.statscollectors import StatsCollector

    from webcrawl.clock import Clock
    from webcrawl.state.costs import CostStore, DomainHealth
    from webcrawl.state.ledger import Cycle, LedgerStore

logger = logging.getLogger(__name__)

__all__ = ["CostHealthMiddleware", "attempt_cost", "retry_after_seconds"]

STATS = "webcrawl/cost/"
HEALTH = "webcrawl/health/"
META_RESERVED = meta.RESERVED
META_CYCLE = meta.CYCLE
META_VALIDATORS = meta.VALIDATORS_FOR
#: Errors before any byte was sent: nothing on the wire. (Scrapy 2.13+ wraps Twisted's errors in its
#: own exceptions; both kinds are listed, for download handlers that do not.)
NO_CONNECTION = (CannotResolveHostError, DownloadConnectionRefusedError, net.ConnectionRefusedError,
                 net.DNSLookupError, net.TCPTimedOutError, net.NoRouteError, net.UnknownHostError)
TIMEOUTS = (DownloadTimeoutError, net.TimeoutError, DeferTimeoutError, TimeoutError, net.TCPTimedOutError)
NETWORK_ERRORS = (*TIMEOUTS, *NO_CONNECTION, DownloadFailedError, ResponseDataLossError,
                  net.ConnectError, net.ConnectionLost, net.ConnectionDone, ResponseFailed,
                  ConnectionError)
_CYCLE_CACHE_SECONDS = 1.0


def retry_after_seconds(headers: Headers, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait: a number, or an HTTP date (read against the
    answer's own ``Date`` when it has one, so neither clock skew nor a simulated server clock
    matters; else against ``now``). ``None`` when absent or unreadable."""
    raw = headers.get(b"Retry-After")
    if not raw:
        return None
    text = raw.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text).timestamp()
        date = headers.get(b"Date")
        base = parsedate_to_datetime(date.decode("latin-1")).timestamp() if date else now
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(when - base, 0.0)


def attempt_cost(billing: BillingModel, wire: float, *, failed: bool) -> float:
    """The cost of one attempt in the site's unit (see the module docstring's table)."""
    if billing is BillingModel.BANDWIDTH:
        return float(wire)
    if billing is BillingModel.CREDITS:
        return 0.0 if failed else 1.0
    return 1.0


class CostHealthMiddleware:
    """Measure each attempt's cost; back off and penalise unhealthy hosts (module docstring)."""

    def __init__(self, costs: CostStore, stats: StatsCollector, *, billing: BillingModel,
                 ledger: LedgerStore | None = None, hold: Callable[[str, float], bool] | None = None,
                 site: Any = None, canonical: Callable[[str], str | None] | None = None,
                 clock: Clock | None = None, backoff_base: float = 2.0, backoff_max: float = 3600.0,
                 bad_statuses: Collection[int] = (429, 503), debug: bool = False) -> None:
        self.costs = costs
        self.stats = stats
        self.billing = billing
        self.ledger = ledger
        self.hold = hold
        self.site = site
        self.canonical = canonical
        self.clock = clock or SystemClock()
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.bad_statuses = frozenset(bad_statuses)
        self.debug = debug
        self._cycle: tuple[float, Cycle | None] = (float("-inf"), None)
        self._backed_off: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_COST_ENABLED", True):
            raise NotConfigured("cost and health tracking is off: set WEBCRAWL_COST_ENABLED = True")
        assert crawler.stats is not None
        context = cost_context(crawler)
        base = settings.getfloat("WEBCRAWL_BACKOFF_BASE_SECONDS", 2.0)
        maximum = settings.getfloat("WEBCRAWL_BACKOFF_MAX_SECONDS", 3600.0)
        if not 0 < base <= maximum:
            raise ValueError(f"WEBCRAWL_BACKOFF_BASE_SECONDS={base!r}, WEBCRAWL_BACKOFF_MAX_SECONDS="
                             f"{maximum!r}: expected 0 < base <= max")
        codes = [int(c) for c in settings.getlist("WEBCRAWL_HEALTH_HTTP_CODES", [429, 503])]
        mw = cls(context.costs, crawler.stats, billing=context.billing, ledger=context.ledger,
                 hold=domain_hold_setter(crawler), site=context.site, canonical=context.canonical,
                 backoff_base=base, backoff_max=maximum, bad_statuses=codes,
                 debug=settings.getbool("WEBCRAWL_COST_DEBUG", False))
        crawler.signals.connect(mw.item_verdict, signal=signals.item_scraped)
        crawler.signals.connect(mw.item_verdict, signal=signals.item_dropped)
        return mw

    # -- Scrapy hooks ------------------------------------------------------------------------

    def process_response(self, request: Request, response: Response) -> Response:
        wire = len(request_httprepr(request)) + wire_bytes(response)
        failed = response.status in self.bad_statuses or response.status == 429 or response.status >= 500
        outcome = "failed" if failed else ("not_modified" if response.status == 304 else "full")
        bad = response.status in self.bad_statuses
        domain, state, previous = self._measure(request, outcome, wire, ok=not bad)
        if response.status == 304 and META_VALIDATORS in request.meta:
            self._outcome(self._page_type(request), "unchanged")  # our validators: unchanged
        if bad:
            delay = retry_after_seconds(response.headers, self.clock.time())
            self._backoff(domain, state, str(response.status), delay)
        elif previous:
            self.stats.inc_value(HEALTH + "recovered")
            if self.debug:
                logger.debug("%s answers again after %d bad outcomes", domain, previous)
        return response

    def process_exception(self, request: Request, exception: BaseException) -> None:
        if not isinstance(exception, NETWORK_ERRORS):
            return  # IgnoreRequest and friends: nothing went over the wire
        wire = 0 if isinstance(exception, NO_CONNECTION) else len(request_httprepr(request))
        domain, state, _ = self._measure(request, "failed", wire, ok=False)
        self._backoff(domain, state, "timeout" if isinstance(exception, TIMEOUTS) else "connection", None)

    # -- measurement -------------------------------------------------------------------------

    def _page_type(self, request: Request) -> str | None:
        page_type = request.meta.get("webcrawl_page_type")
        if page_type is None and self.site is not None:
            match = self.site.page_type_for(request.url)
            page_type = match.name if match is not None else None
        return page_type

    def _current_cycle(self) -> Cycle | None:
        if self.ledger is None:
            return None
        at, cycle = self._cycle
        now = self.clock.time()
        if abs(now - at) >= _CYCLE_CACHE_SECONDS or (cycle is not None and now >= cycle.ends):
            cycle = self.ledger.current()
            self._cycle = (now, cycle)
        return cycle

    def _measure(self, request: Request, outcome: str, wire: int, *, ok: bool
                 ) -> tuple[str, DomainHealth, int]:
        """Book the attempt; returns its domain, the domain's health after it and its bad streak
        before it."""
        meta = request.meta
        failed = outcome == "failed"
        billed = attempt_cost(self.billing, wire, failed=failed)
        page_type = self._page_type(request)
        purpose = meta.get("webcrawl_purpose") or "discovery"
        url = None
        if purpose != "robots" and self.canonical is not None:
            url = meta.get("webcrawl_canonical_url") or self.canonical(request.url)
        domain = urlparse_cached(request).hostname or ""
        state, previous = self.costs.attempt(page_type, outcome, wire, billed, url, domain=domain,
                                             ok=ok, now=self.clock.time())
        for key in ("total", f"total/{page_type or '-'}"):
            self.stats.inc_value(STATS + key, billed)  # type: ignore[arg-type]  # costs may be fractional
        self.stats.inc_value(STATS + "attempts")
        self.stats.inc_value(STATS + f"attempts/{outcome}")
        self.stats.inc_value(STATS + "wire_bytes", wire)
        cycle_id = meta.get(META_CYCLE)
        if cycle_id is None:
            cycle = self._current_cycle()
            cycle_id = cycle.id if cycle is not None else None
        if cycle_id is None or self.ledger is None:
            self.stats.inc_value(STATS + "unbooked")
            return domain, state, previous
        reserved = float(meta.get(META_RESERVED) or 0.0)
        meta[META_RESERVED] = 0.0  # a retry carries the meta along: release the reservation once
        self.ledger.land(int(cycle_id), expected=reserved, actual=billed, purpose=purpose,
                         page_type=page_type)
        return domain, state, previous

    def item_verdict(self, item: Any) -> None:
        """``item_scraped`` / ``item_dropped``: a page's verdict (new, changed, unchanged) as
        the record-hash pipeline judged it, counted in the current cycle's metrics."""
        if isinstance(item, PageItem) and item.change is not None:
            self._outcome(item.page_type, item.change)

    def _outcome(self, page_type: str | None, outcome: str) -> None:
        cycle = self._current_cycle()
        if cycle is not None and self.ledger is not None:
            self.ledger.record_outcome(cycle.id, page_type, outcome)

    # -- health ------------------------------------------------------------------------------

    def _backoff(self, domain: str, state: DomainHealth, reason: str, retry_after: float | None) -> None:
        """Hold ``domain`` back after a bad outcome (its ``state.streak``-th in a row)."""
        self.stats.inc_value(HEALTH + "bad")
        self.stats.inc_value(HEALTH + f"bad/{reason}")
        delay = backoff_seconds(state.streak, retry_after, self.backoff_base, self.backoff_max)
        until = self.clock.time() + delay
        if self.hold is not None:
            self.hold(domain, until)
        self.costs.note_hold(domain, until)
        self.stats.inc_value(HEALTH + "backoff")
        if retry_after is not None:
            self.stats.inc_value(HEALTH + "backoff/retry_after")
        if domain not in self._backed_off:
            self._backed_off.add(domain)
            logger.info("Backing off %s for %.1f s (%s); more backoffs of this host are logged "
                        "with WEBCRAWL_COST_DEBUG = True", domain, delay, reason)
        elif self.debug:
            logger.debug("Backing off %s for %.1f s (%s, %d in a row)", domain, delay, reason,
                         state.streak)
