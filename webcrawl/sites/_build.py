"""Build a :class:`SiteConfig` from a parsed (and placeholder-expanded) TOML document.

The key sets below are the file format: a key not listed is rejected. docs/sites.md documents the
same fields; keep the two in step.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from webcrawl.net.proxies import ROTATIONS
from webcrawl.parse.structured import SYNTAXES
from webcrawl.parse.typed import FIELD_TYPES
from webcrawl.sites import _checks as check
from webcrawl.sites._reader import Table
from webcrawl.sites.schema import (
    BILLING_MODELS,
    DEFAULT_DENIED_EXTENSIONS,
    OBJECTIVES,
    TIER_NAMES,
    TRUST_MODES,
    Budget,
    FieldRule,
    Limits,
    ListingRule,
    NetworkOptions,
    PageType,
    Politeness,
    Reserves,
    SiteConfig,
    TierField,
    TierRule,
    Trust,
    TrustRule,
    host_in_domains,
)

ROOT_KEYS = ("name", "seeds", "allowed_domains", "sitemaps", "objective", "politeness", "budget",
             "page_types", "limits", "allowed_private_networks", "trust", "cookies_enabled",
             "spider", "network")
NETWORK_KEYS = ("proxies", "proxy_rotation", "tls_verify")
POLITENESS_KEYS = ("min_delay_seconds", "user_agent")
BUDGET_KEYS = ("billing", "amount_per_cycle", "cycle_seconds", "reserve", "continuous",
               "stop_after_seconds", "stop_after_cycles", "sitemap_seconds")
RESERVE_KEYS = ("discovery", "reestimation", "verification", "detectors")
PAGE_TYPE_KEYS = ("name", "url_pattern", "tier", "fields", "volatile", "listing", "value_rules",
                  "value_field")
VALUE_RULE_KEYS = ("url_pattern", "tier")
VALUE_FIELD_KEYS = ("field", "tiers")
FIELD_KEYS = ("css", "attr", "many", "type", "currency", "format", "jsonld", "microdata")
LINK_KEYS = ("css", "attr", "many")
LISTING_KEYS = ("item", "link", "summary")
LIMITS_KEYS = ("max_depth", "max_url_length", "parse_bytes", "max_download_bytes",
               "frontier_cap", "denied_extensions", "denied_url_patterns", "timeout_seconds")
TRUST_KEYS = ("validators", "sitemaps", "hosts")
HOST_TRUST_KEYS = ("validators", "sitemaps")

_SITE_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_GIB = 1 << 30


def build_site(data: dict[str, Any], source: str) -> SiteConfig:
    """Validate ``data`` (one site file's document) into a :class:`SiteConfig`.

    Raises :class:`SiteConfigError` at the first problem found.
    """
    t = Table(source, "", data, ROOT_KEYS)
    name = t.text("name", "a site name of lower-case letters, digits, '.', '_' or '-' "
                  "(at most 64, starting with a letter or digit)",
                  check=lambda v: _SITE_NAME.fullmatch(v) is not None)
    domains = t.items("allowed_domains", "host names", lambda p, v: check.host(t, p, v),
                      non_empty=True)
    seeds = t.items("seeds", "absolute http(s) URLs", lambda p, v: _in_scope(t, p, v, domains))
    sitemaps = t.items("sitemaps", "absolute http(s) URLs",
                       lambda p, v: _in_scope(t, p, v, domains))
    if not seeds and not sitemaps:
        raise t.error("seeds", [], "at least one seed URL (or a sitemap URL in 'sitemaps')")
    spider = t.text("spider", "the dotted path of a Python spider class, e.g. "
                    "'myproject.spiders.shop.ShopSpider'", None, check=check.dotted_path)
    return SiteConfig(
        name=name,
        source=source,
        seeds=seeds,
        allowed_domains=domains,
        sitemaps=sitemaps,
        objective=t.choice("objective", OBJECTIVES, "freshness"),
        politeness=_politeness(t.table("politeness", POLITENESS_KEYS)),
        budget=_budget(t),
        page_types=_page_types(t),
        limits=_limits(t.table("limits", LIMITS_KEYS)),
        allowed_private_networks=t.items("allowed_private_networks", "CIDR networks",
                                         lambda p, v: check.network(t, p, v)),
        trust=_trust(t.table("trust", TRUST_KEYS), domains),
        cookies_enabled=t.flag("cookies_enabled", False),
        spider=spider,
        network=_network(t.table("network", NETWORK_KEYS)),
    )


def _network(t: Table) -> NetworkOptions:
    """``[network]``: proxies and TLS (docs/sites.md)."""
    return NetworkOptions(
        proxies=t.items("proxies", "http(s) proxy URLs such as 'http://user:secret@gw.example:8000'",
                        lambda p, v: check.proxy(t, p, v)),
        proxy_rotation=t.choice("proxy_rotation", ROTATIONS, "host"),
        tls_verify=t.flag("tls_verify", True),
    )


def _in_scope(t: Table, path: str, value: Any, domains: tuple[str, ...]) -> str:
    url = check.url(t, path, value)
    hostname = urlsplit(url).hostname or ""
    if not host_in_domains(hostname, domains):
        raise t.error(path, value, f"a URL on one of the allowed_domains {list(domains)}")
    return url


def _politeness(t: Table) -> Politeness:
    agent = t.text("user_agent", "a user agent that names a contact: an http(s) URL or an e-mail "
                   "address, e.g. 'mybot/1.0 (+https://example.com/bot; bot@example.com)'",
                   check=check.has_contact)
    delay = t.number("min_delay_seconds", minimum=0, maximum=3600, default=1.0, unit="seconds")
    return Politeness(user_agent=agent, min_delay_seconds=float(delay))


def _budget(root: Table) -> Budget:
    if not root.has("budget"):
        raise root.error("budget", None, "a [budget] table with billing, amount_per_cycle and "
                         "cycle_seconds", problem="missing")
    t = root.table("budget", BUDGET_KEYS)
    r = t.table("reserve", RESERVE_KEYS)
    def share(key: str) -> float:
        return float(r.number(key, minimum=0, maximum=1, default=getattr(Reserves, key),
                              unit="share of the cycle budget"))

    reserves = Reserves(discovery=share("discovery"), reestimation=share("reestimation"),
                        verification=share("verification"), detectors=share("detectors"))
    if reserves.total >= 1:
        raise r.error(r.path, {k: getattr(reserves, k) for k in RESERVE_KEYS},
                      "shares that sum to less than 1 (the rest pays for scored revisits)",
                      problem="got " + " + ".join(f"{k} {getattr(reserves, k):g}" for k in RESERVE_KEYS)
                              + f" = {reserves.total:g}")
    cycle_seconds = t.number("cycle_seconds", minimum=1, maximum=366 * 86400, unit="seconds")
    continuous = t.flag("continuous", False)
    stop_seconds = t.number("stop_after_seconds", minimum=0, maximum=10 * 366 * 86400,
                            exclusive_minimum=True, default=None, unit="seconds")
    stop_cycles = t.number("stop_after_cycles", minimum=1, maximum=10**9, integer=True,
                           default=None)
    if not continuous and (stop_seconds is not None or stop_cycles is not None):
        key = "stop_after_seconds" if stop_seconds is not None else "stop_after_cycles"
        value = stop_seconds if stop_seconds is not None else stop_cycles
        raise t.error(t.at(key), value,
                      "continuous = true beside it (a one-run cycle ends with its budget or work)",
                      problem=f"got {value:g} without continuous mode")
    return Budget(
        billing=t.choice("billing", BILLING_MODELS),
        amount_per_cycle=t.number("amount_per_cycle", minimum=0, maximum=1e15,
                                  exclusive_minimum=True, unit="bytes, credits or requests"),
        cycle_seconds=cycle_seconds,
        reserves=reserves,
        continuous=continuous,
        stop_after_seconds=stop_seconds,
        stop_after_cycles=stop_cycles,
        sitemap_seconds=t.number("sitemap_seconds", minimum=1, maximum=366 * 86400,
                                 default=None, unit="seconds"),
    )


def _page_types(root: Table) -> tuple[PageType, ...]:
    page_types: list[PageType] = []
    for t in root.tables("page_types", PAGE_TYPE_KEYS, non_empty=True):
        name = check.name(t, t.at("name"), t.raw("name", "a page type name"))
        if any(p.name == name for p in page_types):
            raise t.error(t.at("name"), name, "a page type name not used before in this file")
        fields = _fields(t.table("fields", None))
        names = {f.name for f in fields}
        volatile = t.items("volatile", "names from this page type's fields",
                           functools.partial(_known, t, names=names))
        listing = None
        if t.has("listing"):
            lt = t.table("listing", LISTING_KEYS)
            listing = ListingRule(
                item=check.css(lt, lt.at("item"), lt.raw("item", "a CSS selector")),
                link=_field(lt, "link", lt.data.get("link", "a"), default_attr="href",
                            keys=LINK_KEYS),
                summary=_fields(lt.table("summary", None), structured=False),
            )
        page_types.append(PageType(
            name=name,
            url_pattern=check.regex(t, t.at("url_pattern"),
                                    t.raw("url_pattern", "a Python regular expression")),
            tier=_tier(t),
            fields=fields,
            volatile=frozenset(volatile),
            listing=listing,
            value_rules=tuple(
                TierRule(url_pattern=check.regex(r, r.at("url_pattern"),
                                                 r.raw("url_pattern", "a Python regular expression")),
                         tier=_tier(r, required=True))
                for r in t.tables("value_rules", VALUE_RULE_KEYS)),
            value_field=_value_field(t, fields),
        ))
    return tuple(page_types)


def _value_field(page_type: Table, fields: tuple[FieldRule, ...]) -> TierField | None:
    """``value_field = {field = "<record field>", tiers = {"<value>" = <tier>, ...}}``."""
    if not page_type.has("value_field"):
        return None
    t = page_type.table("value_field", VALUE_FIELD_KEYS)
    name = _known(t, t.at("field"), t.raw("field", "the name of one of this page type's fields"),
                  names={f.name for f in fields})
    if any(f.name == name and f.type == "price" for f in fields):
        others = sorted(f.name for f in fields if f.type != "price")
        raise t.error(t.at("field"), name, f"a field that is not a price {others} (a price is "
                      "a table of amount and currency, not a value to look up)")
    raw = t.raw("tiers", "a table of record values and their tiers, e.g. "
                "{ bestseller = \"critical\", \"1\" = 3 }")
    if not isinstance(raw, dict) or not raw:
        raise t.error(t.at("tiers"), raw, "a non-empty table of record values and their tiers")
    tiers = t.table("tiers", None)
    return TierField(field=name, tiers=tuple(
        (key, _tier_value(tiers, tiers.at(f'"{key}"'), value)) for key, value in tiers.data.items()))


def _known(t: Table, path: str, value: Any, *, names: set[str]) -> str:
    if not isinstance(value, str) or value not in names:
        raise t.error(path, value, f"one of this page type's fields {sorted(names)}")
    return str(value)


_TIER_EXPECTED = "a tier 1 to 4 or one of " + ", ".join(repr(n) for n in TIER_NAMES)


def _tier(t: Table, required: bool = False) -> int:
    value = t.raw("tier", _TIER_EXPECTED) if required else t.raw("tier", _TIER_EXPECTED, 2)
    return _tier_value(t, t.at("tier"), value)


def _tier_value(t: Table, path: str, value: Any) -> int:
    expected = _TIER_EXPECTED
    if isinstance(value, str) and value in TIER_NAMES:
        return TIER_NAMES[value]
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 4:
        return value
    raise t.error(path, value, expected)


def _fields(t: Table, *, structured: bool = True) -> tuple[FieldRule, ...]:
    """A table of record fields: its keys are the user's field names."""
    return tuple(_field(t, key, value, structured=structured) for key, value in t.data.items())


def _field(parent: Table, key: str, value: Any, default_attr: str | None = None, *,
           keys: tuple[str, ...] = FIELD_KEYS, structured: bool = True) -> FieldRule:
    """``key = "css"`` (text) or ``key = {css = "...", attr = "...", many = true, type = "...",
    currency = "...", format = "...", jsonld = "...", microdata = "..."}`` (``keys`` allowed;
    ``structured=False`` refuses the structured paths, for listing summaries)."""
    path = parent.at(key)
    check.name(parent, path, key)
    if isinstance(value, str):
        return FieldRule(key, check.css(parent, path, value), default_attr)
    if not isinstance(value, dict):
        raise parent.error(path, value, "a CSS selector string or a table {css = ..., attr = ...}")
    t = Table(parent.source, path, value, keys)
    kind = t.choice("type", FIELD_TYPES, "text")
    sources: dict[str, str] = {}
    for syntax in SYNTAXES:
        if t.has(syntax):
            if not structured:
                raise t.error(t.at(syntax), t.data[syntax], "css alone in a listing summary "
                              "(it is read inside each item, not from the page's "
                              "structured data)")
            sources[syntax] = check.structured_path(t, t.at(syntax), t.data[syntax])
    css = None
    if t.has("css") or not sources:
        expected = "a CSS selector" + (" (or a jsonld or microdata path)" if structured else "")
        css = check.css(t, t.at("css"), t.raw("css", expected))
    attr = t.raw("attr", "an attribute name", default_attr)
    if attr is not None and css is None:
        raise t.error(t.at("attr"), attr, "css beside attr (attr names an attribute of the "
                      "css match)", problem=f"got {attr!r} without css")
    return FieldRule(
        name=key,
        css=css,
        attr=None if attr is None else check.attribute(t, t.at("attr"), attr),
        many=t.flag("many", False),
        type=kind,
        currency=_only_on(t, "currency", kind, "price", check.currency),
        date_format=_only_on(t, "format", kind, "date", check.date_format),
        jsonld=sources.get("jsonld"),
        microdata=sources.get("microdata"),
    )


def _only_on(t: Table, key: str, kind: str, wanted: str,
             read: Callable[[Table, str, Any], str]) -> str | None:
    """The value of ``key``, allowed only on a field of type ``wanted``."""
    if not t.has(key):
        return None
    value = t.data[key]
    if kind != wanted:
        raise t.error(t.at(key), value, f"{key} only on a field of type {wanted!r}",
                      problem=f"got {value!r} on a field of type {kind!r}")
    return read(t, t.at(key), value)


def _limits(t: Table) -> Limits:
    d = Limits()
    download = t.number("max_download_bytes", minimum=1024, maximum=16 * _GIB, integer=True,
                        default=d.max_download_bytes, unit="bytes")
    # Only an explicit parse_bytes can contradict max_download_bytes; the default follows it.
    parse_bytes = t.number("parse_bytes", minimum=1024, maximum=_GIB, integer=True,
                           default=min(d.parse_bytes, download), unit="bytes")
    if parse_bytes > download:
        raise t.error(t.at("parse_bytes"), parse_bytes,
                      f"at most max_download_bytes ({download})")
    return Limits(
        max_depth=t.number("max_depth", minimum=0, maximum=1000, integer=True,
                           default=d.max_depth, unit="link hops from a seed"),
        max_url_length=t.number("max_url_length", minimum=16, maximum=65536, integer=True,
                                default=d.max_url_length, unit="characters"),
        parse_bytes=parse_bytes,
        max_download_bytes=download,
        frontier_cap=t.number("frontier_cap", minimum=1, maximum=10**9, integer=True,
                              default=d.frontier_cap, unit="URLs per domain"),
        denied_extensions=frozenset(t.items("denied_extensions", "file extensions",
                                            lambda p, v: check.extension(t, p, v),
                                            tuple(DEFAULT_DENIED_EXTENSIONS))),
        denied_url_patterns=t.items("denied_url_patterns", "Python regular expressions",
                                    lambda p, v: check.regex(t, p, v)),
        timeout_seconds=t.number("timeout_seconds", minimum=1, maximum=3600, default=None,
                                 unit="seconds a whole answer may take"),
    )


def _trust(t: Table, domains: tuple[str, ...]) -> Trust:
    default = TrustRule(validators=t.choice("validators", TRUST_MODES, "learn"),
                        sitemaps=t.choice("sitemaps", TRUST_MODES, "learn"))
    hosts_table = t.table("hosts", None)
    hosts = []
    for key, value in hosts_table.data.items():
        path = hosts_table.at(f'"{key}"' if "." in key else key)
        name = check.host(t, path, key)
        if not host_in_domains(name, domains):
            raise t.error(path, key, f"a host inside the allowed_domains {list(domains)}")
        h = Table(t.source, path, value, HOST_TRUST_KEYS)
        hosts.append((name, TrustRule(validators=h.choice("validators", TRUST_MODES,
                                                          default.validators),
                                      sitemaps=h.choice("sitemaps", TRUST_MODES,
                                                        default.sitemaps))))
    return Trust(default=default, hosts=tuple(hosts))
