"""Downloader middleware of the SSRF guard: the crawler never connects to loopback, private,
link-local, multicast, reserved or cloud-metadata addresses unless the crawl allows those networks
(``WEBCRAWL_ALLOWED_PRIVATE_NETWORKS``, a list of CIDRs; a site file's allowance ends up there).

Two checks, both at the last moment before a connection:

- hosts written as IP addresses are checked here, in ``process_request``; a redirected request
  passes the downloader middlewares again, so a redirect to ``http://127.0.0.1/`` is refused too;
- host names are checked on the addresses they resolve to, by :class:`GuardedResolver` when the
  connection is made (so DNS rebinding does not get through). This middleware makes sure that
  resolver is installed on the reactor, widens it by this crawler's allowance, turns its refusals
  (which surface as DNS lookup errors) into ``IgnoreRequest`` before RetryMiddleware retries them,
  and refuses further requests to a refused name for a minute without another lookup.

Schemes other than http and https are refused as ``scheme`` (the file, data, ftp and s3 handlers
should be off as well). Requests sent through a proxy are checked on their literal IP only: the
proxy resolves the name.

Stats: ``ssrf/refused`` and ``ssrf/refused/{reason}`` with the reasons of
:mod:`webcrawl.net.addresses` (``loopback``, ``private``, ``link_local``, ``metadata``,
``multicast``, ``reserved``, ``unspecified``, ``invalid``) and ``scheme``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import CannotResolveHostError, IgnoreRequest, NotConfigured
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.reactor import is_reactor_installed
from twisted.internet.error import DNSLookupError

from webcrawl.net.addresses import AddressPolicy, literal_address, parse_networks
from webcrawl.net.resolver import GuardedResolver

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

SCHEMES = frozenset({"http", "https"})


class SSRFGuardMiddleware:
    """Refuse requests that would connect to a refused address; see the module docstring."""

    def __init__(self, policy: AddressPolicy, stats: StatsCollector) -> None:
        self.policy = policy
        self.stats = stats
        self._guard: GuardedResolver | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("WEBCRAWL_SSRF_ENABLED", True):
            raise NotConfigured("the SSRF guard is off: set WEBCRAWL_SSRF_ENABLED = True")
        networks = parse_networks(settings.getlist("WEBCRAWL_ALLOWED_PRIVATE_NETWORKS"))
        return cls(AddressPolicy(networks), crawler.stats)

    def guard(self) -> GuardedResolver | None:
        """The reactor's guarded resolver, installed (wrapping the current one) if missing."""
        if not is_reactor_installed():
            return None  # no Twisted reactor: nothing connects through it
        from twisted.internet import reactor

        current = reactor.nameResolver  # type: ignore[attr-defined]
        if current is not self._guard:
            if not isinstance(current, GuardedResolver):
                logger.info("TWISTED_DNS_RESOLVER is not webcrawl's GuardedResolver: wrapping "
                            "%r so that host names are checked when connecting", current)
                current = GuardedResolver(reactor, AddressPolicy(), current)
                current.install_on_reactor()
            current.allow(self.policy.allowed)
            self._guard = current
        return self._guard

    def process_request(self, request: Request) -> None:
        # First, before any connection: the resolver must know this crawl's allowance. Scrapy
        # resolves literal addresses through it too, so returning early for them below would
        # leave the first connections judged by an empty allowance.
        guard = self.guard()
        parts = urlparse_cached(request)
        if parts.scheme not in SCHEMES:
            self._refuse(request, "scheme", parts.scheme)
        host = parts.hostname or ""
        address = literal_address(host)
        if address is not None:
            reason = self.policy.refusal(address)
            if reason is not None:
                self._refuse(request, reason, host)
            return
        refusal = guard.recent_refusal(host) if guard is not None else None
        if refusal is not None:
            reasons = [r for r in map(self.policy.refusal, refusal.addresses) if r is not None]
            if reasons:
                self._refuse(request, reasons[0], host)

    def process_exception(self, request: Request, exception: Exception) -> None:
        if not isinstance(exception, (CannotResolveHostError, DNSLookupError)):
            return
        host = urlparse_cached(request).hostname or ""
        guard = self.guard()
        refusal = guard.recent_refusal(host) if guard is not None else None
        if refusal is not None:
            self._refuse(request, refusal.reason, host)

    def _refuse(self, request: Request, reason: str, host: str) -> None:
        self.stats.inc_value("ssrf/refused")
        self.stats.inc_value(f"ssrf/refused/{reason}")
        logger.debug("SSRF guard refused %(request)s: %(host)s is %(reason)s",
                     {"request": request, "host": host, "reason": reason})
        raise IgnoreRequest(f"SSRF guard: {host} is {reason}")
