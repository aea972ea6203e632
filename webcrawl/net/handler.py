"""webcrawl's download handler for http and https: aiohttp (llhttp) under the SSRF guard, with
proxies, verified TLS and every byte counted.

Chosen by measurement (docs/http.md): webcrawl's own HTTP/1.1 client took 9% less crawl CPU per
page than aiohttp's handler, short of the 20% that would have justified keeping 780 lines of
protocol code; aiohttp passed the edge-case suite once the few checks of
:mod:`webcrawl.net.connector` were added. Only Scrapy's public API is used here.

What a download gets:

- **This crawler's allowance.** Host names are resolved by a :class:`~webcrawl.net.dns.CheckedResolver`
  of this handler, judged by this crawler's :class:`~webcrawl.net.addresses.AddressPolicy` and
  kept within their TTL; a refused answer (or a literal refused address) fails the download
  before any connection with :class:`AddressRefused` (an ``IgnoreRequest``), counted
  ``ssrf/refused`` and ``ssrf/refused/{reason}``. With the guard off
  (``WEBCRAWL_SSRF_ENABLED = False``) every address but cloud metadata is allowed.
- **Proxies** (:mod:`webcrawl.net.proxies`): with the guard on, a proxied request is judged the
  same way *before it is sent*: its host, literal or resolved here, must be allowed. The proxy
  resolves the name again itself, where no check reaches: an answer that changes between the two
  lookups is the guard's documented limit (docs/robots-and-safety.md).
- **Bytes on the wire** (:mod:`webcrawl.net.meter`): ``meta["webcrawl_wire_sent"]`` and
  ``meta["webcrawl_wire_received"]`` after every attempt, failed ones included, and
  ``meta["webcrawl_proxy"]`` (the proxy's URL, no credentials) when it went through one.
- **TLS** verified by default (:mod:`webcrawl.net.tls`).
- **Connections**: Happy Eyeballs over the answer's IPv6 and IPv4 addresses, each attempt bounded
  by ``WEBCRAWL_CONNECT_TIMEOUT_SECONDS``; kept per host (``CONCURRENT_REQUESTS_PER_DOMAIN``) and
  closed after ``WEBCRAWL_KEEPALIVE_SECONDS`` idle, whichever host is asked for next.
- **Scrapy's contract**: ``DOWNLOAD_TIMEOUT`` bounds the whole answer; ``DOWNLOAD_MAXSIZE`` and
  ``DOWNLOAD_WARNSIZE`` (and their meta keys) as Scrapy's handlers apply them; a body cut short
  is :class:`~scrapy.exceptions.ResponseDataLossError`, or the partial body flagged ``dataloss``
  with ``DOWNLOAD_FAIL_ON_DATALOSS`` off; the ``headers_received`` and ``bytes_received`` signals
  with ``StopDownload``; ``download_latency``; Scrapy's download exceptions.
- **Bounded stops.** :meth:`GuardedDownloadHandler.cancel_all` (on
  :data:`webcrawl.stopping.grace_over`) cancels the downloads in flight: their connections are
  cut and each fails with :class:`~webcrawl.stopping.Cancelled`, its request given back.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from typing import TYPE_CHECKING, Any

import aiohttp
import yarl
from scrapy import signals
from scrapy.core.downloader.handlers.base import BaseDownloadHandler
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
    StopDownload,
)
from scrapy.http import Headers
from scrapy.responsetypes import responsetypes
from scrapy.utils.httpobj import urlparse_cached
from twisted.python.failure import Failure

from webcrawl import stopping
from webcrawl.net.addresses import AddressPolicy, literal_address, parse_networks
from webcrawl.net.connector import MeteredRequest, PeerResponse, make_connector
from webcrawl.net.dns import AddressRefused as _Refused
from webcrawl.net.dns import CheckedResolver
from webcrawl.net.meter import VIA_PROXY, WIRE_RECEIVED, WIRE_SENT, WireMeter, metering
from webcrawl.net.proxies import Proxy, ProxyPool, parse_proxy
from webcrawl.net.tls import CertificateRefused, client_context, reason_of
from webcrawl.settingtypes import SettingError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

logger = logging.getLogger(__name__)

__all__ = ["AddressRefused", "GuardedDownloadHandler", "NetworkConfig", "http_client"]

#: Transfer codings a client that sends no ``TE`` can be answered with (RFC 9112 7.4).
_CODINGS = frozenset({"chunked", "identity"})
_SKIP_AUTO = ("Accept", "Accept-Encoding", "Content-Type", "User-Agent")


class AddressRefused(IgnoreRequest):
    """A download refused by the SSRF guard when connecting (or before sending, proxied)."""


class NetworkConfig:
    """The handler's settings, validated once (``ValueError`` naming the setting)."""

    def __init__(self, settings: Any) -> None:
        self.guarded = settings.getbool("WEBCRAWL_SSRF_ENABLED", True)
        self.allowed = (parse_networks(settings.getlist("WEBCRAWL_ALLOWED_PRIVATE_NETWORKS"))
                        if self.guarded else ("0.0.0.0/0", "::/0"))
        self.proxies = ProxyPool.from_settings(settings.getlist("WEBCRAWL_PROXIES"),
                                               settings.get("WEBCRAWL_PROXY_ROTATION", "host"))
        self.tls_verify = settings.getbool("WEBCRAWL_TLS_VERIFY", True)
        self.ca_file = settings.get("WEBCRAWL_TLS_CA_FILE") or None
        self.dns_servers = settings.getlist("WEBCRAWL_DNS_SERVERS")
        self.min_ttl = _seconds(settings, "WEBCRAWL_DNS_MIN_TTL_SECONDS", 5.0, 0.0)
        self.max_ttl = _seconds(settings, "WEBCRAWL_DNS_MAX_TTL_SECONDS", 300.0, self.min_ttl)
        self.connect_timeout = _seconds(settings, "WEBCRAWL_CONNECT_TIMEOUT_SECONDS", 10.0, 0.1)
        self.keepalive = _seconds(settings, "WEBCRAWL_KEEPALIVE_SECONDS", 60.0, 0.1)
        self.timeout = settings.getfloat("DOWNLOAD_TIMEOUT") or 180.0
        self.maxsize = settings.getint("DOWNLOAD_MAXSIZE")
        self.warnsize = settings.getint("DOWNLOAD_WARNSIZE")
        self.fail_on_dataloss = settings.getbool("DOWNLOAD_FAIL_ON_DATALOSS")
        self.total = settings.getint("CONCURRENT_REQUESTS")
        self.per_host = settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
        if settings.get("DOWNLOAD_BIND_ADDRESS"):
            raise ValueError("DOWNLOAD_BIND_ADDRESS: webcrawl's download handler does not bind "
                             "to a local address; unset it")


def http_client(settings: Any) -> str:
    """Check the handler's settings before a crawl starts (``scrapy crawl`` calls this): a
    :class:`~webcrawl.settingtypes.SettingError` naming the setting, else ``"aiohttp"``."""
    if settings.get("WEBCRAWL_HTTP_CLIENT") is not None:
        raise SettingError(f"WEBCRAWL_HTTP_CLIENT={settings.get('WEBCRAWL_HTTP_CLIENT')!r}: the "
                           "setting is gone, webcrawl fetches with aiohttp (docs/http.md); "
                           "remove it")
    try:
        NetworkConfig(settings)
        client_context(verify=True, ca_file=settings.get("WEBCRAWL_TLS_CA_FILE") or None)
    except SettingError:
        raise
    except ValueError as exc:
        raise SettingError(str(exc)) from None
    return "aiohttp"


def _seconds(settings: Any, name: str, default: float, minimum: float) -> float:
    value = settings.getfloat(name, default)
    if not value >= minimum:
        raise ValueError(f"{name}={settings.get(name)!r}: expected seconds >= {minimum:g}")
    return value


class GuardedDownloadHandler(BaseDownloadHandler):
    """See the module docstring."""

    lazy = False

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.config = config = NetworkConfig(crawler.settings)
        self.policy = AddressPolicy(config.allowed)
        self.resolver = CheckedResolver(self.policy, servers=config.dns_servers,
                                        min_ttl=config.min_ttl, max_ttl=config.max_ttl)
        self.ssl = client_context(verify=config.tls_verify, ca_file=config.ca_file)
        self.stats = crawler.stats
        self._session: aiohttp.ClientSession | None = None
        self._inflight: dict[int, tuple[Request, asyncio.Task[Response]]] = {}
        self._cancelling = False
        self._tls_warned: set[str] = set()
        crawler.signals.connect(self.cancel_all, signal=stopping.grace_over)

    def session(self) -> aiohttp.ClientSession:
        """The aiohttp session, made in the running loop at the first download."""
        if self._session is None:
            connector = make_connector(self.resolver, limit=self.config.total,
                                       per_host=self.config.per_host,
                                       keepalive_seconds=self.config.keepalive)
            self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
                request_class=MeteredRequest, response_class=PeerResponse,
                skip_auto_headers=_SKIP_AUTO, max_line_size=65536, max_field_size=65536,
                max_headers=256)
        return self._session

    async def download_request(self, request: Request) -> Response:
        if self._cancelling:
            stopping.give_back(request)
            raise stopping.Cancelled("the crawl is stopping")
        task = asyncio.ensure_future(self._download(request))
        key = id(request)
        self._inflight[key] = (request, task)
        try:
            return await task
        except BaseException:
            if request.meta.get(stopping.GIVEN_BACK):
                raise stopping.Cancelled("the crawl is stopping: download cancelled") from None
            raise
        finally:
            self._inflight.pop(key, None)

    async def _download(self, request: Request) -> Response:
        meta = request.meta
        proxy = self._proxy(request)
        meter = WireMeter()
        timeout = meta.get("download_timeout") or self.config.timeout
        started = time.monotonic()
        try:
            with metering(meter):
                await self._check(request, proxy)
                async with asyncio.timeout(timeout):
                    return await self._fetch(request, proxy, started)
        except TimeoutError:
            raise DownloadTimeoutError(
                f"Getting {request.url} took longer than {timeout} seconds.") from None
        finally:
            meta[WIRE_SENT], meta[WIRE_RECEIVED] = meter.sent, meter.received
            if proxy is not None:
                meta[VIA_PROXY] = proxy.url
            else:
                meta.pop(VIA_PROXY, None)

    def _proxy(self, request: Request) -> Proxy | None:
        named = request.meta.get("proxy")
        if named:
            return parse_proxy(named, 'meta["proxy"]')
        return self.config.proxies.choose(urlparse_cached(request).hostname or "")

    async def _check(self, request: Request, proxy: Proxy | None) -> None:
        """The guard's judgement where aiohttp does not ask the resolver: a literal address,
        and the host of a proxied request (resolved here, the proxy resolving it again)."""
        host = urlparse_cached(request).hostname or ""
        if literal_address(host) is None and proxy is None:
            return  # aiohttp asks the resolver when it connects
        try:
            answer = await self.resolver.lookup(host)
        except OSError as exc:
            raise CannotResolveHostError(f"DNS lookup failed for {host}: {exc}") from None
        if answer.refusal is not None:
            self._refuse(request, answer.refusal)

    def _refuse(self, request: Request, refusal: _Refused) -> None:
        if self.stats is not None:
            self.stats.inc_value("ssrf/refused")
            self.stats.inc_value(f"ssrf/refused/{refusal.reason}")
        logger.debug("SSRF guard refused %(request)s: %(refusal)s",
                     {"request": request, "refusal": refusal})
        raise AddressRefused(f"SSRF guard: {refusal}")

    async def _fetch(self, request: Request, proxy: Proxy | None, started: float) -> Response:
        headers = [(name.decode("latin-1"), value.decode("utf-8", "replace"))
                   for name, values in request.headers.items() for value in values
                   if name.lower() != b"proxy-authorization"]
        proxy_headers = None
        auth = request.headers.get(b"Proxy-Authorization")
        if auth:
            proxy_headers = {"Proxy-Authorization": auth.decode("latin-1")}
        try:
            async with self.session().request(
                    request.method, yarl.URL(request.url, encoded=True),
                    data=request.body or None, headers=headers, ssl=self.ssl,
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(sock_connect=self.config.connect_timeout),
                    proxy=proxy.url if proxy else None,
                    proxy_auth=(aiohttp.BasicAuth(proxy.user, proxy.password or "")
                                if proxy and proxy.user else None),
                    proxy_headers=proxy_headers) as answer:
                request.meta["download_latency"] = time.monotonic() - started
                return await self._read(request, answer)
        except _Refused as refusal:
            self._refuse(request, refusal)
            raise  # not reached
        except aiohttp.ClientConnectorCertificateError as exc:
            raise self._certificate(request, exc) from None
        except aiohttp.ClientSSLError as exc:
            raise DownloadConnectionRefusedError(f"TLS with {request.url}: {exc}") from None
        except aiohttp.ClientConnectorDNSError as exc:
            raise CannotResolveHostError(str(exc)) from None
        except aiohttp.ClientProxyConnectionError as exc:
            raise DownloadConnectionRefusedError(f"proxy {proxy}: {exc}") from None
        except aiohttp.ClientConnectorError as exc:
            raise DownloadConnectionRefusedError(str(exc)) from None
        except aiohttp.ClientHttpProxyError as exc:
            raise DownloadFailedError(f"proxy {proxy} refused the tunnel: {exc.status} "
                                      f"{exc.message}") from None
        except aiohttp.ClientPayloadError as exc:
            raise ResponseDataLossError(f"{request.url}: {exc}") from None
        except (aiohttp.ClientError, ValueError) as exc:
            raise DownloadFailedError(f"{request.url}: {exc}") from None

    def _certificate(self, request: Request, exc: BaseException) -> CertificateRefused:
        host = urlparse_cached(request).hostname or ""
        spider = getattr(self.crawler, "spider", None)
        site = getattr(spider, "name", None) or "?"
        reason = reason_of(exc)
        if self.stats is not None:
            self.stats.inc_value("webcrawl/tls/refused")
        if host not in self._tls_warned:
            self._tls_warned.add(host)
            logger.warning("TLS: site %s, host %s: certificate not verified (%s); its requests "
                           "are refused (network.tls_verify = false in the site file turns "
                           "the check off)", site, host, reason)
        return CertificateRefused(f"site {site}, host {host}: certificate not verified "
                                  f"({reason})")

    async def _read(self, request: Request, answer: PeerResponse) -> Response:
        meta = request.meta
        status = answer.status
        if status == 101:
            answer.close()
            raise DownloadFailedError(f"{request.url}: 101 Switching Protocols to a request "
                                      f"that asked for no upgrade")
        codings = [c.strip().lower() for v in answer.headers.getall("Transfer-Encoding", ())
                   for c in v.split(",") if c.strip()]
        if any(c not in _CODINGS for c in codings):
            answer.close()
            raise DownloadFailedError(f"{request.url}: Transfer-Encoding {', '.join(codings)}, "
                                      f"a coding it was not asked for (RFC 9112 7.4)")
        headers = Headers(answer.raw_headers)
        maxsize = meta.get("download_maxsize", self.config.maxsize)
        warnsize = meta.get("download_warnsize", self.config.warnsize)
        expected = answer.content_length if not codings else None
        warned = False
        if expected is not None:
            if maxsize and expected > maxsize:
                self._cancel(request, expected, maxsize, expected=True)
            if warnsize and expected > warnsize:
                warned = self._warn(request, expected, warnsize, expected=True)
        stop = self._signal(signals.headers_received, request, headers=headers,
                            body_length=expected)
        body: list[bytes] = []
        if stop is not None:
            return self._response(request, answer, headers, b"", None, stop)
        listened = self._listened(signals.bytes_received)
        received = 0
        try:
            async for chunk in answer.content.iter_any():
                body.append(chunk)
                received += len(chunk)
                if listened:
                    stop = self._signal(signals.bytes_received, request, data=chunk)
                    if stop is not None:
                        answer.close()
                        return self._response(request, answer, headers, b"".join(body), None,
                                              stop)
                if maxsize and received > maxsize:
                    body.clear()
                    self._cancel(request, received, maxsize, expected=False)
                if warnsize and received > warnsize and not warned:
                    warned = self._warn(request, received, warnsize, expected=False)
        except aiohttp.ClientPayloadError as exc:
            if meta.get("download_fail_on_dataloss", self.config.fail_on_dataloss):
                raise ResponseDataLossError(f"{request.url}: the body was cut short after "
                                            f"{received} bytes ({exc})") from None
            return self._response(request, answer, headers, b"".join(body), ["dataloss"])
        return self._response(request, answer, headers, b"".join(body))

    @staticmethod
    def _response(request: Request, answer: PeerResponse, headers: Headers, body: bytes,
                  flags: list[str] | None = None, stop: StopDownload | None = None) -> Response:
        respcls = responsetypes.from_args(headers=headers, url=request.url, body=body)
        peer = answer.peername
        ssl_object = answer.ssl_object
        response = respcls(
            url=request.url, status=answer.status, headers=headers, body=body,
            flags=list(flags or ()), protocol="HTTP/1.1",
            ip_address=ipaddress.ip_address(peer[0]) if peer else None,
            certificate=ssl_object.getpeercert(binary_form=True) if ssl_object else None)
        if stop is not None:
            response.flags.append("download_stopped")
            if stop.fail:
                stop.response = response
                raise stop
        return response

    def _listened(self, signal: object) -> bool:
        from pydispatch import dispatcher

        return any(True for _ in dispatcher.getAllReceivers(self.crawler.signals.sender, signal))

    def _signal(self, signal: object, request: Request, **kwargs: Any) -> StopDownload | None:
        """Send ``signal``; the ``StopDownload`` a receiver raised, if any."""
        for _, result in self.crawler.signals.send_catch_log(
                signal=signal, request=request, spider=self.crawler.spider, **kwargs):
            if isinstance(result, Failure) and isinstance(result.value, StopDownload):
                return result.value
        return None

    @staticmethod
    def _cancel(request: Request, size: int, limit: int, *, expected: bool) -> None:
        prefix = "Expected to receive" if expected else "Received"
        message = (f"{prefix} {size} bytes which is larger than download max size ({limit}) "
                   f"in request {request}.")
        logger.warning(message)
        raise DownloadCancelledError(message)

    @staticmethod
    def _warn(request: Request, size: int, limit: int, *, expected: bool) -> bool:
        prefix = "Expected to receive" if expected else "Received"
        logger.warning("%s %d bytes which is larger than download warn size (%d) in request %s.",
                       prefix, size, limit, request)
        return True

    def cancel_all(self) -> int:
        """Cancel every download in flight (their requests marked as given back) and any that
        starts later; returns how many were cancelled."""
        self._cancelling = True
        cancelled = 0
        for request, task in list(self._inflight.values()):
            stopping.give_back(request)
            task.cancel()
            cancelled += 1
        if cancelled:
            logger.info("Cancelled %d download(s) still running at the end of the stop's grace "
                        "period", cancelled)
            if self.stats is not None:
                self.stats.inc_value("webcrawl/stop/cancelled", cancelled)
        return cancelled

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        await self.resolver.close()

    @property
    def in_flight(self) -> int:
        return len(self._inflight)
