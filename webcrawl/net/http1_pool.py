"""Connections of the asyncio HTTP/1.1 client and the pool that keeps them open between answers.

A :class:`Connection` is an :class:`asyncio.Protocol` carrying one exchange at a time (no
pipelining): while an exchange is on it, the bytes that arrive go to that exchange's
:class:`~webcrawl.net.http1_reader.AnswerReader`, and an end of the connection is reported to it.
An idle connection that receives bytes, or ends, leaves the pool.

The :class:`Pool` keeps idle connections per ``(scheme, host, port)``, newest first, at most
``per_host`` each (as Scrapy's HTTP/1.1 handler keeps ``CONCURRENT_REQUESTS_PER_DOMAIN``), and
drops one idle for longer than ``idle_seconds`` when it would be taken (servers close theirs
sooner; a dropped connection is closed).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ipaddress import IPv4Address, IPv6Address

__all__ = ["Connection", "Exchange", "Key", "Pool"]

Key = tuple[str, str, int]


class Exchange(Protocol):
    """What a connection needs of the exchange it carries."""

    def feed(self, data: bytes) -> None: ...

    def lost(self, exc: BaseException | None) -> None: ...


class Connection(asyncio.Protocol):
    __slots__ = ("pool", "key", "transport", "exchange", "closed", "idle_since", "answers",
                 "ip_address", "certificate")

    def __init__(self, pool: Pool, key: Key) -> None:
        self.pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.closed = False
        self.idle_since = 0.0
        self.answers = 0  # exchanges completed on this connection
        self.ip_address: IPv4Address | IPv6Address | None = None
        self.certificate: bytes | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        exchange = self.exchange
        if exchange is None:  # bytes nobody asked for: the connection cannot be trusted
            self.abort()
            return
        exchange.feed(data)

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.lost(exc)

    def send(self, exchange: Exchange, data: bytes) -> None:
        self.exchange = exchange
        assert self.transport is not None
        self.transport.write(data)

    def release(self, reusable: bool) -> None:
        """The exchange on this connection is over: back to the pool, or closed."""
        self.exchange = None
        self.answers += 1
        if reusable and not self.closed:
            self.pool.give(self)
        else:
            self.abort()

    def abort(self) -> None:
        self.exchange = None
        if not self.closed and self.transport is not None:
            self.closed = True
            self.pool.forget(self)
            self.transport.abort()


class Pool:
    """Idle connections by ``(scheme, host, port)``; see the module docstring."""

    def __init__(self, per_host: int, idle_seconds: float = 240.0) -> None:
        self.per_host = max(1, per_host)
        self.idle_seconds = idle_seconds
        self._idle: dict[Key, list[Connection]] = {}

    def take(self, key: Key) -> Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        oldest_kept = time.monotonic() - self.idle_seconds
        while idle:
            connection = idle.pop()
            if connection.closed:
                continue
            if connection.idle_since < oldest_kept:
                connection.abort()
                continue
            if not idle:
                del self._idle[key]
            return connection
        self._idle.pop(key, None)
        return None

    def give(self, connection: Connection) -> None:
        idle = self._idle.setdefault(connection.key, [])
        if len(idle) >= self.per_host:
            connection.abort()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)

    def forget(self, connection: Connection) -> None:
        idle = self._idle.get(connection.key)
        if idle and connection in idle:
            idle.remove(connection)
            if not idle:
                del self._idle[connection.key]

    def close(self) -> None:
        for idle in list(self._idle.values()):
            for connection in list(idle):
                connection.abort()
        self._idle.clear()
