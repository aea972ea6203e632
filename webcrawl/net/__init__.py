"""The network side of a crawl: which addresses the crawler may connect to, checked when it
connects, and the download handler that fetches (``webcrawl.net.handler``: aiohttp under the
SSRF guard, with proxies, verified TLS, TTL-bound DNS and bytes counted at the socket)."""

from __future__ import annotations

from webcrawl.net.addresses import (
    METADATA_ADDRESSES,
    AddressPolicy,
    classify,
    literal_address,
    parse_networks,
)
from webcrawl.net.resolver import GuardedResolver

__all__ = [
    "METADATA_ADDRESSES", "AddressPolicy", "GuardedResolver", "classify", "literal_address",
    "parse_networks",
]
