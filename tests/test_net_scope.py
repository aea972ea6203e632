"""The connection gate (webcrawl.net.scope): scheme, readable origin, allowed domains and literal
addresses, judged for one crawler."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from webcrawl.net import AddressPolicy
from webcrawl.net.scope import ConnectGate, Scope, origin


@pytest.mark.parametrize(
    ("url", "found"),
    [
        ("http://Example.com/a", ("http", "example.com", 80)),
        ("https://example.com:8443/", ("https", "example.com", 8443)),
        ("http://[::1]:81/", ("http", "::1", 81)),
        # Ports that do not parse: no origin at all (robots.txt could not be asked for one).
        ("http://example.com:99999/", None),
        ("http://example.com:8o/", None),
        ("http://example.com:-1/", None),
        ("http://example.com: 80/", None),
        ("http://example.com:0/", None),
        ("http:///path", None),
        ("ftp://example.com/", None),
    ],
)
def test_origin(url, found):
    assert origin(urlsplit(url)) == found


@pytest.mark.parametrize(
    ("url", "family", "reason"),
    [
        ("http://shop.example:99999/", "ssrf", "origin"),
        ("https://shop.example:x/", "ssrf", "origin"),
        ("http://127.0.0.2:99999/", "ssrf", "origin"),
        ("http://127.0.0.2:0/", "ssrf", "origin"),
        ("file:///etc/passwd", "ssrf", "scheme"),
        ("http://other.example/", "offsite", "offsite"),
        ("http://notshop.example/", "offsite", "offsite"),
        ("http://127.0.0.61/robots.txt", "offsite", "offsite"),
        ("http://127.0.0.2:8080/", None, None),  # allowed network, allowed domain
        ("http://www.shop.example/", None, None),  # names are judged when connecting
        ("http://SHOP.example./a", None, None),
    ],
)
def test_gate(url, family, reason):
    gate = ConnectGate(AddressPolicy(["127.0.0.0/8"]), Scope(["shop.example", "127.0.0.2"]))
    refusal = gate.refusal(urlsplit(url))
    if family is None:
        assert refusal is None
    else:
        assert refusal is not None and (refusal.family, refusal.reason) == (family, reason)


def test_without_domains_every_host_is_in_scope_and_addresses_still_judged():
    gate = ConnectGate(AddressPolicy())
    assert gate.refusal(urlsplit("http://anything.example/")) is None
    refusal = gate.refusal(urlsplit("http://10.0.0.1/"))
    assert (refusal.family, refusal.reason, refusal.host) == ("ssrf", "private", "10.0.0.1")
    assert gate.refusal(urlsplit("http://169.254.169.254/")).reason == "metadata"


def test_a_remembered_decision_follows_a_wider_allowance_and_a_new_scope():
    policy = AddressPolicy()
    gate = ConnectGate(policy)
    url = urlsplit("http://10.0.0.7:8080/a")
    assert gate.refusal(url).reason == "private"
    assert gate.refusal(urlsplit("http://10.0.0.7:8080/b")).reason == "private"  # remembered
    policy.allow(["10.0.0.0/8"])
    assert gate.refusal(url) is None  # the allowance changed: judged again
    gate.scope = Scope(["shop.example"])
    assert gate.refusal(url).reason == "offsite"
    gate.scope = Scope(["10.0.0.7"])
    assert gate.refusal(url) is None


def test_the_memory_is_bounded():
    from webcrawl.net import scope as scope_module

    gate = ConnectGate(AddressPolicy(["127.0.0.0/8"]))
    for i in range(scope_module.MEMO_SIZE + 10):
        assert gate.refusal(urlsplit(f"http://127.0.{i // 250}.{i % 250 + 1}/")) is None
    assert len(gate._memo) <= scope_module.MEMO_SIZE
    assert gate.refusal(urlsplit("http://10.1.2.3/")).reason == "private"
