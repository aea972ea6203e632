"""The validated, typed form of a site file.

Every object here is a frozen dataclass built by :mod:`webcrawl.sites.load` from a TOML file that
passed validation, so code that receives one may rely on the invariants stated in each docstring
without checking again. docs/sites.md describes the file format field by field.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BILLING_MODELS",
    "DEFAULT_DENIED_EXTENSIONS",
    "OBJECTIVES",
    "TIER_NAMES",
    "TRUST_MODES",
    "Billing",
    "Budget",
    "FieldRule",
    "Limits",
    "ListingRule",
    "Network",
    "NetworkOptions",
    "Objective",
    "PageType",
    "Politeness",
    "Reserves",
    "SiteConfig",
    "TierField",
    "TierRule",
    "Trust",
    "TrustMode",
    "TrustRule",
]

Billing = Literal["bandwidth", "credits", "requests"]
Objective = Literal["freshness", "events"]
TrustMode = Literal["learn", "always", "never"]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

BILLING_MODELS: tuple[Billing, ...] = ("bandwidth", "credits", "requests")
OBJECTIVES: tuple[Objective, ...] = ("freshness", "events")
TRUST_MODES: tuple[TrustMode, ...] = ("learn", "always", "never")
# Tier names are sugar for the numbers: higher is worth more.
TIER_NAMES: dict[str, int] = {"low": 1, "normal": 2, "high": 3, "critical": 4}
# Scrapy's IGNORED_EXTENSIONS (copied: this floor does not import Scrapy) minus "rss", because
# feeds are one of the cheap change signals a site may want followed.
DEFAULT_DENIED_EXTENSIONS: frozenset[str] = frozenset("""
    7z 7zip bz2 rar tar tar.gz xz zip mng pct bmp gif jpg jpeg png pst psp tif tiff ai drw dxf
    eps ps svg cdr ico webp mp3 wma ogg wav ra aac mid au aiff 3gp asf asx avi mov mp4 mpg qt rm
    swf wmv m4a m4v flv webm xls xlsm xlsx xltm xltx potm potx ppt pptm pptx pps doc docb docm
    docx dotm dotx odt ods odg odp css pdf exe bin dmg iso apk jar sh rb js hta bat cpl msi msp
    py
""".split())


@dataclass(frozen=True)
class FieldRule:
    """One record field: the text (``attr is None``) or an attribute of the nodes ``css`` matches.

    ``css`` parses with selectolax (Lexbor). ``many`` keeps every match as a list; otherwise the
    first match is the value. ``type`` is one of ``FIELD_TYPES`` (``webcrawl.parse.typed``);
    ``currency`` (an ISO 4217 code) only on a ``price``, ``date_format`` (a ``strptime`` format
    with day, month and year) only on a ``date``. ``jsonld`` and ``microdata`` are paths
    (``Type.key.key``) into the page's structured data, read before ``css``; ``css`` is ``None``
    only beside one of them. Listing summaries and links have no structured paths.
    """

    name: str
    css: str | None = None
    attr: str | None = None
    many: bool = False
    type: str = "text"
    currency: str | None = None
    date_format: str | None = None
    jsonld: str | None = None
    microdata: str | None = None


@dataclass(frozen=True)
class ListingRule:
    """How a listing page shows its items: each node matching ``item`` is one item, ``link``
    (relative to the item, an attribute rule, ``href`` by default) points at the item's own page,
    ``summary`` fields (relative to the item) tell whether the item changed since the last visit.
    """

    item: str
    link: FieldRule
    summary: tuple[FieldRule, ...] = ()


@dataclass(frozen=True)
class TierRule:
    """Pages of the type whose URL matches ``url_pattern`` (``re.search``) have tier ``tier``."""

    url_pattern: re.Pattern[str]
    tier: int


@dataclass(frozen=True)
class TierField:
    """The tier named by a field of the extracted record: its value (text, stripped; a number
    or boolean as TOML would write it, a whole float without ``.0``) looked up in ``tiers``. A
    value not listed, or a missing field, leaves the tier to the URL rules and the page type.
    The field is never a ``price`` (a table, not a value)."""

    field: str
    tiers: tuple[tuple[str, int], ...]

    def tier_for(self, record: Mapping[str, Any] | None) -> int | None:
        if not record:
            return None
        value = record.get(self.field)
        if isinstance(value, list):  # a ``many`` field: its first value
            value = value[0] if value else None
        if value is None:
            return None
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, float) and value.is_integer():
            text = str(int(value))  # a number field's 3.0 is looked up as "3"
        else:
            text = str(value).strip()
        for key, tier in self.tiers:
            if key == text:
                return tier
        return None


@dataclass(frozen=True)
class PageType:
    """A kind of page, recognised by ``url_pattern`` (searched in the absolute URL).

    ``tier`` is the business value, 1 (low) to 4 (critical); ``value_field`` (a record field)
    and ``value_rules`` (URL rules, first match wins) override it, in that order
    (:meth:`tier_for`). ``volatile`` names fields of ``fields`` that are extracted but left out
    of the record hash, so their churn is never taken for a change. ``value_field.field`` is one
    of ``fields``.
    """

    name: str
    url_pattern: re.Pattern[str]
    tier: int
    fields: tuple[FieldRule, ...] = ()
    volatile: frozenset[str] = frozenset()
    listing: ListingRule | None = None
    value_rules: tuple[TierRule, ...] = ()
    value_field: TierField | None = None

    def matches(self, url: str) -> bool:
        return self.url_pattern.search(url) is not None

    @property
    def has_overrides(self) -> bool:
        return bool(self.value_rules) or self.value_field is not None

    def override_tier(self, url: str | None, record: Mapping[str, Any] | None = None) -> int | None:
        """The tier a record field or URL rule gives this page, or ``None`` when none applies."""
        if self.value_field is not None:
            tier = self.value_field.tier_for(record)
            if tier is not None:
                return tier
        if url is not None:
            for rule in self.value_rules:
                if rule.url_pattern.search(url) is not None:
                    return rule.tier
        return None

    def tier_for(self, url: str | None, record: Mapping[str, Any] | None = None) -> int:
        """The page's tier: the record field's, else the first matching URL rule's, else ``tier``."""
        tier = self.override_tier(url, record)
        return self.tier if tier is None else tier

    @property
    def hashed_fields(self) -> tuple[FieldRule, ...]:
        """The fields whose values make up the record hash (all but the volatile ones)."""
        return tuple(f for f in self.fields if f.name not in self.volatile)


@dataclass(frozen=True)
class Politeness:
    """``user_agent`` names a contact (it contains an http(s) URL or an e-mail address);
    ``min_delay_seconds`` is the least time between two fetches from one domain."""

    user_agent: str
    min_delay_seconds: float = 1.0


@dataclass(frozen=True)
class Reserves:
    """Shares of the budget kept away from scored revisits; each in [0, 1], sum < 1.

    ``discovery``: new URLs (at least; more while many wait); ``reestimation``: a floor rate for
    every known page, so written-off estimates get corrected; ``verification``: a uniform random
    sample that checks the model; ``detectors``: sitemaps, listings and seed pages, re-read on
    their own schedule to find new pages and known changes."""

    discovery: float = 0.1
    reestimation: float = 0.05
    verification: float = 0.02
    detectors: float = 0.08

    @property
    def total(self) -> float:
        return self.discovery + self.reestimation + self.verification + self.detectors


@dataclass(frozen=True)
class Budget:
    """What one cycle may spend, in the unit of ``billing`` (bytes, credits or requests).

    ``continuous``: the crawl keeps running, a new cycle every ``cycle_seconds``, spending at the
    budget rate (``amount_per_cycle / cycle_seconds``), until ``stop_after_seconds`` or
    ``stop_after_cycles`` (when given) or a stop signal; otherwise one ``scrapy crawl`` run is one
    cycle. ``sitemap_seconds``: how often sitemaps are read again (default: a quarter of the
    cycle, at most the allocator's choice)."""

    billing: Billing
    amount_per_cycle: float
    cycle_seconds: float
    reserves: Reserves = Reserves()
    continuous: bool = False
    stop_after_seconds: float | None = None
    stop_after_cycles: int | None = None
    sitemap_seconds: float | None = None


@dataclass(frozen=True)
class Limits:
    """Bounds on what the crawl follows and parses.

    ``max_depth`` counts link hops from a seed (0: the seeds only). ``parse_bytes`` <=
    ``max_download_bytes``. ``denied_extensions`` are lower case without the dot;
    ``denied_url_patterns`` are searched in absolute URLs. ``timeout_seconds`` bounds each
    whole answer (Scrapy's ``DOWNLOAD_TIMEOUT`` for this spider); ``None``: the crawl's setting.
    """

    max_depth: int = 16
    max_url_length: int = 2083
    parse_bytes: int = 1_048_576
    max_download_bytes: int = 16_777_216
    frontier_cap: int = 100_000
    denied_extensions: frozenset[str] = DEFAULT_DENIED_EXTENSIONS
    denied_url_patterns: tuple[re.Pattern[str], ...] = ()
    timeout_seconds: float | None = None


@dataclass(frozen=True)
class NetworkOptions:
    """How the site is reached: ``proxies`` (http(s) proxy URLs, credentials in them; one proxy,
    a pool, or a provider's gateway), ``proxy_rotation`` (``host``: each host keeps one proxy of
    the pool; ``request``: in turn), ``tls_verify`` (certificates checked; ``False`` only for a
    site known to serve a certificate that does not verify)."""

    proxies: tuple[str, ...] = ()
    proxy_rotation: str = "host"
    tls_verify: bool = True

    def settings(self) -> dict[str, Any]:
        """The Scrapy settings these options set for the site's crawl."""
        return {"WEBCRAWL_PROXIES": list(self.proxies),
                "WEBCRAWL_PROXY_ROTATION": self.proxy_rotation,
                "WEBCRAWL_TLS_VERIFY": self.tls_verify}


@dataclass(frozen=True)
class TrustRule:
    """How far conditional-request validators and sitemap ``<lastmod>`` are believed: ``learn``
    (as far as they proved reliable), ``always`` or ``never``."""

    validators: TrustMode = "learn"
    sitemaps: TrustMode = "learn"


@dataclass(frozen=True)
class Trust:
    """The site-wide trust rule and per-host overrides (hosts inside the allowed domains)."""

    default: TrustRule = TrustRule()
    hosts: tuple[tuple[str, TrustRule], ...] = ()

    def for_host(self, host: str) -> TrustRule:
        for name, rule in self.hosts:
            if name == host:
                return rule
        return self.default


@dataclass(frozen=True)
class SiteConfig:
    """One site, validated: every URL is absolute http(s) and inside ``allowed_domains``, every
    regex compiled, every selector parsed, every number in range.

    ``source`` names the file it came from. ``spider`` is the dotted path of a Python spider class
    for this site (checked by the spider loader), or ``None`` for the generic one.
    """

    name: str
    source: str
    seeds: tuple[str, ...]
    allowed_domains: tuple[str, ...]
    politeness: Politeness
    budget: Budget
    page_types: tuple[PageType, ...]
    sitemaps: tuple[str, ...] = ()
    objective: Objective = "freshness"
    limits: Limits = Limits()
    allowed_private_networks: tuple[Network, ...] = ()
    trust: Trust = Trust()
    cookies_enabled: bool = False
    spider: str | None = None
    network: NetworkOptions = NetworkOptions()

    def page_type_for(self, url: str) -> PageType | None:
        """The first page type (in file order) whose pattern matches ``url``."""
        for page_type in self.page_types:
            if page_type.matches(url):
                return page_type
        return None

    def allows_host(self, host: str) -> bool:
        """Whether ``host`` is an allowed domain or a subdomain of one."""
        return host_in_domains(host, self.allowed_domains)

    def allows_private_address(self, address: str) -> bool:
        """Whether a private/loopback ``address`` is inside ``allowed_private_networks``."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.allowed_private_networks)


def host_in_domains(host: str, domains: tuple[str, ...]) -> bool:
    """``host`` equals one of ``domains`` or is a subdomain of one (case-insensitive)."""
    host = host.lower().rstrip(".")
    return any(host == d or host.endswith("." + d) for d in domains)
