"""The network side of a crawl: which addresses the crawler may connect to, checked when it
connects, and the HTTP/1.1 client its download handler fetches with (``webcrawl.net.http1``)."""

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
