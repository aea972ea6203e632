"""GuardedResolver: answers with a refused address are withheld whole, at every lookup.

The inner resolver here is a static table (like /etc/hosts) that the test can rewrite between two
lookups, which is what DNS rebinding does; Twisted's own resolver is used in the crawl tests.
"""

from __future__ import annotations

import pytest
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IHostnameResolver, IResolutionReceiver
from zope.interface import implementer, provider

from webcrawl.net import AddressPolicy, GuardedResolver


class HostResolution:
    def __init__(self, name: str) -> None:
        self.name = name

    def cancel(self) -> None:
        pass


@implementer(IHostnameResolver)
class TableResolver:
    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table

    def resolveHostName(self, receiver, hostName, portNumber=0, addressTypes=None,  # noqa: N802, N803
                        transportSemantics="TCP"):  # noqa: N803
        resolution = HostResolution(hostName)
        receiver.resolutionBegan(resolution)
        for address in self.table.get(hostName, []):
            kind = IPv6Address if ":" in address else IPv4Address
            receiver.addressResolved(kind("TCP", address, portNumber))
        receiver.resolutionComplete()
        return resolution


@provider(IResolutionReceiver)
class Answer:
    def __init__(self) -> None:
        self.began = False
        self.addresses: list[str] = []
        self.complete = False

    def resolutionBegan(self, resolution) -> None:  # noqa: N802
        self.began = True

    def addressResolved(self, address) -> None:  # noqa: N802
        self.addresses.append(address.host)

    def resolutionComplete(self) -> None:  # noqa: N802
        self.complete = True


def lookup(resolver: GuardedResolver, host: str) -> list[str]:
    answer = Answer()
    resolver.resolveHostName(answer, host, 80)
    assert answer.began and answer.complete
    return answer.addresses


@pytest.fixture
def table() -> dict[str, list[str]]:
    return {
        "public.example": ["93.184.215.14"],
        "localhost": ["127.0.0.1", "::1"],
        "mixed.example": ["93.184.215.14", "10.0.0.5"],
        "metadata.example": ["169.254.169.254"],
        "lab.example": ["127.0.0.2"],
    }


def test_public_answers_pass(table):
    resolver = GuardedResolver(None, AddressPolicy(), TableResolver(table))
    assert lookup(resolver, "public.example") == ["93.184.215.14"]
    assert resolver.recent_refusal("public.example") is None


@pytest.mark.parametrize(
    ("host", "reason"),
    [("localhost", "loopback"), ("mixed.example", "private"), ("metadata.example", "metadata")],
)
def test_answers_with_a_refused_address_are_withheld_whole(table, host, reason):
    resolver = GuardedResolver(None, AddressPolicy(), TableResolver(table))
    assert lookup(resolver, host) == []
    refusal = resolver.recent_refusal(host.upper())
    assert refusal is not None and refusal.reason == reason


def test_allowed_networks_pass(table):
    resolver = GuardedResolver(None, AddressPolicy(["127.0.0.2/32"]), TableResolver(table))
    assert lookup(resolver, "lab.example") == ["127.0.0.2"]
    assert lookup(resolver, "localhost") == []
    resolver.allow(AddressPolicy(["127.0.0.0/8", "::1/128"]).allowed)  # the process's crawler
    assert lookup(resolver, "localhost") == ["127.0.0.1", "::1"]


def test_dns_rebinding_is_caught_at_the_next_lookup(table):
    resolver = GuardedResolver(None, AddressPolicy(), TableResolver(table))
    assert lookup(resolver, "public.example") == ["93.184.215.14"]
    table["public.example"] = ["127.0.0.1"]  # the attacker's DNS now answers loopback
    assert lookup(resolver, "public.example") == []
    assert resolver.recent_refusal("public.example").reason == "loopback"
    table["public.example"] = ["93.184.215.14"]
    assert lookup(resolver, "public.example") == ["93.184.215.14"]
    assert resolver.recent_refusal("public.example") is None


def test_refusals_are_forgotten_after_their_time(table):
    resolver = GuardedResolver(None, AddressPolicy(), TableResolver(table), refusal_seconds=0)
    lookup(resolver, "localhost")
    assert resolver.recent_refusal("localhost") is None


def test_install_on_reactor_uses_the_name_resolver_slot():
    class Reactor:
        installed = None

        def installNameResolver(self, resolver):  # noqa: N802
            self.installed = resolver

    reactor = Reactor()
    resolver = GuardedResolver(reactor, AddressPolicy(), TableResolver({}))
    resolver.install_on_reactor()
    assert reactor.installed is resolver


def test_each_connection_is_judged_by_the_allowance_of_the_crawler_making_it(table):
    """Two crawlers of one process: a lookup made for one crawler is judged by that crawler's
    allowance alone; one made for neither (another download handler) by what both allow."""
    from webcrawl.net.resolver import connecting_for

    lab, other = AddressPolicy(["127.0.0.2/32"]), AddressPolicy(["10.0.0.0/8"])
    resolver = GuardedResolver(None, AddressPolicy(), TableResolver(table))
    resolver.allow(lab.allowed)
    resolver.allow(other.allowed)
    assert lookup(resolver, "lab.example") == []  # the fallback: only what both allow
    resolver._refusals.clear()
    with connecting_for(other):
        assert lookup(resolver, "lab.example") == []
    assert resolver.recent_refusal("lab.example").reason == "loopback"
    with connecting_for(lab):
        assert lookup(resolver, "lab.example") == ["127.0.0.2"]
        with connecting_for(other):
            assert lookup(resolver, "lab.example") == []
        assert lookup(resolver, "lab.example") == ["127.0.0.2"]
    # One crawler's success does not hide the other's refusal (its middleware counts it).
    assert resolver.recent_refusal("lab.example", other).reason == "loopback"
    assert resolver.recent_refusal("lab.example", lab) is None
    with connecting_for(lab):
        assert lookup(resolver, "metadata.example") == []  # never, whatever the allowance


def test_the_fallback_allows_only_what_every_crawler_of_the_process_allows(table):
    """Fails closed: a download handler that does not say which crawler connects gets the
    common part of the crawlers' allowances, never one crawler's wider one (nor a crawler's with
    the guard off, which allows every address)."""
    resolver = GuardedResolver(None, AddressPolicy(["10.0.0.0/8"]), TableResolver(table))
    resolver.allow(AddressPolicy(["127.0.0.0/8"]).allowed)  # the first crawler replaces it
    assert lookup(resolver, "lab.example") == ["127.0.0.2"]
    assert lookup(resolver, "localhost") == []  # ::1 is not in 127.0.0.0/8: the whole answer
    resolver.allow(AddressPolicy(["0.0.0.0/0", "::/0"]).allowed)  # a crawler with the guard off
    assert lookup(resolver, "lab.example") == ["127.0.0.2"]
    resolver.allow(AddressPolicy(["127.0.0.2/32", "10.0.0.0/8"]).allowed)
    assert lookup(resolver, "lab.example") == ["127.0.0.2"]
    table["lab.example"] = ["127.0.0.3"]
    assert lookup(resolver, "lab.example") == []
    assert lookup(resolver, "metadata.example") == []
