"""The connection guard: the one place that decides whether a request may go out at all, for
every request the crawl makes (pages, robots.txt, sitemaps, every redirect hop), whatever its
``dont_filter``. It replaces Scrapy's OffsiteMiddleware (which lets ``dont_filter`` requests and
their redirects through) and is the downloader half of the SSRF guard: the crawler never connects
to loopback, private, link-local, multicast, reserved or cloud-metadata addresses unless the
crawl allows those networks (``WEBCRAWL_ALLOWED_PRIVATE_NETWORKS``; a site file's allowance ends
up there), and never to a cloud-metadata address at all.

Each request is judged by :class:`webcrawl.net.scope.ConnectGate` with this crawler's own scope
(the spider's ``allowed_domains``) and address policy, when it enters the downloader middlewares;
a redirect is a new request, so every hop is judged before anything connects to it. Refused:

- schemes other than http and https (``ssrf/refused/scheme``), and http(s) URLs whose host or
  port cannot be read (``ssrf/refused/origin``): never passed on unchecked;
- hosts outside the allowed domains: ``offsite/refused`` and ``offsite/refused/{purpose}``
  (``robots``, ``sitemap``, ``discovery``, ``revisit``...), raised as
  :class:`~webcrawl.net.scope.OffsiteRefused`; also at scheduling, so a redirect off the site is
  not even queued;
- hosts written as refused IP addresses: ``ssrf/refused/{reason}``.

Host names are judged on the addresses they resolve to when the connection is made (so DNS
rebinding does not get through), with this crawler's allowance: by webcrawl's download handler's
own resolver (:mod:`webcrawl.net.dns`), which refuses the download itself (``ssrf/refused/{reason}``),
or, for Scrapy's own handlers, by the reactor's :class:`GuardedResolver` (:mod:`webcrawl.net.resolver`). This middleware makes sure the resolver is installed, turns its
refusals (DNS lookup errors) into ``IgnoreRequest`` with a stat before RetryMiddleware retries
them, and refuses further requests to a refused name for a minute without another lookup.

``WEBCRAWL_SSRF_ENABLED = False`` turns the address checks off (every address but cloud
metadata may be connected to); the scope still holds.

Fails closed. With the guard on, the crawl does not start (a ``ValueError`` naming the setting)
when a route would connect without the check: an http or https download handler other than
webcrawl's that does not resolve through the reactor's resolver (``DOWNLOAD_HANDLERS``), or,
with such a handler, an HTTP proxy from the environment (``http_proxy``/``https_proxy``, used by
HttpProxyMiddleware). webcrawl's handler judges a proxied request's host before sending it
(:mod:`webcrawl.net.handler`; the proxy resolves the name again itself: the documented limit).
``WEBCRAWL_SSRF_ACCEPT_UNCHECKED = True`` accepts those risks (literal IPs are still checked
here).

Stats: ``ssrf/refused`` and ``ssrf/refused/{reason}`` with the reasons of
:mod:`webcrawl.net.addresses` (``loopback``, ``private``, ``link_local``, ``metadata``,
``multicast``, ``reserved``, ``unspecified``, ``invalid``), ``scheme`` and ``origin``;
``offsite/refused`` and ``offsite/refused/{purpose}``.
"""

from __future__ import annotations

import logging
import urllib.request
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import CannotResolveHostError, IgnoreRequest
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import load_object
from scrapy.utils.reactor import is_reactor_installed
from twisted.internet.error import DNSLookupError

from webcrawl.net.addresses import AddressPolicy, literal_address, parse_networks
from webcrawl.net.resolver import GuardedResolver
from webcrawl.net.scope import ConnectGate, OffsiteRefused, Scope

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

#: Download handlers whose connections the guard judges: webcrawl's own (its resolver judges every
#: answer, and a proxied request's host before sending), and Scrapy's, which resolve through the
#: reactor's name resolver (webcrawl.net.resolver).
OWN_HANDLER = "webcrawl.net.handler.GuardedDownloadHandler"
CHECKED_HANDLERS = (OWN_HANDLER, "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler",
                    "scrapy.core.downloader.handlers.http2.H2DownloadHandler")
_ACCEPT = ("set WEBCRAWL_SSRF_ACCEPT_UNCHECKED = True to accept that risk, or "
           "WEBCRAWL_SSRF_ENABLED = False to turn the guard off")


def _importable(path: str) -> type:
    """The class at ``path``, or a class nothing subclasses when it cannot be imported (the
    HTTP/2 handler needs the optional ``h2`` package)."""
    try:
        return load_object(path)  # type: ignore[no-any-return]
    except ImportError:
        return type("Unavailable", (), {})


def unchecked_routes(settings: BaseSettings) -> list[str]:
    """What would connect without the guard's check, each as ``SETTING: why`` (empty: nothing)."""
    found = []
    handlers = {**settings.getdict("DOWNLOAD_HANDLERS_BASE"), **settings.getdict("DOWNLOAD_HANDLERS")}
    checked = tuple(_importable(path) for path in CHECKED_HANDLERS)
    own = _importable(OWN_HANDLER)
    proxies_checked = True
    for scheme in ("http", "https"):
        path = handlers.get(scheme)
        if path is None:
            continue
        handler = load_object(path) if isinstance(path, str) else path
        proxies_checked = proxies_checked and isinstance(handler, type) and issubclass(handler, own)
        if not (isinstance(handler, type) and issubclass(handler, checked)):
            name = path if isinstance(path, str) else f"{handler.__module__}.{handler.__qualname__}"
            found.append(f"DOWNLOAD_HANDLERS: the {scheme} handler {name} resolves host names "
                         "itself, where the SSRF guard's address check never runs")
    middlewares = {**settings.getdict("DOWNLOADER_MIDDLEWARES_BASE"),
                   **settings.getdict("DOWNLOADER_MIDDLEWARES")}
    proxy_mw = "scrapy.downloadermiddlewares.httpproxy.HttpProxyMiddleware"
    if (not proxies_checked and settings.getbool("HTTPPROXY_ENABLED", True)
            and middlewares.get(proxy_mw) is not None):
        proxies = {k: v for k, v in urllib.request.getproxies().items() if k in ("http", "https")}
        if proxies:
            found.append(f"HTTPPROXY_ENABLED: requests would go through the proxy "
                         f"{sorted(set(proxies.values()))[0]} (from the environment's "
                         f"{'/'.join(sorted(proxies))}_proxy), which resolves host names "
                         "unchecked; unset it or set HTTPPROXY_ENABLED = False")
    return found


class SSRFGuardMiddleware:
    """Refuse requests the crawl may not make; see the module docstring."""

    def __init__(self, policy: AddressPolicy, stats: StatsCollector,
                 scope: Scope | None = None, *, guarded: bool = True) -> None:
        self.policy = policy
        self.stats = stats
        self.guarded = guarded
        self.gate = ConnectGate(policy, scope)
        self._guard: GuardedResolver | None = None
        self._domains: tuple[str, ...] | None = None if scope is None else scope.domains
        self.crawler: Crawler | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        networks = parse_networks(settings.getlist("WEBCRAWL_ALLOWED_PRIVATE_NETWORKS"))
        guarded = settings.getbool("WEBCRAWL_SSRF_ENABLED", True)
        if guarded and not settings.getbool("WEBCRAWL_SSRF_ACCEPT_UNCHECKED"):
            unchecked = unchecked_routes(settings)
            if unchecked:
                raise ValueError(f"{unchecked[0]}; {_ACCEPT}")
        assert crawler.stats is not None
        # With the guard off, the scope still holds; addresses pass, cloud metadata excepted.
        policy = AddressPolicy(networks if guarded else ("0.0.0.0/0", "::/0"))
        middleware = cls(policy, crawler.stats, guarded=guarded)
        middleware.crawler = crawler
        crawler.signals.connect(middleware.request_scheduled, signal=signals.request_scheduled)
        return middleware

    def _scope(self) -> None:
        """Take the spider's allowed domains (once the spider exists; it may set them late)."""
        spider = self.crawler.spider if self.crawler is not None else None
        domains = tuple(getattr(spider, "allowed_domains", None) or ())
        if domains != self._domains:
            self._domains = domains
            self.gate.scope = Scope(domains)

    def guard(self) -> GuardedResolver | None:
        """The reactor's guarded resolver, installed (wrapping the current one) if missing;
        None with the guard off."""
        if not self.guarded or not is_reactor_installed():
            return None  # no Twisted reactor: nothing connects through it
        from twisted.internet import reactor

        current = reactor.nameResolver  # type: ignore[attr-defined]
        if current is not self._guard:
            if not isinstance(current, GuardedResolver):
                logger.info("TWISTED_DNS_RESOLVER is not webcrawl's GuardedResolver: wrapping "
                            "%r so that host names are checked when connecting", current)
                current = GuardedResolver(reactor, AddressPolicy(), current)
                current.install_on_reactor()
            # The fallback, for download handlers that do not say which crawler connects.
            current.allow(self.policy.allowed)
            self._guard = current
        return self._guard

    def request_scheduled(self, request: Request) -> None:
        """``request_scheduled``: a request outside the allowed domains (a redirect off the
        site) is not queued at all."""
        if self.crawler is not None and self._domains is None:
            self._scope()
        refusal = self.gate.refusal(urlparse_cached(request))
        if refusal is not None and refusal.family == "offsite":
            self._refuse_offsite(request, refusal.host)

    def process_request(self, request: Request) -> None:
        # First, before any connection: the resolver must know this crawl's allowance. Scrapy
        # resolves literal addresses through it too, so returning early for them below would
        # leave the first connections judged by an empty allowance.
        guard = self.guard()
        if self.crawler is not None and self._domains is None:
            self._scope()
        parts = urlparse_cached(request)
        refusal = self.gate.refusal(parts)
        if refusal is not None:
            if refusal.family == "offsite":
                self._refuse_offsite(request, refusal.host)
            self._refuse(request, refusal.reason, refusal.host)
        host = parts.hostname or ""
        if guard is None or literal_address(host) is not None:
            return
        refusal_seen = guard.recent_refusal(host)
        if refusal_seen is not None:
            reasons = [r for r in map(self.policy.refusal, refusal_seen.addresses) if r is not None]
            if reasons:
                self._refuse(request, reasons[0], host)

    def process_exception(self, request: Request, exception: Exception) -> None:
        if not isinstance(exception, (CannotResolveHostError, DNSLookupError)):
            return
        host = urlparse_cached(request).hostname or ""
        guard = self.guard()
        refusal = guard.recent_refusal(host, self.policy) if guard is not None else None
        if refusal is not None:
            self._refuse(request, refusal.reason, host)

    def _refuse(self, request: Request, reason: str, host: str) -> None:
        self.stats.inc_value("ssrf/refused")
        self.stats.inc_value(f"ssrf/refused/{reason}")
        logger.debug("SSRF guard refused %(request)s: %(host)s is %(reason)s",
                     {"request": request, "host": host, "reason": reason})
        raise IgnoreRequest(f"SSRF guard: {host} is {reason}")

    def _refuse_offsite(self, request: Request, host: str) -> None:
        purpose = request.meta.get("webcrawl_purpose") or "other"
        self.stats.inc_value("offsite/refused")
        self.stats.inc_value(f"offsite/refused/{purpose}")
        hops = len(request.meta.get("redirect_urls") or ())
        logger.debug("Refused %(request)s: %(host)s is outside the allowed domains (%(hops)d "
                     "redirects)", {"request": request, "host": host, "hops": hops})
        raise OffsiteRefused(request.url, host, hops)
