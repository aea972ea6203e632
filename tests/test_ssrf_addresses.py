"""The address policy of the SSRF guard."""

from __future__ import annotations

import pytest

from webcrawl.net import AddressPolicy, classify, literal_address, parse_networks


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("8.8.8.8", None), ("2606:4700:4700::1111", None),
        ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"),
        ("10.0.0.1", "private"), ("172.16.5.4", "private"), ("192.168.1.1", "private"),
        ("100.64.0.1", "private"), ("fd12:3456::1", "private"),
        ("169.254.1.1", "link_local"), ("fe80::1", "link_local"), ("fe80::1%eth0", "link_local"),
        ("169.254.169.254", "metadata"), ("fd00:ec2::254", "metadata"),
        ("169.254.170.2", "metadata"), ("100.100.100.200", "metadata"),
        ("168.63.129.16", "metadata"),
        ("0.0.0.0", "unspecified"), ("0.1.2.3", "unspecified"), ("::", "unspecified"),
        ("224.0.0.251", "multicast"), ("ff02::1", "multicast"),
        ("192.0.2.1", "reserved"), ("198.18.0.1", "reserved"), ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        # IPv6 spellings of IPv4 addresses are judged by the IPv4 address.
        ("::ffff:127.0.0.1", "loopback"), ("::ffff:169.254.169.254", "metadata"),
        ("::ffff:10.1.1.1", "private"), ("64:ff9b::a9fe:a9fe", "metadata"),
        ("2002:7f00:1::", "loopback"), ("::7f00:1", "loopback"),
        ("not an address", "invalid"),
    ],
)
def test_default_policy(address, reason):
    assert AddressPolicy().refusal(address) == reason


def test_allowed_networks_override():
    policy = AddressPolicy(["127.0.0.2/32", "10.0.0.0/8", "fd00::/8"])
    assert policy.refusal("127.0.0.2") is None
    assert policy.refusal("::ffff:127.0.0.2") is None
    assert policy.refusal("127.0.0.3") == "loopback"
    assert policy.refusal("10.9.9.9") is None
    assert policy.refusal("fd00::1") is None
    assert policy.refusal("192.168.0.1") == "private"


def test_allow_widens():
    policy = AddressPolicy()
    policy.allow(parse_networks(["192.168.0.0/16"]))
    policy.allow(["192.168.0.0/16"])
    assert policy.refusal("192.168.3.3") is None
    assert len(policy.allowed) == 1


def test_parse_networks():
    assert [str(n) for n in parse_networks("10.0.0.0/8, 127.0.0.2")] == ["10.0.0.0/8",
                                                                          "127.0.0.2/32"]
    with pytest.raises(ValueError, match="WEBCRAWL_ALLOWED_PRIVATE_NETWORKS: 'intranet'"):
        parse_networks(["intranet"])


@pytest.mark.parametrize(
    ("host", "literal"),
    [("127.0.0.1", "127.0.0.1"), ("[::1]", "::1"), ("::1", "::1"), ("example.com", None),
     ("127.1", None), ("2130706433", None)],  # odd IPv4 spellings are names: the resolver judges
)
def test_literal_address(host, literal):
    found = literal_address(host)
    assert (str(found) if found else None) == literal


def test_classify_public():
    from ipaddress import ip_address

    assert classify(ip_address("1.1.1.1")) is None


@pytest.mark.parametrize("address", ["169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254",
                                     "64:ff9b::a9fe:a9fe", "169.254.170.2", "100.100.100.200"])
@pytest.mark.parametrize("allowed", [["169.254.0.0/16", "fd00::/8", "100.64.0.0/10"],
                                     ["0.0.0.0/0", "::/0"]])
def test_metadata_addresses_are_refused_whatever_the_allowance(address, allowed):
    policy = AddressPolicy(allowed)
    assert policy.refusal(address) == "metadata"
    assert policy.refusal("169.254.10.10" if ":" not in address else "fd00::1") is None


@pytest.mark.parametrize("value", ["169.254.169.254", "169.254.169.254/32", "fd00:ec2::254/128",
                                   "::ffff:169.254.169.254"])
def test_allowing_a_metadata_address_by_name_is_an_error(value):
    with pytest.raises(ValueError, match=r"WEBCRAWL_ALLOWED_PRIVATE_NETWORKS: .* cloud metadata"):
        parse_networks([value])
