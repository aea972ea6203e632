"""Name resolution for webcrawl's download handler: every answer judged by the crawler's address
policy (the SSRF guard's connection-time half), and cached no longer than its TTL.

:class:`CheckedResolver` is aiohttp's resolver of one download handler, so of one crawler: it
asks DNS (c-ares through ``aiodns``; the system's servers, or ``WEBCRAWL_DNS_SERVERS``) for a
host's A and AAAA records and judges the whole answer with that crawler's
:class:`~webcrawl.net.addresses.AddressPolicy`. If any address is refused, the answer is refused
whole: :class:`AddressRefused` is raised and no connection is attempted. aiohttp connects to an
address of the answer, never to the name again, so a link, a redirect or an answer that changes
between two lookups (DNS rebinding) cannot lead the crawler to a refused address.

Answers, refused ones included, are kept for their TTL, held between ``min_ttl`` and ``max_ttl``
(``WEBCRAWL_DNS_MIN_TTL_SECONDS``, ``WEBCRAWL_DNS_MAX_TTL_SECONDS``): a crawl running for weeks
follows a shop that moved within ``max_ttl`` at most, and a name with a TTL of 0 (``/etc/hosts``)
is not asked for again at every connection. Failed lookups are not kept. Concurrent lookups of
one name share one query.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
import aiodns
from aiohttp.abc import AbstractResolver, ResolveResult

from webcrawl.net.addresses import AddressPolicy, literal_address

__all__ = ["AddressRefused", "Answer", "CheckedResolver"]

_NUMERIC = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV


class AddressRefused(Exception):
    """A host whose answer holds an address the crawler's policy refuses."""

    def __init__(self, host: str, address: str, reason: str) -> None:
        super().__init__(f"{host} resolves to {address} ({reason})")
        self.host, self.address, self.reason = host, address, reason


@dataclass(frozen=True)
class Answer:
    """A judged answer: its addresses as ``(family, address)``, the first refusal (``None``:
    allowed) and when it expires (``time.monotonic()``)."""

    addresses: tuple[tuple[int, str], ...]
    refusal: AddressRefused | None
    expires: float


class CheckedResolver(AbstractResolver):
    """See the module docstring. ``servers``: ``"address"`` or ``"address:port"`` strings."""

    def __init__(self, policy: AddressPolicy, *, servers: Sequence[str] = (),
                 min_ttl: float = 5.0, max_ttl: float = 300.0, cache_size: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.servers = list(servers)
        self.min_ttl, self.max_ttl = min_ttl, max_ttl
        self.cache_size = cache_size
        self.clock = clock
        self.lookups = 0  # queries sent (cache misses)
        self._cache: OrderedDict[str, Answer] = OrderedDict()
        self._pending: dict[str, asyncio.Future[Answer]] = {}
        self._dns: aiodns.DNSResolver | None = None

    async def lookup(self, host: str) -> Answer:
        """The judged answer for ``host`` (a name, or a literal address judged alone)."""
        key = host.lower().rstrip(".")
        literal = literal_address(key)
        if literal is not None:
            return self._judge(key, [(socket.AF_INET6 if literal.version == 6 else socket.AF_INET,
                                      str(literal))], ttl=self.max_ttl)
        cached = self._cache.get(key)
        if cached is not None and cached.expires > self.clock():
            self._cache.move_to_end(key)
            return cached
        pending = self._pending.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            answer = await self._query(key)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody shared it
            raise
        finally:
            self._pending.pop(key, None)
        future.set_result(answer)
        self._cache[key] = answer
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return answer

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        """aiohttp's call: the allowed addresses of ``host``, IPv6 and IPv4 interleaved by the
        connector; :class:`AddressRefused` when the answer is refused."""
        answer = await self.lookup(host)
        if answer.refusal is not None:
            raise answer.refusal
        wanted = [a for a in answer.addresses if family in (socket.AF_UNSPEC, a[0])]
        return [ResolveResult(hostname=host, host=address, port=port, family=kind, proto=0,
                              flags=_NUMERIC) for kind, address in wanted]

    async def close(self) -> None:
        if self._dns is not None:
            await self._dns.close()
            self._dns = None

    async def _query(self, host: str) -> Answer:
        if self._dns is None:
            self._dns = aiodns.DNSResolver(nameservers=self.servers or None)
        self.lookups += 1
        try:
            result = await self._dns.getaddrinfo(host, family=socket.AF_UNSPEC,
                                                 type=socket.SOCK_STREAM)
        except aiodns.error.DNSError as exc:
            reason = exc.args[1] if len(exc.args) > 1 else "DNS lookup failed"
            raise OSError(None, f"{host}: {reason}") from exc
        found: list[tuple[int, str]] = []
        ttls: list[float] = []
        for node in result.nodes:
            address = node.addr[0].decode("ascii") if isinstance(node.addr[0], bytes) else node.addr[0]
            if (node.family, address) not in found:
                found.append((node.family, address))
            ttls.append(float(node.ttl))
        if not found:
            raise OSError(None, f"{host}: no addresses")
        found.sort(key=lambda a: a[0] != socket.AF_INET6)  # IPv6 first (RFC 8305 section 4)
        return self._judge(host, found, ttl=min(ttls) if ttls else 0.0)

    def _judge(self, host: str, addresses: list[tuple[int, str]], *, ttl: float) -> Answer:
        refusal = None
        for _, address in addresses:
            reason = self.policy.refusal(address)
            if reason is not None:
                refusal = AddressRefused(host, address, reason)
                break
        hold = min(max(ttl, self.min_ttl), self.max_ttl)
        return Answer(tuple(addresses), refusal, self.clock() + hold)

    def forget(self, host: str | None = None) -> None:
        """Drop the kept answer of ``host`` (every answer when ``None``)."""
        if host is None:
            self._cache.clear()
        else:
            self._cache.pop(host.lower().rstrip("."), None)

