"""webcrawl's download handler for http and https: Scrapy's HTTP/1.1 handler, with the three things
a guarded crawl needs at the moment a download starts.

- **This crawler's allowance.** Connections are opened inside
  :func:`~webcrawl.net.resolver.connecting_for` with this crawler's own address policy, so the
  :class:`~webcrawl.net.resolver.GuardedResolver` judges each connection's addresses by it (two
  crawlers of one process never lend each other their allowed networks). With the guard off
  (``WEBCRAWL_SSRF_ENABLED = False``) that policy allows every address but cloud metadata.
- **No unchecked route.** A request sent through a proxy (``meta["proxy"]``, whoever set it) is
  refused while the SSRF guard is on: the proxy would resolve the host name itself, where no check
  reaches. ``WEBCRAWL_SSRF_ACCEPT_UNCHECKED = True`` accepts that risk (literal IPs are still
  checked by the guard middleware). Refusals raise :class:`ProxyRefused` (an ``IgnoreRequest``)
  and count ``ssrf/refused`` and ``ssrf/refused/proxy``.
- **Bounded stops.** Downloads in flight are known; :meth:`GuardedDownloadHandler.cancel_all`
  (called on :data:`webcrawl.stopping.grace_over`) cancels them: their connections are cut and
  each fails with :class:`~webcrawl.stopping.Cancelled`, its request marked as given back.

Everything else, including ``DOWNLOAD_TIMEOUT`` as a deadline on the whole answer (a body sent a
byte now and then is cut at the deadline too), is Scrapy's handler unchanged.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from webcrawl import stopping
from webcrawl.net._imports import import_http11
from webcrawl.net.addresses import AddressPolicy, parse_networks
from webcrawl.net.resolver import connecting_for

if TYPE_CHECKING:
    from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from twisted.internet.defer import Deferred
else:
    HTTP11DownloadHandler = import_http11().HTTP11DownloadHandler

logger = logging.getLogger(__name__)

__all__ = ["GuardedDownloadHandler", "ProxyRefused"]


class ProxyRefused(IgnoreRequest):
    """A request through a proxy, refused while the SSRF guard is on."""


class GuardedDownloadHandler(HTTP11DownloadHandler):
    """See the module docstring."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        guarded = settings.getbool("WEBCRAWL_SSRF_ENABLED", True)
        # With the guard off, every address but the cloud metadata ones (never allowed).
        allowed = (parse_networks(settings.getlist("WEBCRAWL_ALLOWED_PRIVATE_NETWORKS"))
                   if guarded else ("0.0.0.0/0", "::/0"))
        self.policy = AddressPolicy(allowed)
        self.refuse_proxies = guarded and not settings.getbool("WEBCRAWL_SSRF_ACCEPT_UNCHECKED")
        self.stats = crawler.stats
        self._inflight: dict[int, tuple[Request, Deferred[Response]]] = {}
        self._cancelling = False
        # Cut-short bodies get one WARNING each from webcrawl's hostile-answer middleware; the
        # handler's own (once per crawl, pointing at DOWNLOAD_FAIL_ON_DATALOSS) would double it.
        self._fail_on_dataloss_warned = True
        crawler.signals.connect(self.cancel_all, signal=stopping.grace_over)

    async def download_request(self, request: Request) -> Response:
        if self.refuse_proxies and request.meta.get("proxy"):
            if self.stats is not None:
                self.stats.inc_value("ssrf/refused")
                self.stats.inc_value("ssrf/refused/proxy")
            raise ProxyRefused(f"SSRF guard: {request.url} would go through the proxy "
                               f"{request.meta['proxy']!r}, which resolves names unchecked")
        if self._cancelling:
            stopping.give_back(request)
            raise stopping.Cancelled("the crawl is stopping")
        # The download runs as its own task, created inside the block: it carries this
        # crawler's policy to the resolver, and it can be cancelled from cancel_all().
        with connecting_for(self.policy):
            download = deferred_from_coro(super().download_request(request))
        key = id(request)
        self._inflight[key] = (request, download)
        try:
            return await maybe_deferred_to_future(download)
        except BaseException:
            if request.meta.get(stopping.GIVEN_BACK):
                raise stopping.Cancelled("the crawl is stopping: download cancelled") from None
            raise
        finally:
            self._inflight.pop(key, None)

    def cancel_all(self) -> int:
        """Cancel every download in flight (their requests marked as given back) and any that
        starts later; returns how many were cancelled."""
        self._cancelling = True
        cancelled = 0
        for request, download in list(self._inflight.values()):
            stopping.give_back(request)
            download.cancel()
            cancelled += 1
        if cancelled:
            logger.info("Cancelled %d download(s) still running at the end of the stop's grace "
                        "period", cancelled)
            if self.stats is not None:
                self.stats.inc_value("webcrawl/stop/cancelled", cancelled)
        return cancelled

    @property
    def in_flight(self) -> int:
        return len(self._inflight)
