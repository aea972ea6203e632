"""Cost and health: what each fetch cost in the site's billing model, and backoff for hosts that
throttle or fail (revisit-model.md section 4).

Every attempt that reaches the network is measured once, in :meth:`process_response` or
:meth:`process_exception`, in the unit of the site's ``budget.billing``:

| billing | an answer | a failure (429, 5xx, timeout, connection error) |
| --- | --- | --- |
| ``bandwidth`` | request + response bytes on the wire (status line, headers, body as sent) | the same for a failed answer; the request's bytes for a transfer cut off or timed out; 0 when no connection was made |

Through a proxy (``WEBCRAWL_PROXIES``, ``meta["proxy"]``), whose gateway bills every byte, the
bytes are those the download handler counted at the socket (:mod:`webcrawl.net.meter`): request
and answer as sent, the ``CONNECT`` exchange and TLS of an https target, and whatever a failed
transfer moved before it failed.
| ``credits`` | 1 (a 304, a redirect, a 404 are answers) | 0 |
| ``requests`` | 1 | 1 |

The cost is settled with the spend bucket (:meth:`webcrawl.spend.SpendController.reconcile`: what
the wallet paid for the request against what it cost), noted for the page's own cost
(``meta["webcrawl_billed"]``, which the record-hash pipeline and the sitemap reader put in the
page's record: only a page's own fetches price its revisits), and booked in the current cycle's
ledger (``booked``, ``spent:<purpose>``, ``fetches:<page type>``, ``cost:<page type>``), all through
the turn's write batch: no Redis round trip of its own.

A fetch of a page (a request with a page type) that lands no observation is logged as a check
of its own (land operation "C"; docs/database.md): outcome ``redirected`` for a redirect (3xx but
304), ``error`` for an answer of 400 or more (but the 404 or 410 of a known page, which the
record-hash pipeline lands) or a timeout or connection error.

It also keeps the cycle's findings for the report: each page's verdict (``new``, ``changed``,
``unchanged``) from the record-hash pipeline, read off the ``item_scraped`` / ``item_dropped``
signals, and ``unchanged`` for a 304 to our validators.

Health: a 429 or 503 (``WEBCRAWL_HEALTH_HTTP_CODES``), a timeout or a connection error is a bad
outcome for the host. It pushes the host's next-allowed time back for every process of the crawl
(land operation "A", in the host's shard, by the server's clock) by ``Retry-After`` when the
answer has one (seconds, or an HTTP date read against the answer's own ``Date``), else by
``WEBCRAWL_BACKOFF_BASE_SECONDS * 2 ** (n - 1)`` for the n-th bad outcome in a row, at most
``WEBCRAWL_BACKOFF_MAX_SECONDS``; and it raises the host's health multiplier (the expected cost the
priority middleware and the allocator see). Any good answer ends the streak; the multiplier decays
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
from twisted.internet import error as net
from twisted.internet.defer import TimeoutError as DeferTimeoutError
from twisted.web._newclient import ResponseFailed

from webcrawl import meta as M
from webcrawl.items import ChangeEvent, PageItem
from webcrawl.net.meter import measured_bytes
from webcrawl.revisit import BillingModel
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.hosts import attempt_op
from webcrawl.state.pagestore import EventArgs, check_op
from webcrawl.wire import request_wire_bytes, wire_bytes

if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.http.headers import Headers
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

__all__ = ["CostHealthMiddleware", "attempt_cost", "retry_after_seconds"]

STATS = "webcrawl/cost/"
HEALTH = "webcrawl/health/"
#: Errors before any byte was sent: nothing on the wire. (Scrapy 2.13+ wraps Twisted's errors in its
#: own exceptions; both kinds are listed, for download handlers that do not.)
NO_CONNECTION = (CannotResolveHostError, DownloadConnectionRefusedError, net.ConnectionRefusedError,
                 net.DNSLookupError, net.TCPTimedOutError, net.NoRouteError, net.UnknownHostError)
TIMEOUTS = (DownloadTimeoutError, net.TimeoutError, DeferTimeoutError, TimeoutError, net.TCPTimedOutError)
NETWORK_ERRORS = (*TIMEOUTS, *NO_CONNECTION, DownloadFailedError, ResponseDataLossError,
                  net.ConnectError, net.ConnectionLost, net.ConnectionDone, ResponseFailed,
                  ConnectionError)


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

    def __init__(self, runtime: CrawlRuntime, stats: StatsCollector, *, billing: BillingModel,
                 site: Any = None, backoff_base: float = 2.0, backoff_max: float = 3600.0,
                 half_life: float = 600.0, bad_statuses: Collection[int] = (429, 503),
                 debug: bool = False) -> None:
        self.runtime = runtime
        self.stats = stats
        self.billing = billing
        self.site = site
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.half_life = half_life
        self.bad_statuses = frozenset(bad_statuses)
        self.debug = debug
        self._backed_off = _Seen(10_000)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_COST_ENABLED", True):
            raise NotConfigured("cost and health tracking is off: set WEBCRAWL_COST_ENABLED = True")
        assert crawler.stats is not None
        runtime = CrawlRuntime.of(crawler)
        base = settings.getfloat("WEBCRAWL_BACKOFF_BASE_SECONDS", 2.0)
        maximum = settings.getfloat("WEBCRAWL_BACKOFF_MAX_SECONDS", 3600.0)
        if not 0 < base <= maximum:
            raise ValueError(f"WEBCRAWL_BACKOFF_BASE_SECONDS={base!r}, WEBCRAWL_BACKOFF_MAX_SECONDS="
                             f"{maximum!r}: expected 0 < base <= max")
        codes = [int(c) for c in settings.getlist("WEBCRAWL_HEALTH_HTTP_CODES", [429, 503])]
        mw = cls(runtime, crawler.stats, billing=runtime.billing, site=runtime.site,
                 backoff_base=base, backoff_max=maximum,
                 half_life=settings.getfloat("WEBCRAWL_HEALTH_HALF_LIFE_SECONDS", 600.0),
                 bad_statuses=codes, debug=settings.getbool("WEBCRAWL_COST_DEBUG", False))
        crawler.signals.connect(mw.item_verdict, signal=signals.item_scraped)
        crawler.signals.connect(mw.item_verdict, signal=signals.item_dropped)
        return mw

    # -- Scrapy hooks ------------------------------------------------------------------------

    def process_response(self, request: Request, response: Response) -> Response:
        wire = measured_bytes(request.meta)
        if wire is None:
            wire = request_wire_bytes(request) + wire_bytes(response)
        failed = response.status in self.bad_statuses or response.status == 429 or response.status >= 500
        outcome = "failed" if failed else ("not_modified" if response.status == 304 else "full")
        bad = response.status in self.bad_statuses
        billed = self._measure(request, outcome, wire)
        if not failed:
            request.meta[M.BILLED] = float(request.meta.get(M.BILLED) or 0.0) + billed
            request.meta[M.WIRE_BYTES] = wire
        if response.status == 304 and M.VALIDATORS_FOR in request.meta:
            self._book({f"unchanged:{self._page_type(request) or '-'}": 1.0})
        retry_after = retry_after_seconds(response.headers, self.runtime.clock.time()) if bad else None
        self._health(request, ok=not bad, reason=str(response.status), retry_after=retry_after)
        if response.status >= 400 and not (response.status in (404, 410) and request.meta.get(M.KNOWN)):
            self._check(request, response.status, "error", billed, wire)
        elif 300 <= response.status < 400 and response.status != 304:
            self._check(request, response.status, "redirected", billed, wire)
        return response

    def process_exception(self, request: Request, exception: BaseException) -> None:
        if not isinstance(exception, NETWORK_ERRORS):
            return  # IgnoreRequest and friends: nothing went over the wire
        wire = measured_bytes(request.meta)
        if wire is None:
            wire = 0 if isinstance(exception, NO_CONNECTION) else request_wire_bytes(request)
        billed = self._measure(request, "failed", wire)
        self._health(request, ok=False,
                     reason="timeout" if isinstance(exception, TIMEOUTS) else "connection",
                     retry_after=None)
        self._check(request, 0, "error", billed, wire)

    def _check(self, request: Request, status: int, outcome: str, billed: float, wire: int) -> None:
        """Log a fetch of a page that lands no observation as a check (module docstring)."""
        page_type = self._page_type(request)
        host = urlparse_cached(request).hostname
        if page_type is None or not host:
            return
        canonical = request.meta.get(M.CANONICAL_URL) or self.runtime.canonical(request.url) or request.url
        site = self.site.name if self.site is not None else self.runtime.spider_name
        event = EventArgs(site=site, page_type=page_type, url=request.url, status=status,
                          wire_bytes=wire)
        self.runtime.batch.land(host, check_op(canonical, time=self.runtime.clock.time(),
                                               outcome=outcome, billed=billed, event=event))

    # -- measurement -------------------------------------------------------------------------

    def _page_type(self, request: Request) -> str | None:
        page_type = request.meta.get(M.PAGE_TYPE)
        if page_type is None and self.site is not None:
            match = self.site.page_type_for(request.url)
            page_type = match.name if match is not None else None
        return page_type

    def _book(self, figures: dict[str, float]) -> None:
        cycle = self.runtime.cycle
        if cycle is None:
            self.stats.inc_value(STATS + "unbooked")
            return
        self.runtime.batch.ledger(cycle, figures)

    def _measure(self, request: Request, outcome: str, wire: int) -> float:
        """Book the attempt: stats, the spend bucket, the cycle ledger. Returns its cost."""
        billed = attempt_cost(self.billing, wire, failed=outcome == "failed")
        page_type = self._page_type(request) or "-"
        purpose = request.meta.get(M.PURPOSE) or "discovery"
        for key in ("total", f"total/{page_type}"):
            self.stats.inc_value(STATS + key, billed)  # type: ignore[arg-type]  # costs may be fractional
        self.stats.inc_value(STATS + "attempts")
        self.stats.inc_value(STATS + f"attempts/{outcome}")
        self.stats.inc_value(STATS + "wire_bytes", wire)
        self.runtime.spend.reconcile(request, billed)
        self._book({"booked": billed, f"spent:{purpose}": billed, f"fetches:{page_type}": 1.0,
                    f"cost:{page_type}": billed})
        return billed

    def _health(self, request: Request, *, ok: bool, reason: str, retry_after: float | None) -> None:
        host = urlparse_cached(request).hostname
        if not host:
            return
        if not ok:
            self.stats.inc_value(HEALTH + "bad")
            self.stats.inc_value(HEALTH + f"bad/{reason}")
        op = attempt_op(ok, retry_after=retry_after, base=self.backoff_base, maximum=self.backoff_max,
                        half_life=self.half_life, time=self.runtime.clock.time())
        hosts = self.runtime.hosts
        if not ok:
            # Held in this process at once: a request already popped for the host must not go
            # out before the crawl's queue has the hold (the next flush).
            hosts.hold(host, min(retry_after if retry_after is not None else self.backoff_base,
                                 self.backoff_max))

        def answered(reply: list[Any]) -> None:
            streak, previous, hold = int(reply[0] or 0), int(reply[1] or 0), float(reply[2] or 0)
            if ok:
                if previous:
                    self.stats.inc_value(HEALTH + "recovered")
                return
            self.stats.inc_value(HEALTH + "backoff")
            hosts.hold(host, hold)  # the streak's hold, as the queue keeps it
            if retry_after is not None:
                self.stats.inc_value(HEALTH + "backoff/retry_after")
            if host not in self._backed_off:
                self._backed_off.add(host)
                logger.info("Backing off %s for %.1f s (%s); more backoffs of this host are logged "
                            "with WEBCRAWL_COST_DEBUG = True", host, hold, reason)
            elif self.debug:
                logger.debug("Backing off %s for %.1f s (%s, %d in a row)", host, hold, reason, streak)

        self.runtime.batch.land(host, op, answered)

    def item_verdict(self, item: Any) -> None:
        """``item_scraped`` / ``item_dropped``: a page's verdict (new, changed, unchanged, suspect,
        removed, gone, error)
        as the record-hash pipeline judged it, counted in the current cycle's figures: from the
        page item, or from the change event the feed got instead of it."""
        if isinstance(item, PageItem) and item.change is not None:
            self._book({f"{item.change}:{item.page_type or '-'}": 1.0})
        elif isinstance(item, ChangeEvent) and item.verdict is not None:
            self._book({f"{item.verdict}:{item['page_type'] or '-'}": 1.0})


class _Seen:
    """A bounded set (oldest forgotten first): hosts whose first backoff was logged."""

    def __init__(self, size: int) -> None:
        from collections import OrderedDict

        self.size = size
        self._data: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def add(self, key: str) -> None:
        self._data[key] = None
        if len(self._data) > self.size:
            self._data.popitem(last=False)
