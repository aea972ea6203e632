"""Conditional requests: If-None-Match / If-Modified-Since from the page's history, to hosts that
earned trust in their validators (see docs/change-detection.md).

``process_request``: for a GET to a host whose trust allows it (:class:`ValidatorTrust`, or the
site file's ``[trust]`` rule: ``always`` / ``never``), adds the validators of the page's latest
whole response (history key: ``meta["webcrawl_canonical_url"]`` or the canonical form of the
URL). Requests with ``meta["webcrawl_conditional"] = False`` or their own conditional headers are
left alone, and so are robots.txt fetches (``meta["webcrawl_purpose"] = "robots"``); a redirected
request drops validators that belonged to the URL before the redirect.

``process_response`` (place it above RedirectMiddleware and HttpCompressionMiddleware, e.g. 650,
so it sees every hop with its body as sent on the wire):

- a 304 to our validators is the observation "unchanged": recorded in the page history (with its
  cost), then :class:`NotModified` (an ``IgnoreRequest``) ends the request: nothing is parsed or
  stored, and nothing is logged (an errback receives it). Unless it is *verified*: for a
  learning host every 304, for a trusted one ``WEBCRAWL_CONDITIONAL_VERIFY_SHARE`` of them, the
  request goes back to the scheduler without validators (``meta["webcrawl_verify_304"]``), and
  the record-hash pipeline compares what comes back with the stored record;
- every other response leaves a :class:`FetchNote` (wire bytes, conditional or not) for the
  record-hash pipeline, which judges the evidence and updates the trust.

Stats: ``webcrawl/conditional/sent``, ``.../skipped`` and ``.../skipped/{untrusted,never,no_validators}``,
``.../not_modified``, ``.../modified`` (200 to our validators), ``.../verification``,
``.../wire_bytes``.
"""

from __future__ import annotations

import logging
import random
import weakref
from dataclasses import dataclass
from http.client import responses as http_reasons
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.httpobj import urlparse_cached

from webcrawl.change import FetchNote, FetchNotes, TrustPolicy
from webcrawl.clock import SystemClock
from webcrawl.context import crawl_context
from webcrawl.parse import Canonicalizer
from webcrawl.state.history import HistoryStore
from webcrawl.state.trust import TrustStore

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from webcrawl.clock import Clock

logger = logging.getLogger(__name__)

__all__ = ["ChangeContext", "ConditionalRequestMiddleware", "NotModified", "change_context",
           "trust_policy"]

VALIDATOR_HEADERS = (b"If-None-Match", b"If-Modified-Since")
META_FOR = "webcrawl_validators_for"
META_VERIFY = "webcrawl_verify_304"
META_EXTRA = "webcrawl_wire_bytes_before"
#: Requests that are never pages of their own (no history, no item): left alone.
# robots.txt and sitemaps are no pages: no validators, no history, no fetch notes.
SKIP_PURPOSES = frozenset({"robots", "sitemap"})
STATS = "webcrawl/conditional/"


class NotModified(IgnoreRequest):
    """The server answered 304 to our validators: the page is unchanged, nothing to parse."""


def trust_policy(settings: BaseSettings) -> TrustPolicy:
    """The validator-trust thresholds from ``WEBCRAWL_CONDITIONAL_*`` (``ValueError`` naming them)."""
    try:
        return TrustPolicy(
            earn_after=settings.getint("WEBCRAWL_CONDITIONAL_EARN_AFTER", 3),
            ignore_limit=settings.getint("WEBCRAWL_CONDITIONAL_IGNORE_LIMIT", 3),
            lie_limit=settings.getint("WEBCRAWL_CONDITIONAL_LIE_LIMIT", 1),
            retry_seconds=settings.getfloat("WEBCRAWL_CONDITIONAL_RETRY_SECONDS", 7 * 86_400.0),
            verify_share=settings.getfloat("WEBCRAWL_CONDITIONAL_VERIFY_SHARE", 0.05),
        )
    except ValueError as exc:
        raise ValueError(f"WEBCRAWL_CONDITIONAL_* settings out of range: {exc}") from None


@dataclass
class ChangeContext:
    """What the conditional middleware and the change pipelines of one crawler share."""

    history: HistoryStore
    trust: TrustStore
    notes: FetchNotes
    canonicalizer: Canonicalizer


_contexts: weakref.WeakKeyDictionary[Crawler, ChangeContext] = weakref.WeakKeyDictionary()


def change_context(crawler: Crawler) -> ChangeContext:
    """The crawler's shared :class:`ChangeContext`, built on first use (needs ``crawler.spider``)."""
    context = _contexts.get(crawler)
    if context is None:
        client, keys = crawl_context(crawler).client, crawl_context(crawler).keys
        cache = crawler.settings.getfloat("WEBCRAWL_CONDITIONAL_TRUST_CACHE_SECONDS", 5.0)
        context = ChangeContext(
            HistoryStore(client, keys),
            TrustStore(client, keys, trust_policy(crawler.settings), SystemClock(), cache_seconds=cache),
            FetchNotes(),
            Canonicalizer(),
        )
        _contexts[crawler] = context
    return context


def wire_bytes(response: Response) -> int:
    """Bytes of the response as sent: status line, headers, body (still content-encoded here)."""
    size = 15 + len(http_reasons.get(response.status, ""))  # "HTTP/1.1 200 OK\r\n"
    for key, values in response.headers.items():
        size += sum(len(key) + len(v) + 4 for v in values)
    return size + 2 + len(response.body)


class ConditionalRequestMiddleware:
    """Send validators to trusted hosts, turn their 304s into observations; see the module docstring."""

    def __init__(self, context: ChangeContext, stats: StatsCollector, *, site: Any = None,
                 clock: Clock | None = None, rng: random.Random | None = None,
                 debug: bool = False) -> None:
        self.context = context
        self.stats = stats
        self.site = site
        self.clock = clock or SystemClock()
        self.rng = rng or random.Random()
        self.debug = debug

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_CONDITIONAL_ENABLED", True):
            raise NotConfigured("conditional requests are off: set WEBCRAWL_CONDITIONAL_ENABLED = True")
        assert crawler.stats is not None
        return cls(change_context(crawler), crawler.stats, site=getattr(crawler.spider, "site", None),
                   debug=settings.getbool("WEBCRAWL_CONDITIONAL_DEBUG", False))

    def _mode(self, host: str) -> str:
        trust = getattr(self.site, "trust", None)
        return trust.for_host(host).validators if trust is not None else "learn"

    def _skipped(self, reason: str) -> None:
        self.stats.inc_value(STATS + "skipped")
        self.stats.inc_value(STATS + "skipped/" + reason)

    def _canonical(self, request: Request) -> str | None:
        return request.meta.get("webcrawl_canonical_url") or self.context.canonicalizer.canonical(request.url)

    def process_request(self, request: Request) -> None:
        meta = request.meta
        if (request.method not in ("GET", "HEAD") or meta.get("webcrawl_conditional") is False
                or meta.get("webcrawl_purpose") in SKIP_PURPOSES):
            return
        canonical = self._canonical(request)
        if META_FOR in meta:
            if meta[META_FOR] == canonical:
                return  # a retry of our own conditional request
            for name in VALIDATOR_HEADERS:  # a redirect carried another page's validators along
                request.headers.pop(name, None)
            del meta[META_FOR]
        if meta.get(META_VERIFY) or canonical is None or any(h in request.headers for h in VALIDATOR_HEADERS):
            return
        host = urlparse_cached(request).hostname or ""
        mode = self._mode(host)
        if mode == "never":
            self._skipped("never")
            return
        if mode != "always" and not self.context.trust.get(host).sends_validators(
                self.clock.time(), self.context.trust.policy):
            self._skipped("untrusted")
            return
        etag, modified = self.context.history.validators(canonical)
        if not etag and not modified:
            self._skipped("no_validators")
            return
        if etag:
            request.headers[b"If-None-Match"] = etag
        if modified:
            request.headers[b"If-Modified-Since"] = modified
        meta[META_FOR] = canonical
        self.stats.inc_value(STATS + "sent")

    def process_response(self, request: Request, response: Response) -> Request | Response:
        if request.meta.get("webcrawl_purpose") in SKIP_PURPOSES:
            return response
        size = wire_bytes(response) + int(request.meta.get(META_EXTRA, 0))
        self.stats.inc_value(STATS + "wire_bytes", size)
        host = urlparse_cached(request).hostname or ""
        canonical = request.meta.get(META_FOR)
        if canonical is None or response.status != 304:
            self.context.notes.put(response.url, FetchNote(
                size, host, conditional=canonical is not None and response.status == 200,
                verifies_304=bool(request.meta.get(META_VERIFY))))
            if canonical is not None and response.status == 200:
                self.stats.inc_value(STATS + "modified")
            return response
        self.stats.inc_value(STATS + "not_modified")
        trust = self.context.trust.get(host)
        if self._mode(host) != "always" and self.rng.random() < trust.verify_share(self.context.trust.policy):
            self.stats.inc_value(STATS + "verification")
            if self.debug:
                logger.debug("304 for %s: verifying it without validators", request.url)
            headers = request.headers.copy()
            for name in VALIDATOR_HEADERS:
                headers.pop(name, None)
            meta = {k: v for k, v in request.meta.items() if k != META_FOR}
            meta[META_VERIFY], meta[META_EXTRA] = True, size
            return request.replace(headers=headers, meta=meta, dont_filter=True)
        self.context.history.observe(canonical, now=self.clock.time(), record_hash=None, cost=size,
                                     status=304)
        if trust.state != "distrusted" and trust.ignored_run:
            self.context.trust.observe(host, "not_modified")  # a 304 ends a run of ignored ones
        if self.debug:
            logger.debug("304 for %s: unchanged", request.url)
        raise NotModified(f"304 Not Modified: {request.url} is unchanged")
