"""Conditional requests: If-None-Match / If-Modified-Since to hosts that earned trust in their
validators (see docs/change-detection.md).

``process_request``: a revisit of a known page (its stored validators came with it when the
scheduler popped it: ``meta["webcrawl_validators"]``) to a host whose trust allows it (the host's
:class:`~webcrawl.change.ValidatorTrust`, or the site file's ``[trust]`` rule ``always`` /
``never``) gets them. Requests with ``meta["webcrawl_conditional"] = False`` or their own
conditional headers are left alone, and so are robots.txt and sitemap fetches; a redirected
request drops validators that belonged to the URL before the redirect. No Redis read.

``process_response`` (place it above RedirectMiddleware and HttpCompressionMiddleware, e.g. 650,
so it sees every hop with its body as sent on the wire):

- a 304 to our validators is the observation "unchanged": recorded in the page's record (land
  operation "O", a 304, with what the fetch cost), then :class:`NotModified` (an
  ``IgnoreRequest``) ends the request: nothing is parsed or stored, nothing is logged. Unless it is
  *verified*: for a learning host every 304, for a trusted one
  ``WEBCRAWL_CONDITIONAL_VERIFY_SHARE`` of them, the request goes back to the scheduler without
  validators, carrying the time of the 304 (``meta["webcrawl_verify_304"]``: the answer's own
  ``Date`` when it has one); the record-hash pipeline judges what comes back against that time,
  so a record that changed after the 304 does not make an honest host a liar;
- every other response goes on; ``meta["webcrawl_validators_for"]`` tells the pipeline that our
  validators went with it.

Stats: ``webcrawl/conditional/sent``, ``.../skipped`` and ``.../skipped/{untrusted,never,no_validators}``,
``.../not_modified``, ``.../modified`` (200 to our validators), ``.../verification``,
``.../wire_bytes``.
"""

from __future__ import annotations

import logging
import random
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.httpobj import urlparse_cached

from webcrawl import meta as M
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.hosts import validator_op
from webcrawl.state.pagestore import EventArgs, check_op, observe_op
from webcrawl.wire import wire_bytes

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

__all__ = ["ConditionalRequestMiddleware", "NotModified", "http_date"]

VALIDATOR_HEADERS = (b"If-None-Match", b"If-Modified-Since")
#: Requests that are never pages of their own (no record, no item): left alone.
SKIP_PURPOSES = frozenset({"robots", "sitemap"})
STATS = "webcrawl/conditional/"
VERIFY_PRIORITY = 25_000  # above every page, below robots.txt (the priority middleware's bands)


class NotModified(IgnoreRequest):
    """The server answered 304 to our validators: the page is unchanged, nothing to parse."""


def http_date(value: bytes | str | None) -> float | None:
    """An HTTP date header as seconds since the epoch, ``None`` when absent or unreadable."""
    if not value:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    try:
        return parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class ConditionalRequestMiddleware:
    """Send validators to trusted hosts, turn their 304s into observations; see the module docstring."""

    def __init__(self, runtime: CrawlRuntime, stats: StatsCollector, *, site: Any = None,
                 rng: random.Random | None = None, debug: bool = False) -> None:
        self.runtime = runtime
        self.stats = stats
        self.site = site
        self.policy = runtime.trust_policy()
        self.rng = rng or random.Random()
        self.debug = debug

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_CONDITIONAL_ENABLED", True):
            raise NotConfigured("conditional requests are off: set WEBCRAWL_CONDITIONAL_ENABLED = True")
        assert crawler.stats is not None
        runtime = CrawlRuntime.of(crawler)
        return cls(runtime, crawler.stats, site=runtime.site,
                   debug=settings.getbool("WEBCRAWL_CONDITIONAL_DEBUG", False))

    def _mode(self, host: str) -> str:
        trust = getattr(self.site, "trust", None)
        return trust.for_host(host).validators if trust is not None else "learn"

    def _skipped(self, reason: str) -> None:
        self.stats.inc_value(STATS + "skipped")
        self.stats.inc_value(STATS + "skipped/" + reason)

    def process_request(self, request: Request) -> None:
        meta = request.meta
        if (request.method not in ("GET", "HEAD") or meta.get(M.CONDITIONAL) is False
                or meta.get(M.PURPOSE) in SKIP_PURPOSES):
            return
        # The page the scheduler's validators belong to. A redirect copies the meta of the
        # request before it, so after one only the URL tells which page this is.
        owner = meta.get(M.CANONICAL_URL)
        canonical = (owner if owner and "redirect_urls" not in meta
                     else self.runtime.canonical(request.url))
        if M.VALIDATORS_FOR in meta:
            if meta[M.VALIDATORS_FOR] == canonical:
                return  # a retry of our own conditional request
            for name in VALIDATOR_HEADERS:  # a redirect carried another page's validators along
                request.headers.pop(name, None)
            del meta[M.VALIDATORS_FOR]
        if meta.get(M.VERIFY_304) or canonical is None or any(h in request.headers for h in VALIDATOR_HEADERS):
            return
        validators = meta.get(M.VALIDATORS) if owner == canonical else None
        if not validators or not any(validators):
            if meta.get(M.KNOWN):
                self._skipped("no_validators")
            return
        host = urlparse_cached(request).hostname or ""
        mode = self._mode(host)
        if mode == "never":
            self._skipped("never")
            return
        if mode != "always" and not self.runtime.hosts.validators(host).sends_validators(
                self.runtime.clock.time(), self.policy):
            self._skipped("untrusted")
            return
        etag, modified = validators
        if etag:
            request.headers[b"If-None-Match"] = etag
        if modified:
            request.headers[b"If-Modified-Since"] = modified
        meta[M.VALIDATORS_FOR] = canonical
        self.stats.inc_value(STATS + "sent")

    def _check(self, request: Request, canonical: str, host: str, now: float, size: int) -> None:
        """Log a 304 handed on to its verification as a check of its own (it lands nothing). Its
        cost is booked with the verification that follows, as the page's record books it."""
        site = self.runtime.site
        event = EventArgs(site=site.name if site is not None else self.runtime.spider_name,
                          page_type=request.meta.get(M.PAGE_TYPE) or "", url=request.url,
                          status=304, wire_bytes=size)
        self.runtime.batch.land(host, check_op(canonical, time=now, outcome="not_modified",
                                               event=event))

    def process_response(self, request: Request, response: Response) -> Request | Response:
        if request.meta.get(M.PURPOSE) in SKIP_PURPOSES:
            return response
        size = wire_bytes(response) + int(request.meta.get(M.WIRE_BYTES_BEFORE, 0))
        self.stats.inc_value(STATS + "wire_bytes", size)
        canonical = request.meta.get(M.VALIDATORS_FOR)
        if canonical is None or response.status != 304:
            if canonical is not None and response.status == 200:
                self.stats.inc_value(STATS + "modified")
            return response
        self.stats.inc_value(STATS + "not_modified")
        host = urlparse_cached(request).hostname or ""
        trust = self.runtime.hosts.validators(host)
        now = self.runtime.clock.time()
        if self._mode(host) != "always" and self.rng.random() < trust.verify_share(self.policy):
            self.stats.inc_value(STATS + "verification")
            if self.debug:
                logger.debug("304 for %s: verifying it without validators", request.url)
            headers = request.headers.copy()
            for name in VALIDATOR_HEADERS:
                headers.pop(name, None)
            meta = {k: v for k, v in request.meta.items() if k != M.VALIDATORS_FOR}
            meta[M.VERIFY_304] = http_date(response.headers.get(b"Date")) or now
            meta[M.WIRE_BYTES_BEFORE] = size
            self._check(request, canonical, host, now, size)  # this fetch, as the server answered
            # First in its host's queue: the check is worth most right after the 304.
            return request.replace(headers=headers, meta=meta, dont_filter=True,
                                   priority=VERIFY_PRIORITY)
        billed = request.meta.get(M.BILLED)
        page_type = request.meta.get(M.PAGE_TYPE)
        site = self.runtime.site
        # A 304 of a removed page shows it is there again: its "restored" event needs these.
        event = EventArgs(site=site.name if site is not None else self.runtime.spider_name,
                          page_type=page_type or "", url=request.url, status=304,
                          wire_bytes=request.meta.get(M.WIRE_BYTES))
        self.runtime.batch.land(host, observe_op(
            canonical, full=False, time=now, type_id=self.runtime.types.id(page_type),
            billed=float(billed) if billed is not None else None, event=event))
        if trust.state != "distrusted" and trust.ignored_run:
            self.runtime.batch.land(host, validator_op("not_modified", now, self.policy))
            self.runtime.hosts.forget_validators(host)
        if self.debug:
            logger.debug("304 for %s: unchanged", request.url)
        raise NotModified(f"304 Not Modified: {request.url} is unchanged")
