"""aiohttp's client as webcrawl's download handler uses it: the pieces that make it read answers
as RFC 9112 says and count what crosses the wire.

aiohttp parses HTTP/1.1 with llhttp (C) and connects with Happy Eyeballs (RFC 8305). Around it:

- :class:`AnswerProtocol`: a reset (or any error) ending the connection while a body is read to
  the connection's end is data loss, not the body's end (aiohttp takes it for the end); more than
  :data:`MAX_INTERIM` informational (1xx) heads before an answer are a broken answer.
- :class:`MeteredRequest`: a kept connection counts its bytes for the download it now carries
  (:mod:`webcrawl.net.meter`).
- :class:`PeerResponse`: the peer's address and TLS object, read when the head arrives (aiohttp
  drops the transport of a connection it releases).
- :func:`make_connector`: a connector with the guarded resolver, sockets that count, Happy
  Eyeballs, a bounded pool, and :class:`AnswerProtocol` for every connection.
"""

from __future__ import annotations

import functools
import ssl
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp.client_exceptions import ClientPayloadError
from aiohttp.client_proto import ResponseHandler
from aiohttp.http_exceptions import BadHttpMessage

from webcrawl.net.meter import carry, counting_socket

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver

__all__ = ["MAX_INTERIM", "AnswerProtocol", "MeteredRequest", "PeerResponse", "make_connector"]

#: Informational (1xx) heads accepted before an answer; a server sending more is broken.
MAX_INTERIM = 16
#: How long Happy Eyeballs waits on one address before trying the next one beside it (RFC 8305
#: suggests 250 ms).
HAPPY_EYEBALLS_DELAY = 0.25


class AnswerProtocol(ResponseHandler):
    """aiohttp's connection protocol, with the two checks of the module docstring."""

    _interim = 0

    def connection_lost(self, exc: BaseException | None) -> None:
        payload = self._payload
        if exc is not None and payload is not None and not payload.is_eof():
            # aiohttp would feed EOF first, completing a body that runs to the connection's end.
            payload.set_exception(ClientPayloadError(
                f"the connection ended by an error during the body: {exc!r}"))
        super().connection_lost(exc)

    async def read(self) -> Any:
        message, payload = await super().read()
        code = getattr(message, "code", 0)
        if 100 <= code < 200 and code != 101:
            self._interim += 1
            if self._interim > MAX_INTERIM:
                raise BadHttpMessage(f"more than {MAX_INTERIM} informational (1xx) heads")
        else:
            self._interim = 0
        return message, payload


class MeteredRequest(aiohttp.ClientRequest):
    """Sends on a connection after handing its byte count to the current download."""

    async def send(self, conn: Any) -> aiohttp.ClientResponse:
        carry(conn.transport)
        return await super().send(conn)


class PeerResponse(aiohttp.ClientResponse):
    """Keeps the peer's address and TLS object from the moment the head arrives."""

    peername: tuple[Any, ...] | None = None
    ssl_object: ssl.SSLObject | None = None

    async def start(self, connection: Any) -> aiohttp.ClientResponse:
        transport = connection.transport
        if transport is not None:
            self.peername = transport.get_extra_info("peername")
            found = transport.get_extra_info("ssl_object")
            self.ssl_object = found if isinstance(found, ssl.SSLObject) else None
        return await super().start(connection)


def make_connector(resolver: AbstractResolver, *, limit: int, per_host: int,
                   keepalive_seconds: float = 60.0) -> aiohttp.TCPConnector:
    """The connector of one download handler (see the module docstring)."""
    connector = aiohttp.TCPConnector(
        resolver=resolver,
        use_dns_cache=False,  # the guarded resolver caches, within each answer's TTL
        limit=limit,
        limit_per_host=per_host,
        keepalive_timeout=keepalive_seconds,
        happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY,
        interleave=1,
        socket_factory=counting_socket,
        enable_cleanup_closed=False,
    )
    # aiohttp offers no parameter for the protocol class: it is the factory the connector keeps.
    connector._factory = functools.partial(AnswerProtocol, loop=connector._loop)  # type: ignore[attr-defined]
    return connector
