"""Bytes on the wire, counted at the socket: what a proxy gateway bills.

Every connection the download handler opens is made on a :class:`CountingSocket` (aiohttp's
``socket_factory``), which adds each byte it sends or receives to the :class:`WireMeter` of the
download it currently carries. What the socket carries is everything that crossed the wire above
TCP: the request and answer heads and bodies as sent, a proxy's ``CONNECT`` exchange, TLS
handshakes and records, bytes of an answer that failed half way.

Which download a connection carries: a new connection counts for the download that opened it
(its ``CONNECT`` and handshake included); a kept connection is handed to the next download as it
sends its request (:func:`carry`). The download's meter is found through a context variable set
around the download (:func:`metering`), since aiohttp opens connections and sends requests in
the download's own task.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["VIA_PROXY", "WIRE_RECEIVED", "WIRE_SENT", "CountingSocket", "WireMeter", "carry",
           "counting_socket", "measured_bytes", "metering"]

#: Request.meta keys the download handler sets after each attempt, failed ones too: bytes sent
#: and received on the wire, and the proxy (its URL without credentials) it went through.
WIRE_SENT, WIRE_RECEIVED, VIA_PROXY = "webcrawl_wire_sent", "webcrawl_wire_received", "webcrawl_proxy"


def measured_bytes(meta: dict[str, Any]) -> int | None:
    """Bytes the last attempt of a request put on the wire through a proxy, as counted at the
    socket; ``None`` when it went through no proxy (or no webcrawl handler counted it)."""
    if not meta.get(VIA_PROXY):
        return None
    return int(meta.get(WIRE_SENT) or 0) + int(meta.get(WIRE_RECEIVED) or 0)


class WireMeter:
    """Bytes sent and received for one download (every attempt on every connection it used)."""

    __slots__ = ("sent", "received", "connections")

    def __init__(self) -> None:
        self.sent = 0
        self.received = 0
        self.connections = 0

    @property
    def total(self) -> int:
        return self.sent + self.received


_CURRENT: ContextVar[WireMeter | None] = ContextVar("webcrawl_wire_meter", default=None)


@contextmanager
def metering(meter: WireMeter) -> Iterator[WireMeter]:
    """Connections opened and requests sent inside this block count for ``meter``."""
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)


class CountingSocket(socket.socket):
    """A socket that adds its traffic to the meter of the download it carries."""

    __slots__ = ("meter",)

    meter: WireMeter | None

    def send(self, data: Any, *args: Any) -> int:
        sent = super().send(data, *args)
        if self.meter is not None:
            self.meter.sent += sent
        return sent

    def sendmsg(self, buffers: Any, *args: Any) -> int:
        sent = super().sendmsg(buffers, *args)
        if self.meter is not None:
            self.meter.sent += sent
        return sent

    def recv(self, size: int, *args: Any) -> bytes:
        data = super().recv(size, *args)
        if self.meter is not None:
            self.meter.received += len(data)
        return data

    def recv_into(self, buffer: Any, *args: Any) -> int:
        count = super().recv_into(buffer, *args)
        if self.meter is not None:
            self.meter.received += count
        return count


def counting_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """aiohttp's ``socket_factory``: a non-blocking :class:`CountingSocket` for ``addr_info``
    (family, type, proto, ...), counting for the download opening it."""
    family, kind, proto = addr_info[0], addr_info[1], addr_info[2]
    sock = CountingSocket(family, kind, proto)
    sock.meter = _CURRENT.get()
    if sock.meter is not None:
        sock.meter.connections += 1
    sock.setblocking(False)
    if kind == socket.SOCK_STREAM:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def carry(transport: Any) -> None:
    """The connection of ``transport`` now carries the current download (a kept connection
    reused): its bytes count for that download's meter from here on."""
    meter = _CURRENT.get()
    sock = transport.get_extra_info("socket") if transport is not None else None
    raw = getattr(sock, "_sock", sock)  # asyncio hands out a TransportSocket wrapping it
    if isinstance(raw, CountingSocket) and meter is not None:
        raw.meter = meter
