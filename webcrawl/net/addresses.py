"""Which IP addresses the crawler may connect to: the address half of the SSRF guard.

An address is refused when it is not a public unicast address, unless it falls in one of the
networks the caller allows (``WEBCRAWL_ALLOWED_PRIVATE_NETWORKS``, or a site's allowance, for
intranet sites and tests). Each refusal has a reason, used as the stat suffix
``ssrf/refused/<reason>``:

| reason | addresses |
| --- | --- |
| ``metadata`` | cloud metadata and host-agent endpoints (169.254.169.254, fd00:ec2::254, ...) |
| ``unspecified`` | 0.0.0.0/8 and :: (connecting to them reaches the local host) |
| ``loopback`` | 127.0.0.0/8, ::1 |
| ``link_local`` | 169.254.0.0/16, fe80::/10 |
| ``private`` | RFC 1918, 100.64.0.0/10 (carrier-grade NAT), fc00::/7 (unique local) |
| ``multicast`` | 224.0.0.0/4, ff00::/8 |
| ``reserved`` | anything else not globally routable (documentation, benchmarking, 240/4...) |

IPv6 forms that embed an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible
``::a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``) are judged by the IPv4 address they
lead to.

Cloud metadata addresses are refused whatever the allowance: no network a crawl allows can let
a page make the crawler fetch instance credentials. Naming one of them alone in an allowance is
an error (:func:`parse_networks`), since it can only be a mistake.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean... instance metadata
        "169.254.169.253",  # AWS VPC DNS
        "169.254.169.123",  # AWS time sync
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.170.23",  # AWS EKS pod identity
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::253",  # AWS VPC DNS over IPv6
        "fd00:ec2::23",  # AWS EKS pod identity over IPv6
        "100.100.100.200",  # Alibaba Cloud metadata
        "168.63.129.16",  # Azure wire server (a public address, reachable only from Azure)
        "192.0.0.192",  # Oracle Cloud metadata
    )
)
_PRIVATE: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_UNSPECIFIED_V4 = ipaddress.ip_network("0.0.0.0/8")


def parse_networks(values: Iterable[str], setting: str = "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS"
                   ) -> tuple[IPNetwork, ...]:
    """CIDRs (or single addresses) as networks; ValueError naming the setting on a bad one."""
    if isinstance(values, str):
        values = [part for part in values.replace(",", " ").split() if part]
    networks = []
    for value in values:
        try:
            network = ipaddress.ip_network(str(value).strip(), strict=False)
        except ValueError:
            raise ValueError(
                f"{setting}: {value!r} is not an IP network: expected CIDRs such as "
                "'10.0.0.0/8' or '127.0.0.2/32'"
            ) from None
        if network.num_addresses == 1 and _effective(network.network_address) in METADATA_ADDRESSES:
            raise ValueError(f"{setting}: {value!r} is a cloud metadata address, which the SSRF "
                             "guard never allows; remove it")
        networks.append(network)
    return tuple(networks)


def _effective(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address leads to, if it embeds one; else the address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if int(address) >> 32 == 0 and int(address) > 1:  # deprecated IPv4-compatible ::a.b.c.d
            return ipaddress.IPv4Address(int(address))
    return address


def classify(address: IPAddress) -> str | None:
    """The reason ``address`` is not public (see the module table), or None if it is."""
    address = _effective(address)
    if address in METADATA_ADDRESSES:
        return "metadata"
    if address.is_unspecified or (address.version == 4 and address in _UNSPECIFIED_V4):
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link_local"
    if address.is_multicast:
        return "multicast"
    if any(address in network for network in _PRIVATE if network.version == address.version):
        return "private"
    # Everything else Python does not call global: documentation, benchmarking, 240/4, ...
    if not address.is_global:
        return "reserved"
    return None


class AddressPolicy:
    """Refuse non-public addresses except those in ``allowed`` networks; metadata addresses are
    refused even inside an allowed network."""

    def __init__(self, allowed: Iterable[str | IPNetwork] = ()) -> None:
        self.allowed: tuple[IPNetwork, ...] = ()
        self.allow(allowed)

    def allow(self, networks: Iterable[str | IPNetwork]) -> None:
        """Add networks to the allowance (used to merge several crawlers' allowances)."""
        parsed = [n if not isinstance(n, str) else parse_networks([n])[0] for n in networks]
        self.allowed = tuple(dict.fromkeys((*self.allowed, *parsed)))

    def refusal(self, address: str | IPAddress) -> str | None:
        """Why a connection to ``address`` is refused, or None when it is allowed.
        An unparsable address is refused as ``invalid``."""
        try:
            ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        except ValueError:
            return "invalid"
        if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
            ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
        if _effective(ip) in METADATA_ADDRESSES:
            return "metadata"  # before the allowance: never allowed
        for candidate in {ip, _effective(ip)}:
            if any(candidate in net for net in self.allowed if net.version == candidate.version):
                return None
        return classify(ip)


def common_networks(one: Iterable[IPNetwork], other: Iterable[IPNetwork]) -> tuple[IPNetwork, ...]:
    """The addresses both allowances allow, as networks (two CIDR networks are nested or
    disjoint, so each overlap is the smaller of the two)."""
    other = tuple(other)
    common = []
    for a in one:
        for b in other:
            if a.version != b.version:
                continue
            if a.subnet_of(b):  # type: ignore[arg-type]
                common.append(a)
            elif b.subnet_of(a):  # type: ignore[arg-type]
                common.append(b)
    return tuple(dict.fromkeys(common))


@lru_cache(maxsize=4096)  # asked for every request and hop: a name fails two parses each time
def literal_address(host: str) -> IPAddress | None:
    """The IP address a URL host spells literally (``[::1]`` too), or None for a name."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
