"""Downloader middleware obeying robots.txt per RFC 9309; replaces Scrapy's RobotsTxtMiddleware
(which fails open and never expires its answers). See docs/robots-and-safety.md.

Contract: a request whose origin's robots.txt disallows it raises ``IgnoreRequest``. Answers come
from the crawl's cache (:class:`~webcrawl.robots.cache.RobotsCache`: Redis, in the host's shard,
with an in-process LRU); on a miss ``/robots.txt`` is fetched once per origin per process through
``engine.download_async`` (every downloader middleware: the robots.txt fetch takes the host's
turn like any request, redirects 5 to 10 hops, ``meta["webcrawl_purpose"] = "robots"``), and the
requests that waited for it go on through the host spacing middleware, which keeps them a delay
apart from it and from each other. RFC 9309 status rules apply (:func:`verdict_for_response`).

Redirects of robots.txt are followed only while they stay on the site's allowed domains: every
hop passes the SSRF guard middleware, which refuses a hop outside them before connecting
(:class:`~webcrawl.net.scope.OffsiteRefused`). robots.txt then counts as unavailable (allow all,
kept like a 4xx answer), with the stat ``robotstxt/offsite_redirect`` and one WARNING naming the
hop. A fetch cut short because the crawl is stopping caches nothing, and the requests that waited
for it are given back (:mod:`webcrawl.stopping`), not refused.

A ``Crawl-delay`` raises the host's delay for every process (land operation "D" in the host's
shard) and for this process at once (:meth:`HostStore.note_delay`), before any request that waited
for the answer goes on: the delay holds from the first request after robots.txt. ``Sitemap:``
lines naming sitemaps on the site's allowed hosts are read (through the seen filter: once; the
allocator schedules their later readings). Requests with ``meta["dont_obey_robotstxt"]`` are not
checked.

Stats: ``robotstxt/request_count``, ``robotstxt/response_count``,
``robotstxt/response_status_count/{status}``, ``robotstxt/exception_count/{exception}``,
``robotstxt/forbidden``, ``robotstxt/cache/hit``, ``robotstxt/cache/miss``,
``robotstxt/sitemaps`` (sitemaps found in robots.txt and scheduled), ``robotstxt/offsite_redirect``
(robots.txt redirected outside the allowed domains: read as unavailable).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Request
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import CancelledError, Deferred

from webcrawl import meta as M
from webcrawl import stopping
from webcrawl.net.scope import OffsiteRefused
from webcrawl.robots.cache import RobotsCache, origin_of
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.hosts import delay_op
from webcrawl.robots.policy import (
    MAX_CACHE_SECONDS,
    MIN_PARSE_BYTES,
    RobotsPolicy,
    Verdict,
    product_token,
    verdict_for_error,
    verdict_for_response,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

DelaySetter = Callable[[str, float], None]
Downloader = Callable[[Request], "Awaitable[Response]"]
SitemapSink = Callable[[str, list[str]], None]  # origin, sitemap URLs of its robots.txt

class RobotsMiddleware:
    """Refuse (``IgnoreRequest``) requests that robots.txt disallows; see the module docstring."""

    def __init__(self, cache: RobotsCache, stats: StatsCollector, *, user_agent: str | None,
                 default_user_agent: str, ttl: float = MAX_CACHE_SECONDS,
                 error_ttl: float = 300.0, max_bytes: int = MIN_PARSE_BYTES,
                 max_redirects: int = 5, max_crawl_delay: float = 60.0,
                 delay_setter: DelaySetter | None = None, download: Downloader | None = None,
                 sitemaps: SitemapSink | None = None) -> None:
        if not 5 <= max_redirects <= 10:
            raise ValueError(f"WEBCRAWL_ROBOTS_MAX_REDIRECTS={max_redirects!r}: expected 5 to 10 "
                             "(RFC 9309 asks for at least five)")
        if max_bytes < MIN_PARSE_BYTES:
            raise ValueError(f"WEBCRAWL_ROBOTS_MAX_BYTES={max_bytes!r}: expected at least "
                             f"{MIN_PARSE_BYTES} (RFC 9309 asks for at least 500 KiB)")
        if not 0 < error_ttl <= ttl <= MAX_CACHE_SECONDS:
            raise ValueError(f"WEBCRAWL_ROBOTS_ERROR_CACHE_SECONDS={error_ttl!r} and "
                             f"WEBCRAWL_ROBOTS_CACHE_SECONDS={ttl!r}: expected "
                             f"0 < error <= cache <= {MAX_CACHE_SECONDS:.0f}")
        self.cache = cache
        self.stats = stats
        self.user_agent = user_agent
        self.default_user_agent = default_user_agent
        self.ttl = ttl
        self.error_ttl = error_ttl
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.max_crawl_delay = max_crawl_delay
        self.delay_setter = delay_setter
        self.download = download
        self.sitemaps = sitemaps
        self._pending: dict[str, Deferred[RobotsPolicy | None]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_ROBOTS_ENABLED", True):
            raise NotConfigured("robots.txt is not obeyed: set WEBCRAWL_ROBOTS_ENABLED = True")
        if settings.getbool("ROBOTSTXT_OBEY"):
            raise ValueError("ROBOTSTXT_OBEY=True turns on Scrapy's RobotsTxtMiddleware next to "
                             "webcrawl's: set ROBOTSTXT_OBEY = False")
        runtime = CrawlRuntime.of(crawler)

        def engine_download(request: Request) -> Awaitable[Response]:
            assert crawler.engine is not None
            return crawler.engine.download_async(request)

        def set_delay(host: str, seconds: float) -> None:
            runtime.hosts.note_delay(host, seconds)
            runtime.batch.land(host, delay_op(max(seconds, runtime.config.domain_delay)))

        def schedule_sitemaps(origin: str, urls: list[str]) -> None:
            spider, site = crawler.spider, runtime.site
            make = getattr(spider, "sitemap_request", None)
            if site is None or make is None or crawler.engine is None:
                return
            for url in urls:
                host = urlparse_cached(Request(url)).hostname or ""
                if site.allows_host(host):
                    crawler.engine.crawl(make(url))
                    runtime.stats.inc_value("robotstxt/sitemaps")

        return cls(
            runtime.robots, crawler.stats,
            delay_setter=set_delay,
            user_agent=settings.get("WEBCRAWL_ROBOTS_USER_AGENT") or None,
            default_user_agent=settings.get("USER_AGENT") or "",
            ttl=settings.getfloat("WEBCRAWL_ROBOTS_CACHE_SECONDS", MAX_CACHE_SECONDS),
            error_ttl=settings.getfloat("WEBCRAWL_ROBOTS_ERROR_CACHE_SECONDS", 300.0),
            max_bytes=settings.getint("WEBCRAWL_ROBOTS_MAX_BYTES", MIN_PARSE_BYTES),
            max_redirects=settings.getint("WEBCRAWL_ROBOTS_MAX_REDIRECTS", 5),
            max_crawl_delay=settings.getfloat("WEBCRAWL_ROBOTS_MAX_CRAWL_DELAY_SECONDS", 60.0),
            download=engine_download, sitemaps=schedule_sitemaps,
        )

    def token_for(self, request: Request) -> str:
        """The product token matched against robots.txt groups for this request."""
        if self.user_agent:
            return product_token(self.user_agent)
        header = request.headers.get(b"User-Agent")
        return product_token(header.decode("latin-1") if header else self.default_user_agent)

    async def process_request(self, request: Request) -> None:
        if request.meta.get("dont_obey_robotstxt"):
            return
        origin = origin_of(request)
        if origin is None:
            return
        policy, source = self.cache.lookup(origin)
        if policy is None:
            self.stats.inc_value("robotstxt/cache/miss")
            policy = await self._policy_for(origin, request)
            if policy is None:  # the crawl is stopping: no answer, the request was not fetched
                stopping.give_back(request)
                raise stopping.Cancelled("the crawl is stopping: robots.txt not read")
        else:
            self.stats.inc_value("robotstxt/cache/hit")
            if source == "redis":  # first use in this process: the crawl may not know the delay
                self._report_crawl_delay(origin, policy, request)
        if not policy.allowed(request.url, self.token_for(request)):
            logger.debug("Forbidden by robots.txt: %(request)s", {"request": request})
            self.stats.inc_value("robotstxt/forbidden")
            raise IgnoreRequest("Forbidden by robots.txt")

    async def _policy_for(self, origin: str, request: Request) -> RobotsPolicy | None:
        """Wait for the origin's answer, fetching it unless another request already is; None
        when the crawl is stopping and no answer came. The caller has just looked in the cache
        (this process's and Redis's) and found nothing: no second look here."""
        pending = self._pending.get(origin)
        if pending is not None:
            return await maybe_deferred_to_future(_follow(pending))
        pending = self._pending[origin] = Deferred()
        # What waiting requests get if this fetch dies (cancelled, Redis down): "unreachable".
        policy: RobotsPolicy | None = RobotsPolicy.disallow_all()
        try:
            verdict = await self._fetch(origin, turn_taken=M.LEASE in request.meta)
            if verdict is None:
                policy = None
                return None
            self.cache.put(origin, verdict)
            policy = verdict.policy
            if self.sitemaps is not None and policy.sitemaps():
                self.sitemaps(origin, policy.sitemaps())
            # The delay is known before any request that waited goes on.
            self._report_crawl_delay(origin, policy, request)
        finally:
            del self._pending[origin]
            pending.callback(policy)
        return policy

    async def _fetch(self, origin: str, *, turn_taken: bool = False) -> Verdict | None:
        """The answer of the origin's robots.txt; None when the crawl is stopping.

        ``turn_taken``: the request waiting for it was popped from the crawl's queue, and so took
        the host's turn; the robots.txt fetch goes in that turn, at once, and the request goes the
        host's delay after it (the spacing middleware). Claiming a turn of its own would make it
        wait the delay first, holding a downloader slot, and the request behind it a second time:
        on a crawl of many new hosts, most slots then waited and few fetched."""
        if self.download is None:
            raise RuntimeError("RobotsMiddleware has no downloader: build it with from_crawler")
        robots_request = Request(
            f"{origin}/robots.txt",
            priority=1000,
            callback=NO_CALLBACK,
            dont_filter=True,
            meta={
                "dont_obey_robotstxt": True,
                "webcrawl_purpose": "robots",
                "redirect_ttl": self.max_redirects,
                "dont_retry": True,  # a failure is cached for error_ttl, then fetched again
                M.TURN_TAKEN: turn_taken,
            },
        )
        self.stats.inc_value("robotstxt/request_count")
        try:
            response = await self.download(robots_request)
        except OffsiteRefused as exc:
            # A hop outside the allowed domains, refused before connecting: the site's
            # robots.txt is not on the site, so it is unavailable (RFC 9309 2.3.1.2).
            self.stats.inc_value("robotstxt/offsite_redirect")
            logger.warning("robots.txt of %s redirects (hop %d) to %s, outside the allowed "
                           "domains: read as unavailable (allow all); add %s to the site's "
                           "allowed_domains to follow it", origin, exc.hops, exc.url, exc.host)
            return Verdict(RobotsPolicy.allow_all(), self.ttl, None)
        except (stopping.Cancelled, CancelledError, RuntimeError) as exc:
            # The crawl is stopping (download cancelled or given back, no open spider): this
            # says nothing about the site, so nothing is cached and the requests are given back.
            self.stats.inc_value(f"robotstxt/exception_count/{type(exc).__name__}")
            return None
        except Exception as exc:  # every other failure means "unreachable": disallow for a while
            self.stats.inc_value(f"robotstxt/exception_count/{type(exc).__name__}")
            logger.debug("robots.txt of %s unreachable: %r", origin, exc)
            return verdict_for_error(error_ttl=self.error_ttl)
        self.stats.inc_value("robotstxt/response_count")
        self.stats.inc_value(f"robotstxt/response_status_count/{response.status}")
        return verdict_for_response(response.status, response.body, ttl=self.ttl,
                                    error_ttl=self.error_ttl, max_bytes=self.max_bytes)

    def _report_crawl_delay(self, origin: str, policy: RobotsPolicy, request: Request) -> float:
        delay = policy.crawl_delay(self.token_for(request))
        if delay is None or delay <= 0:
            return 0.0
        delay = min(delay, self.max_crawl_delay)
        host = urlparse_cached(request).hostname or origin
        self.on_crawl_delay(host.lower(), delay)
        return delay

    def on_crawl_delay(self, domain: str, seconds: float) -> None:
        """robots.txt asks ``domain`` (lower-case host, no port) to be fetched at most once per
        ``seconds`` (already capped). Calls the delay setter, if one was given."""
        if self.delay_setter is not None:
            self.delay_setter(domain, seconds)


def _follow(pending: Deferred[Any]) -> Deferred[Any]:
    """A Deferred firing with ``pending``'s result, leaving ``pending`` itself untouched."""
    follower: Deferred[Any] = Deferred()

    def relay(result: Any) -> Any:
        follower.callback(result)
        return result

    pending.addCallback(relay)
    return follower
