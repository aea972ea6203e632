"""A Twisted name resolver that refuses names resolving to non-public addresses: the half of the
SSRF guard that runs when connecting.

Scrapy's HTTP/1.1 handler connects through Twisted's ``HostnameEndpoint``, which asks the reactor's
name resolver for a host's addresses at each new connection (literal IP hosts included). The
:class:`GuardedResolver` wraps Scrapy's caching resolver and checks every answer, cached or not,
against an :class:`AddressPolicy`: if *any* address of the answer is refused, the whole answer is
withheld, so the endpoint fails with a DNS lookup error and no connection is attempted. A link,
a redirect or a DNS answer that changes between two lookups (DNS rebinding) therefore cannot lead
the crawler to a refused address.

Install it with ``TWISTED_DNS_RESOLVER = "webcrawl.net.resolver.GuardedResolver"``; the SSRF
middleware wraps whatever resolver is installed if that was not done, so the guard holds anyway.

Allowances are per crawler. The reactor has one resolver for the whole process, so the crawler
on whose behalf a connection is made is told through a context variable: webcrawl's download
handler (:class:`webcrawl.net.handler.GuardedDownloadHandler`) opens its connections inside
:func:`connecting_for` with its crawler's own policy, and the answer is judged by that policy
alone. A lookup made outside any such context (another download handler that still resolves
through the reactor, such as Scrapy's own HTTP/1.1 or HTTP/2 handler) is judged by the resolver's
fallback policy: what every crawler of the process allows (the common part of their allowances),
so one crawler's wider allowance never opens another's connections.

Refusals are remembered for ``refusal_seconds`` (:meth:`GuardedResolver.recent_refusal`): the
middleware turns the resulting DNS error into ``IgnoreRequest`` with a stat, and refuses retries of
the same host without another lookup.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from scrapy.resolver import CachingHostnameResolver
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import (
    IAddress,
    IHostnameResolver,
    IResolutionReceiver,
)
from zope.interface import implementer, provider

from webcrawl.net.addresses import AddressPolicy, IPNetwork, common_networks, parse_networks

if TYPE_CHECKING:
    from typing import Self

logger = logging.getLogger(__name__)

REFUSAL_MEMORY = 4096

# The policy of the crawler making the connection being set up (see the module docstring).
_CONNECTING_FOR: ContextVar[AddressPolicy | None] = ContextVar("webcrawl_connecting_for",
                                                                 default=None)


@contextmanager
def connecting_for(policy: AddressPolicy | None) -> Iterator[None]:
    """Lookups started inside this block (connections opened by a download started here) are
    judged by ``policy`` rather than by the resolver's fallback; ``None`` changes nothing."""
    token = _CONNECTING_FOR.set(policy)
    try:
        yield
    finally:
        _CONNECTING_FOR.reset(token)


class Refusal:
    """A refused answer: why, which addresses, until when it is remembered."""

    __slots__ = ("reason", "addresses", "until")

    def __init__(self, reason: str, addresses: tuple[str, ...], until: float) -> None:
        self.reason = reason
        self.addresses = addresses
        self.until = until


@implementer(IHostnameResolver)
class GuardedResolver:
    """An ``IHostnameResolver`` that withholds answers containing a refused address."""

    # zope interfaces are typed Any here: without the mypy-zope plugin mypy reads their methods
    # as unbound functions.
    def __init__(self, reactor: Any, policy: AddressPolicy, inner: Any, *,
                 refusal_seconds: float = 60.0) -> None:
        self.reactor = reactor
        self.policy = policy
        self.inner = inner
        self.refusal_seconds = refusal_seconds
        self._refusals: OrderedDict[str, dict[frozenset[Any], Refusal]] = OrderedDict()
        self._crawlers = 0  # crawlers whose allowances make the fallback

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> Self:
        # Scrapy passes the CrawlerProcess here, not a Crawler: only its settings are used.
        settings = crawler.settings
        cache_size = settings.getint("DNSCACHE_SIZE") if settings.getbool("DNSCACHE_ENABLED") else 0
        inner = CachingHostnameResolver(reactor, cache_size)
        policy = AddressPolicy(parse_networks(
            settings.getlist("WEBCRAWL_ALLOWED_PRIVATE_NETWORKS")))
        return cls(reactor, policy, inner)

    def install_on_reactor(self) -> None:
        self.reactor.installNameResolver(self)

    def allow(self, networks: Iterable[IPNetwork]) -> None:
        """A crawler of the process brings its allowance: the fallback allows only what every
        such crawler allows (see the module docstring). The first replaces the project settings'
        allowance the resolver started with."""
        own = AddressPolicy(networks).allowed
        if self._crawlers:
            own = common_networks(self.policy.allowed, own)
        self.policy = AddressPolicy(own)
        self._crawlers += 1

    def recent_refusal(self, host: str, policy: AddressPolicy | None = None) -> Refusal | None:
        """The refusal of ``host`` in the last ``refusal_seconds``, if any: with ``policy``, one
        whose addresses that policy refuses too (several crawlers in a process each have their
        own allowance, and one's success must not hide another's refusal)."""
        kept = self._refusals.get(host.lower())
        if not kept:
            return None
        now = time.monotonic()
        for key, refusal in list(kept.items()):
            if refusal.until <= now:
                del kept[key]
        if not kept:
            del self._refusals[host.lower()]
            return None
        for refusal in reversed(kept.values()):
            if policy is None or any(policy.refusal(a) is not None for a in refusal.addresses):
                return refusal
        return None

    def resolveHostName(  # noqa: N802 (Twisted's interface)
        self,
        resolutionReceiver: Any,  # noqa: N803 (Twisted's names, passed by keyword)
        hostName: str,  # noqa: N803
        portNumber: int = 0,  # noqa: N803
        addressTypes: Sequence[type[IAddress]] | None = None,  # noqa: N803
        transportSemantics: str = "TCP",  # noqa: N803
    ) -> Any:
        policy = _CONNECTING_FOR.get() or self.policy
        guard = _GuardingReceiver(resolutionReceiver, hostName, self, policy)
        started = self.inner.resolveHostName(
            guard, hostName, portNumber, addressTypes, transportSemantics
        )
        return guard.resolution or started

    def _judge(self, host: str, addresses: list[Any], policy: AddressPolicy | None = None
               ) -> list[Any]:
        """The addresses to hand on: all of them, or none if any is refused by ``policy`` (by
        default the fallback)."""
        policy = policy or self.policy
        hosts = tuple(getattr(a, "host", "") for a in addresses)
        for text in hosts:
            reason = policy.refusal(text)
            if reason is not None:
                until = time.monotonic() + self.refusal_seconds
                self._remember(host, Refusal(reason, hosts, until), policy)
                logger.debug("SSRF guard: %s resolves to %s (%s): refused", host, text, reason)
                return []
        kept = self._refusals.get(host.lower())
        if kept is not None:
            kept.pop(frozenset(policy.allowed), None)  # this allowance's refusal is over
            if not kept:
                del self._refusals[host.lower()]
        return addresses

    def _remember(self, host: str, refusal: Refusal, policy: AddressPolicy) -> None:
        kept = self._refusals.setdefault(host.lower(), {})
        kept.pop(frozenset(policy.allowed), None)
        kept[frozenset(policy.allowed)] = refusal
        self._refusals.move_to_end(host.lower())
        while len(self._refusals) > REFUSAL_MEMORY:
            self._refusals.popitem(last=False)


@provider(IResolutionReceiver)
class _GuardingReceiver:
    """Buffers an answer and passes it on only once the whole of it has been judged."""

    def __init__(self, receiver: Any, host: str, guard: GuardedResolver,
                 policy: AddressPolicy) -> None:
        self.receiver = receiver
        self.host = host
        self.guard = guard
        self.policy = policy
        self.addresses: list[IPv4Address | IPv6Address] = []
        self.resolution: Any = None

    def resolutionBegan(self, resolution: Any) -> None:  # noqa: N802
        self.resolution = resolution
        self.receiver.resolutionBegan(resolution)

    def addressResolved(self, address: Any) -> None:  # noqa: N802
        if isinstance(address, (IPv4Address, IPv6Address)):
            self.addresses.append(address)

    def resolutionComplete(self) -> None:  # noqa: N802
        for address in self.guard._judge(self.host, self.addresses, self.policy):
            self.receiver.addressResolved(address)
        self.receiver.resolutionComplete()
