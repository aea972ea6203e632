"""A spider's requests the crawl refused to fetch: why, and a note so the URL is tried again.

The SSRF guard and the robots middleware refuse a request by raising ``IgnoreRequest`` in the
downloader, after the scheduler marked its URL seen. The spiders' errback hands every failure to
:meth:`Refusals.failed`, which recognises those two refusals and, for a request that went through
the seen filter, notes the URL in the crawl state (:mod:`webcrawl.state.refused`): the next time
the URL is met (a seed at the next run, a link, a sitemap entry) it is queued again, and fetched
once the reason is gone. Other failures pass untouched; the errback returns every failure, so
Scrapy logs download errors as it would without it.

Recognised refusals (the middlewares' messages): ``SSRF guard: <host> is <reason>``
(:mod:`webcrawl.middlewares.ssrf`) and ``Forbidden by robots.txt``
(:mod:`webcrawl.middlewares.robots`). A robots.txt refusal is "unreachable" when the stored answer
of the origin is the disallow-all kept after a failed fetch (a network error, a 5xx or a 429),
"disallowed" otherwise.

Stats: ``webcrawl/refused/noted`` (URLs noted for another try), ``webcrawl/refused/noted/ssrf``,
``webcrawl/refused/noted/robots`` (past ``WEBCRAWL_REFUSED_LIMIT`` notes a shard drops its
oldest), ``webcrawl/refused/robots_unreachable`` (requests refused because robots.txt
was unreachable) and ``webcrawl/refused/robots_until`` (when the latest of those answers expires,
seconds since the epoch): the closing note reads the last two.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest
from scrapy.utils.httpobj import urlparse_cached
from w3lib.url import canonicalize_url

from webcrawl.robots.cache import origin_of
from webcrawl.runtime import CrawlRuntime, refused_limit_of
from webcrawl.state.errors import StateError
from webcrawl.state.hosts import TimedCache
from webcrawl.state.refused import RefusedStore

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

__all__ = ["Refusals", "refusal_of"]

#: Origins whose robots.txt answer is remembered, and for how long (seconds).
ANSWERS_KEPT = 10_000
ANSWER_SECONDS = 60.0

logger = logging.getLogger(__name__)

SSRF_PREFIX = "SSRF guard: "
ROBOTS_MESSAGE = "Forbidden by robots.txt"
STATS = "webcrawl/refused/"


def refusal_of(failure: Failure) -> str | None:
    """``ssrf:<reason>`` or ``robots`` for a refusal by the SSRF guard or robots.txt, else None."""
    exc = failure.value
    if not isinstance(exc, IgnoreRequest):
        return None
    text = str(exc)
    if text.startswith(SSRF_PREFIX):
        return "ssrf:" + (text.rsplit(" is ", 1)[-1] if " is " in text else "refused")
    if text == ROBOTS_MESSAGE:
        return "robots"
    return None


def _unreachable(fields: dict[str, str] | None) -> bool:
    """Whether a stored robots.txt answer is the disallow-all kept after a failed fetch."""
    if not fields or fields.get("kind") != "disallow_all":
        return False
    status = fields.get("status", "")
    return status == "" or status == "429" or status.startswith("5")


class Refusals:
    """The refusal handling of one spider (see the module docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        settings = crawler.settings
        # Only webcrawl's scheduler reads the notes (its push script); another scheduler's
        # requests are counted, not noted.
        self.noting = settings.get("SCHEDULER", "").endswith("ReadyQueueScheduler")
        self.limit = refused_limit_of(settings)
        self._store: RefusedStore | None = None
        # origin -> its robots.txt answer was unreachable: bounded, and read again after
        # ANSWER_SECONDS (the stored answer expires and is fetched anew)
        self._answers = TimedCache(ANSWERS_KEPT, ANSWER_SECONDS)

    def _runtime(self) -> CrawlRuntime:
        return CrawlRuntime.of(self.crawler)

    @property
    def store(self) -> RefusedStore:
        if self._store is None:
            runtime = self._runtime()
            self._store = RefusedStore(runtime.client, runtime.scripts, runtime.layout,
                                       runtime.bloom.offsets_function(), limit=self.limit)
        return self._store

    def failed(self, failure: Failure) -> Failure:
        """Note and count a refusal; return ``failure`` unchanged in every case."""
        reason = refusal_of(failure)
        request: Request | None = getattr(failure, "request", None)
        if reason is None or request is None:
            return failure
        try:
            if reason == "robots":
                reason = self._robots_reason(request)
            if self.noting and not request.dont_filter:
                self._note(request, reason)
        except StateError as exc:  # Redis away: the URL stays seen, the crawl goes on
            logger.warning("Could not note the refused %s for another try: %s", request.url, exc)
        return failure

    def _robots_reason(self, request: Request) -> str:
        origin = origin_of(request)
        if origin is None or not self.noting:
            return "robots:disallowed"
        unreachable = self._answers.get(origin)
        if unreachable is None:
            store = self._runtime().robots.store
            fields = store.get(origin) if store is not None else None
            unreachable = self._answers.put(origin, _unreachable(fields))
            if unreachable and fields is not None:
                until = float(fields.get("expires") or 0)
                stats = self.crawler.stats
                assert stats is not None
                stats.max_value(STATS + "robots_until", until)
        if not unreachable:
            return "robots:disallowed"
        self._inc("robots_unreachable")
        return "robots:unreachable"

    def _note(self, request: Request, reason: str) -> None:
        host = (urlparse_cached(request).hostname or "-").lower()
        runtime = self._runtime()
        self.store.note(canonicalize_url(request.url), host, reason, runtime.clock.time())
        self._inc("noted")
        self._inc("noted/" + reason.split(":", 1)[0])

    def _inc(self, name: str) -> None:
        stats = self.crawler.stats
        assert stats is not None
        stats.inc_value(STATS + name)
