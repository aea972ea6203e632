"""webcrawl's download handler for http and https: the asyncio HTTP/1.1 client
(:mod:`webcrawl.net.http1`), or Scrapy's HTTP/1.1 handler where that client does not go, with the
three things a guarded crawl needs at the moment a download starts.

Which client fetches: ``WEBCRAWL_HTTP_CLIENT = "asyncio"`` (the default) sends every request
through the asyncio client, except a request through a proxy (accepted below) or with a
``bindaddress`` in meta, a crawl with ``DOWNLOAD_BIND_ADDRESS``, and a crawl on a reactor that is
not asyncio's: those go through Scrapy's handler, as every request does with
``WEBCRAWL_HTTP_CLIENT = "twisted"``. Any other value stops the crawl at start-up naming the
setting.

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

Both clients take ``DOWNLOAD_TIMEOUT`` as a deadline on the whole answer (a body sent a byte now
and then is cut at the deadline too) and keep Scrapy's contract for sizes, data loss, signals and
errors.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from webcrawl import stopping
from webcrawl.net._imports import import_http11
from webcrawl.net.addresses import AddressPolicy, parse_networks
from webcrawl.net.http1 import Http1Client, tls_context
from webcrawl.net.resolver import connecting_for
from webcrawl.settingtypes import SettingError

if TYPE_CHECKING:
    from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from twisted.internet.defer import Deferred
else:
    HTTP11DownloadHandler = import_http11().HTTP11DownloadHandler

logger = logging.getLogger(__name__)

__all__ = ["CLIENTS", "GuardedDownloadHandler", "ProxyRefused", "http_client"]

#: The values of ``WEBCRAWL_HTTP_CLIENT``.
CLIENTS = ("asyncio", "twisted")


def http_client(settings: Any) -> str:
    """``WEBCRAWL_HTTP_CLIENT``, checked (``scrapy crawl`` checks it before the crawl starts)."""
    choice = settings.get("WEBCRAWL_HTTP_CLIENT", "asyncio")
    if choice not in CLIENTS:
        raise SettingError(f"WEBCRAWL_HTTP_CLIENT={choice!r}: expected one of {', '.join(CLIENTS)}")
    return choice


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
        self._inflight: dict[int, tuple[Request, Deferred[Response] | asyncio.Task[Any]]] = {}
        self.client = self._client(crawler)
        self._cancelling = False
        # Cut-short bodies get one WARNING each from webcrawl's hostile-answer middleware; the
        # handler's own (once per crawl, pointing at DOWNLOAD_FAIL_ON_DATALOSS) would double it.
        self._fail_on_dataloss_warned = True
        crawler.signals.connect(self.cancel_all, signal=stopping.grace_over)

    def _client(self, crawler: Crawler) -> Http1Client | None:
        """The asyncio client, when this crawl uses it (see the module docstring)."""
        settings = crawler.settings
        if http_client(settings) != "asyncio" or settings.get("DOWNLOAD_BIND_ADDRESS"):
            return None
        from scrapy.utils.reactor import is_asyncio_reactor_installed

        if not is_asyncio_reactor_installed():
            return None
        return Http1Client(crawler, self.policy,
                           per_host=settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN"),
                           context=tls_context(settings),
                           maxsize=settings.getint("DOWNLOAD_MAXSIZE"),
                           warnsize=settings.getint("DOWNLOAD_WARNSIZE"),
                           fail_on_dataloss=settings.getbool("DOWNLOAD_FAIL_ON_DATALOSS"))

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
        download: Deferred[Response] | asyncio.Task[Response]
        meta = request.meta
        if self.client is not None and not meta.get("proxy") and not meta.get("bindaddress"):
            # Its own task, so that cancel_all() can cancel it (the client resolves with this
            # crawler's policy itself).
            download = asyncio.ensure_future(
                self.client.fetch(request, meta.get("download_timeout")))
        else:
            # The download runs as its own task, created inside the block: it carries this
            # crawler's policy to the resolver, and it can be cancelled from cancel_all().
            with connecting_for(self.policy):
                download = deferred_from_coro(super().download_request(request))
        key = id(request)
        self._inflight[key] = (request, download)
        try:
            if isinstance(download, asyncio.Task):
                return await download
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

    async def close(self) -> None:
        if self.client is not None:
            self.client.close()
        await super().close()

    @property
    def in_flight(self) -> int:
        return len(self._inflight)
