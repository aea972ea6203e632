"""An HTTP/1.1 client on asyncio's own transports, for webcrawl's download handler.

Scrapy's HTTP/1.1 handler goes through Twisted's ``Agent``, its connection pool and its HTTP
parser: on pages of a few KB that path cost 0.3 to 0.5 ms of CPU a page more than this client,
about a sixth of a whole crawl's CPU (measured on whole crawls, docs/benchmarks.md). This client
keeps the same contract (:mod:`webcrawl.net.http1_exchange`) with a smaller path: one
:class:`asyncio.Protocol` per connection, one parse of the head, the body framed by
:mod:`webcrawl.net.http1_reader`, kept connections reused (:mod:`webcrawl.net.http1_pool`).

- **Addresses.** A new connection's host is resolved by the reactor's name resolver, inside
  :func:`~webcrawl.net.resolver.connecting_for` with the crawler's policy, as Scrapy's handler
  does: the SSRF guard's resolver judges every answer, and a refused one fails the download
  with :class:`~scrapy.exceptions.CannotResolveHostError` before any connection is attempted.
  The connection goes to an address of that answer, never to the name again.
- **TLS** for ``https``, with the context Scrapy builds from its settings (certificates not
  verified unless ``DOWNLOAD_VERIFY_CERTIFICATES``; SNI with the host name).
- **Errors** are Scrapy's download exceptions, so retries, the hostile-answer middleware and the
  SSRF middleware see what they see from Scrapy's handler: refused connections, time-outs
  (``download_timeout`` bounds the whole download, connecting included), broken answers.
- A kept connection that the server closed just as a request went out (no byte of an answer
  came) is replaced by a new one and the request sent again, once, if its method is idempotent.
- A ``download_timeout`` of 0 or None is Scrapy's default deadline, 180 s.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import time
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
)
from scrapy.utils._download_handlers import make_response
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.ssl import _make_ssl_context
from twisted.internet.interfaces import IResolutionReceiver
from zope.interface import implementer

from webcrawl.net.http1_exchange import Answer, AnswerExchange, Stale
from webcrawl.net.http1_pool import Connection, Key, Pool
from webcrawl.net.resolver import connecting_for

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from webcrawl.net.addresses import AddressPolicy

__all__ = ["Http1Client", "tls_context"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: Methods sent again on a new connection when a kept one turned out closed (RFC 9110 9.2.2).
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


def tls_context(settings: Any) -> ssl.SSLContext:
    """The TLS context of ``https`` connections: Scrapy's, from its settings."""
    return _make_ssl_context(settings)


@implementer(IResolutionReceiver)
class _Addresses:
    """Collects a resolver's answer into a future."""

    def __init__(self, future: asyncio.Future[list[str]]) -> None:
        self.future = future
        self.hosts: list[str] = []

    def resolutionBegan(self, resolution: Any) -> None:  # noqa: N802 (Twisted's interface)
        pass

    def addressResolved(self, address: Any) -> None:  # noqa: N802
        host = getattr(address, "host", None)
        if host:
            self.hosts.append(host)

    def resolutionComplete(self) -> None:  # noqa: N802
        if not self.future.done():
            self.future.set_result(self.hosts)


def request_bytes(request: Request) -> bytes:
    """The request line, headers and body as they go on the wire."""
    parts = urlparse_cached(request)
    target = parts.path or "/"
    if parts.params:
        target += ";" + parts.params
    if parts.query:
        target += "?" + parts.query
    lines = [f"{request.method} {target} HTTP/1.1".encode("ascii")]
    has_host = has_length = False
    for name, values in request.headers.items():
        lower = name.lower()
        if lower == b"proxy-authorization":
            continue  # for a proxy only, and this client goes to the host itself
        has_host = has_host or lower == b"host"
        has_length = has_length or lower == b"content-length"
        for value in values:
            if b"\n" in value or b"\r" in value:
                raise ValueError(f"header {name!r} of {request.url} holds a line break")
            lines.append(name + b": " + value)
    if not has_host:
        lines.append(b"Host: " + parts.netloc.rpartition("@")[2].encode("idna"))
    body = request.body
    if not has_length and (body or request.method in _BODY_METHODS):
        lines.append(b"Content-Length: %d" % len(body))
    lines.append(b"\r\n")
    return b"\r\n".join(lines) + body


class Http1Client:
    """See the module docstring. One per download handler (so per crawler)."""

    def __init__(self, crawler: Crawler | None, policy: AddressPolicy | None, *,
                 per_host: int, context: ssl.SSLContext, maxsize: int, warnsize: int,
                 fail_on_dataloss: bool) -> None:
        self.crawler = crawler
        self.policy = policy
        self.pool = Pool(per_host)
        self.context = context
        self.maxsize = maxsize
        self.warnsize = warnsize
        self.fail_on_dataloss = fail_on_dataloss

    async def fetch(self, request: Request, timeout: float | None) -> Response:
        timeout = timeout or 180.0  # as Scrapy's handler: no deadline is its default one
        try:
            async with asyncio.timeout(timeout):
                return await self._fetch(request)
        except TimeoutError:
            raise DownloadTimeoutError(
                f"Getting {request.url} took longer than {timeout} seconds.") from None

    async def _fetch(self, request: Request) -> Response:
        started = time.monotonic()
        parts = urlparse_cached(request)
        scheme = parts.scheme
        host = parts.hostname or ""
        port = parts.port or _DEFAULT_PORTS.get(scheme, 80)
        key: Key = (scheme, host, port)
        data = request_bytes(request)
        meta = request.meta
        for attempt in (0, 1):
            connection = self.pool.take(key) if attempt == 0 else None
            if connection is None:
                connection = await self._connect(key)
            future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
            exchange = AnswerExchange(
                connection, request, self.crawler, future,
                maxsize=meta.get("download_maxsize", self.maxsize),
                warnsize=meta.get("download_warnsize", self.warnsize),
                fail_on_dataloss=meta.get("download_fail_on_dataloss", self.fail_on_dataloss),
                started_at=started)
            connection.send(exchange, data)
            try:
                answer = await future
            except Stale:
                if request.method in _IDEMPOTENT:
                    continue  # the server had closed the kept connection: again, on a new one
                raise DownloadFailedError(f"{request.url}: the kept connection closed before "
                                          f"any answer") from None
            except BaseException:
                connection.abort()  # cancelled or timed out mid-answer: the connection is spent
                raise
            return self._response(request, connection, answer)
        raise DownloadFailedError(f"{request.url}: the connection closed before any answer")

    @staticmethod
    def _response(request: Request, connection: Connection, answer: Answer) -> Response:
        """Scrapy's response for the answer (raising its StopDownload when that asks to fail)."""
        return make_response(url=request.url, status=answer.status, headers=answer.headers,
                             body=answer.body, flags=answer.flags,
                             certificate=connection.certificate,
                             ip_address=connection.ip_address, protocol="HTTP/1.1",
                             stop_download=answer.stop)

    async def _resolve(self, host: str, port: int) -> list[str]:
        from twisted.internet import reactor

        future: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        with connecting_for(self.policy):
            reactor.nameResolver.resolveHostName(_Addresses(future), host, port)  # type: ignore[attr-defined]
        hosts = await future
        if not hosts:
            raise CannotResolveHostError(f"DNS lookup failed: no results for hostname lookup: "
                                         f"{host}.")
        return hosts

    async def _connect(self, key: Key) -> Connection:
        scheme, host, port = key
        addresses = await self._resolve(host, port)
        loop = asyncio.get_running_loop()
        tls = self.context if scheme == "https" else None
        # The host, name or address, is what the certificate is checked against when
        # DOWNLOAD_VERIFY_CERTIFICATES is on (no SNI is sent for an address).
        server_name = host if tls is not None else None
        error: Exception | None = None
        for address in addresses:
            try:
                transport, connection = await loop.create_connection(
                    lambda: Connection(self.pool, key), address, port, ssl=tls,
                    server_hostname=server_name)
            except ConnectionRefusedError as exc:
                error = DownloadConnectionRefusedError(f"{host}:{port} ({address}): {exc}")
            except (OSError, ssl.SSLError) as exc:
                error = DownloadFailedError(f"connecting to {host}:{port} ({address}): {exc}")
            else:
                stats = self.crawler.stats if self.crawler is not None else None
                if stats is not None:
                    stats.inc_value("webcrawl/http/connections")
                peer = transport.get_extra_info("peername")
                if peer:
                    connection.ip_address = ipaddress.ip_address(peer[0])
                if tls is not None:
                    ssl_object = transport.get_extra_info("ssl_object")
                    if ssl_object is not None:
                        connection.certificate = ssl_object.getpeercert(binary_form=True)
                return connection
        assert error is not None
        raise error

    def close(self) -> None:
        self.pool.close()

