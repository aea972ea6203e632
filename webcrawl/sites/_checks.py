"""Format checks for single values of a site file: URLs, hosts, networks, regexes, selectors,
currency codes, structured-data paths, date formats.

Each check takes the :class:`Table` the value came from (for the file name), the value's field path
and the value; it returns the value in its typed form or raises the :class:`SiteConfigError` that
says what was expected.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

from selectolax.lexbor import LexborHTMLParser, SelectolaxError

from webcrawl.parse.amounts import CURRENCY_CODES
from webcrawl.parse.structured import PATH_PATTERN
from webcrawl.parse.typed import check_date_format
from webcrawl.sites._reader import Table
from webcrawl.sites.schema import Network

_HOST_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ATTR = re.compile(r"[A-Za-z_:][-A-Za-z0-9_:.]*")
_EXTENSION = re.compile(r"[a-z0-9]+(\.[a-z0-9]+)*")
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
# A contact is an http(s) URL or an e-mail address somewhere in the user agent.
_CONTACT = re.compile(r"https?://[^\s;)]+\.[^\s;)]+|[\w.+-]+@[\w-]+(\.[\w-]+)+")
# One parser for every selector check: parsing a selector against it is all we need.
_PROBE = LexborHTMLParser("<p></p>")


def url(t: Table, path: str, value: Any) -> str:
    """An absolute http(s) URL with a host."""
    expected = "an absolute http:// or https:// URL"
    if not isinstance(value, str):
        raise t.error(path, value, expected)
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise t.error(path, value, expected) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or " " in value:
        raise t.error(path, value, expected)
    return value


def host(t: Table, path: str, value: Any) -> str:
    """A host name or IP address, lower-cased, without scheme, port or path."""
    expected = "a host name like 'example.com' or an IP address (no scheme, port or path)"
    if not isinstance(value, str):
        raise t.error(path, value, expected)
    name = value.lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    labels = name.split(".")
    # An all-digit last label is no DNS name: "0.0.2" would otherwise cover "127.0.0.2".
    if (not name or len(name) > 253 or labels[-1].isdigit()
            or not all(_HOST_LABEL.fullmatch(x) for x in labels)):
        raise t.error(path, value, expected)
    return name


def network(t: Table, path: str, value: Any) -> Network:
    """A CIDR network such as ``10.0.0.0/8`` (host bits zero) or a single address."""
    expected = "a network in CIDR notation like '10.0.0.0/8' (host bits zero) or an IP address"
    if not isinstance(value, str):
        raise t.error(path, value, expected)
    try:
        return ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise t.error(path, value, expected) from None


def regex(t: Table, path: str, value: Any) -> re.Pattern[str]:
    """A Python regular expression that compiles."""
    if not isinstance(value, str) or not value:
        raise t.error(path, value, "a non-empty Python regular expression")
    try:
        return re.compile(value)
    except re.error as exc:
        raise t.error(path, value, f"a Python regular expression that compiles ({exc})") from None


def css(t: Table, path: str, value: Any) -> str:
    """A CSS selector that selectolax (Lexbor) parses."""
    expected = "a CSS selector that selectolax parses (no ::text or ::attr(); use attr)"
    if not isinstance(value, str) or not value.strip():
        raise t.error(path, value, expected)
    try:
        _PROBE.css(value)
    except SelectolaxError:
        raise t.error(path, value, expected) from None
    return value


def name(t: Table, path: str, value: Any) -> str:
    """An identifier: letters, digits and underscores, not starting with a digit."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise t.error(path, value, "a name of letters, digits and '_' (not starting with a digit)")
    return value


def attribute(t: Table, path: str, value: Any) -> str:
    if not isinstance(value, str) or not _ATTR.fullmatch(value):
        raise t.error(path, value, "an HTML attribute name such as 'href' or 'data-price'")
    return value


def extension(t: Table, path: str, value: Any) -> str:
    if not isinstance(value, str) or not _EXTENSION.fullmatch(value):
        raise t.error(path, value,
                      "a lower-case file extension without the leading dot, e.g. 'pdf'")
    return value


def dotted_path(value: str) -> bool:
    return _DOTTED.fullmatch(value) is not None


def has_contact(value: str) -> bool:
    return _CONTACT.search(value) is not None


def currency(t: Table, path: str, value: Any) -> str:
    """An ISO 4217 currency code, in capitals."""
    if not isinstance(value, str) or value not in CURRENCY_CODES:
        raise t.error(path, value, "an ISO 4217 currency code in capitals, e.g. 'EUR' or 'USD'")
    return value


def structured_path(t: Table, path: str, value: Any) -> str:
    """A path into a page's structured data: a schema.org type, then keys."""
    if not isinstance(value, str) or not PATH_PATTERN.fullmatch(value):
        raise t.error(path, value, "a schema.org type then dotted keys, e.g. "
                      "'Product.offers.price'")
    return value


def date_format(t: Table, path: str, value: Any) -> str:
    """A ``strptime`` format that reads a day, a month and a year."""
    if not isinstance(value, str) or not check_date_format(value):
        raise t.error(path, value, "a strptime format with day, month and year, e.g. "
                      "'%d/%m/%Y'")
    return value


def proxy(t: Table, path: str, value: Any) -> str:
    """An http(s) proxy URL (credentials allowed; never repeated in the error)."""
    from webcrawl.net.proxies import parse_proxy

    if not isinstance(value, str):
        raise t.error(path, "...", "an http:// or https:// proxy URL")
    try:
        parse_proxy(value, path)
    except ValueError:
        raise t.error(path, value.rpartition("@")[2], "an http:// or https:// proxy URL such as "
                      "'http://user:secret@gw.example:8000'") from None
    return value
