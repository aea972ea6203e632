"""A bad site file stops with one message naming the file, the field, the value and the expectation.

The table breaks the valid document of test_sites_schema one field at a time, across every kind
of field; each row is the exact message a user would read.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from tests.test_sites_schema import DELETE, VALID, changed

from webcrawl.sites import SiteConfigError, load_site_file, site_from_dict

UA = ("a user agent that names a contact: an http(s) URL or an e-mail address, "
      "e.g. 'mybot/1.0 (+https://example.com/bot; bot@example.com)'")
URL = "an absolute http:// or https:// URL"
HOST = "a host name like 'example.com' or an IP address (no scheme, port or path)"
CSS = "a CSS selector that selectolax parses (no ::text or ::attr(); use attr)"
SCOPE = "a URL on one of the allowed_domains ['shop.example']"
TIER = "a tier 1 to 4 or one of 'low', 'normal', 'high', 'critical'"
ROOT_KEYS = ("allowed_domains, allowed_private_networks, budget, cookies_enabled, limits, name, "
             "network, "
             "objective, page_types, politeness, seeds, sitemaps, spider, trust")

CASES: list[tuple[str, Any, str]] = [
    # names and identifiers
    ("name", "Shop Name", "name: got 'Shop Name', expected a site name of lower-case letters, "
     "digits, '.', '_' or '-' (at most 64, starting with a letter or digit)"),
    ("name", DELETE, "name: missing, expected a site name of lower-case letters, digits, '.', "
     "'_' or '-' (at most 64, starting with a letter or digit)"),
    # unknown keys at every level, with a hint for typos
    ("seed", ["https://www.shop.example/"],
     f"seed: unknown key, expected one of: {ROOT_KEYS} (did you mean 'seeds'?)"),
    ("politeness.user_agnt", "x", "politeness.user_agnt: unknown key, expected one of: "
     "min_delay_seconds, user_agent (did you mean 'user_agent'?)"),
    ("budget.reserve.re_estimation", 0.1, "budget.reserve.re_estimation: unknown key, expected "
     "one of: detectors, discovery, reestimation, verification (did you mean 'reestimation'?)"),
    ("page_types[2].fields.price", {"css": "span", "atr": "x"},
     "page_types[2].fields.price.atr: unknown key, expected one of: attr, css, currency, "
     "format, jsonld, many, microdata, type "
     "(did you mean 'attr'?)"),
    ("page_types[1].listing.next", "a",
     "page_types[1].listing.next: unknown key, expected one of: item, link, summary"),
    # URLs and scope
    ("seeds[0]", "/index.html", f"seeds[0]: got '/index.html', expected {URL}"),
    ("seeds[0]", "ftp://www.shop.example/", f"seeds[0]: got 'ftp://www.shop.example/', "
     f"expected {URL}"),
    ("seeds[0]", "http://www.shop.example:99999/",
     f"seeds[0]: got 'http://www.shop.example:99999/', expected {URL}"),
    ("seeds[0]", "https://notshop.example/",
     f"seeds[0]: got 'https://notshop.example/', expected {SCOPE}"),
    ("sitemaps[0]", "https://other.example/sitemap.xml",
     f"sitemaps[0]: got 'https://other.example/sitemap.xml', expected {SCOPE}"),
    ("seeds", "https://www.shop.example/",
     "seeds: got 'https://www.shop.example/', expected a list of absolute http(s) URLs"),
    ("allowed_domains[0]", "https://shop.example",
     f"allowed_domains[0]: got 'https://shop.example', expected {HOST}"),
    ("allowed_domains[0]", "shop.example:8080",
     f"allowed_domains[0]: got 'shop.example:8080', expected {HOST}"),
    ("allowed_domains[0]", "0.0.2", f"allowed_domains[0]: got '0.0.2', expected {HOST}"),
    ("allowed_domains", [], "allowed_domains: got [], expected a list of host names "
     "(at least one)"),
    # choices
    ("objective", "speed", "objective: got 'speed', expected one of 'freshness', 'events'"),
    ("budget.billing", "dollars",
     "budget.billing: got 'dollars', expected one of 'bandwidth', 'credits', 'requests'"),
    ("trust.validators", "sometimes",
     "trust.validators: got 'sometimes', expected one of 'learn', 'always', 'never'"),
    ("page_types[2].tier", 5, f"page_types[2].tier: got 5, expected {TIER}"),
    ("page_types[2].tier", "top", f"page_types[2].tier: got 'top', expected {TIER}"),
    # the user agent must name a contact
    ("politeness.user_agent", "testbot/1.0",
     f"politeness.user_agent: got 'testbot/1.0', expected {UA}"),
    ("politeness.user_agent", DELETE, f"politeness.user_agent: missing, expected {UA}"),
    # numbers: range and type (a TOML boolean or string is not a number)
    ("politeness.min_delay_seconds", -1, "politeness.min_delay_seconds: got -1, expected a "
     "number >= 0 and <= 3_600 (seconds)"),
    ("politeness.min_delay_seconds", "1", "politeness.min_delay_seconds: got '1', expected a "
     "number >= 0 and <= 3_600 (seconds)"),
    ("politeness.min_delay_seconds", True, "politeness.min_delay_seconds: got True, expected "
     "a number >= 0 and <= 3_600 (seconds)"),
    ("budget.amount_per_cycle", 0, "budget.amount_per_cycle: got 0, expected a number > 0 and "
     "<= 1_000_000_000_000_000 (bytes, credits or requests)"),
    ("budget.cycle_seconds", 0.5, "budget.cycle_seconds: got 0.5, expected a number >= 1 and "
     "<= 31_622_400 (seconds)"),
    ("limits.max_depth", 1.5, "limits.max_depth: got 1.5, expected an integer >= 0 and "
     "<= 1_000 (link hops from a seed)"),
    ("limits.frontier_cap", 0, "limits.frontier_cap: got 0, expected an integer >= 1 and "
     "<= 1_000_000_000 (URLs per domain)"),
    ("limits.parse_bytes", 2**25,
     "limits.parse_bytes: got 33554432, expected at most max_download_bytes (16777216)"),
    # budget reserve shares
    ("budget.reserve.discovery", 1.5, "budget.reserve.discovery: got 1.5, expected a number "
     ">= 0 and <= 1 (share of the cycle budget)"),
    ("budget.reserve.verification", 0.75, "budget.reserve: got discovery 0.2 + reestimation "
     "0.1 + verification 0.75 + detectors 0.08 = 1.13, expected shares that sum to less than 1 "
     "(the rest pays for scored revisits)"),
    ("budget.stop_after_seconds", 60, "budget.stop_after_seconds: got 60 without continuous mode, "
     "expected continuous = true beside it (a one-run cycle ends with its budget or work)"),
    ("budget", DELETE, "budget: missing, expected a [budget] table with billing, "
     "amount_per_cycle and cycle_seconds"),
    # page types: regexes, selectors, fields
    ("page_types", [], "page_types: got [], expected an array of tables ([[page_types]]), "
     "at least one"),
    ("page_types[0]", "home", "page_types[0]: got 'home', expected a table"),
    ("page_types[2].url_pattern", r"/p/(\d+", r"page_types[2].url_pattern: got '/p/(\\d+', "
     "expected a Python regular expression that compiles (missing ), unterminated subpattern "
     "at position 3)"),
    ("page_types[2].url_pattern", DELETE,
     "page_types[2].url_pattern: missing, expected a Python regular expression"),
    ("page_types[2].fields.price", "span[", f"page_types[2].fields.price: got 'span[', "
     f"expected {CSS}"),
    ("page_types[2].fields.price", "span.price::text",
     f"page_types[2].fields.price: got 'span.price::text', expected {CSS}"),
    ("page_types[2].fields.price", {"css": "span", "attr": "data price"},
     "page_types[2].fields.price.attr: got 'data price', expected an HTML attribute name such "
     "as 'href' or 'data-price'"),
    ("page_types[2].fields.price", {"attr": "content"},
     "page_types[2].fields.price.css: missing, expected a CSS selector (or a jsonld or "
     "microdata path)"),
    ("page_types[2].fields.price", 5, "page_types[2].fields.price: got 5, expected a CSS "
     "selector string or a table {css = ..., attr = ...}"),
    ("page_types[2].fields.images.many", "yes",
     "page_types[2].fields.images.many: got 'yes', expected true or false"),
    ("page_types[2].fields.bad-name", "p", "page_types[2].fields.bad-name: got 'bad-name', "
     "expected a name of letters, digits and '_' (not starting with a digit)"),
    ("page_types[2].volatile", ["seen", "nope"], "page_types[2].volatile[1]: got 'nope', "
     "expected one of this page type's fields ['images', 'price', 'seen', 'title']"),
    ("page_types[1].name", "home",
     "page_types[1].name: got 'home', expected a page type name not used before in this file"),
    ("page_types[1].listing.item", DELETE,
     "page_types[1].listing.item: missing, expected a CSS selector"),
    ("page_types[1].listing.link", "a..name",
     f"page_types[1].listing.link: got 'a..name', expected {CSS}"),
    ("page_types[1].listing.summary.price", "!",
     f"page_types[1].listing.summary.price: got '!', expected {CSS}"),
    # limits
    ("limits.denied_extensions", [".pdf"], "limits.denied_extensions[0]: got '.pdf', expected "
     "a lower-case file extension without the leading dot, e.g. 'pdf'"),
    ("limits.denied_url_patterns", ["[a-"], "limits.denied_url_patterns[0]: got '[a-', "
     "expected a Python regular expression that compiles (unterminated character set at "
     "position 0)"),
    # networks, trust, flags, spider
    ("allowed_private_networks", ["10.0.0.1/8"], "allowed_private_networks[0]: got "
     "'10.0.0.1/8', expected a network in CIDR notation like '10.0.0.0/8' (host bits zero) "
     "or an IP address"),
    ("trust.hosts", {"other.example": {}}, "trust.hosts.\"other.example\": got "
     "'other.example', expected a host inside the allowed_domains ['shop.example']"),
    ("cookies_enabled", "yes", "cookies_enabled: got 'yes', expected true or false"),
    ("spider", "not a path", "spider: got 'not a path', expected the dotted path of a Python "
     "spider class, e.g. 'myproject.spiders.shop.ShopSpider'"),
    # placeholders
    ("seeds[0]", "https://www.shop.example:${PORT}/", "seeds[0]: got "
     "'https://www.shop.example:${PORT}/' with PORT undefined, expected PORT to be defined "
     "(as a Scrapy setting or an environment variable), or a default: ${PORT:-value}"),
    ("seeds[0]", "https://www.shop.example:${1}/", "seeds[0]: got "
     "'https://www.shop.example:${1}/', expected placeholders written ${NAME} or "
     "${NAME:-default}"),
    ("politeness", "fast", "politeness: got 'fast', expected a table"),
]


@pytest.mark.parametrize(("path", "value", "message"), CASES,
                         ids=[f"{p}={'<deleted>' if v is DELETE else repr(v)}"[:60]
                              for p, v, _ in CASES])
def test_bad_field_gives_one_exact_message(path: str, value: Any, message: str) -> None:
    with pytest.raises(SiteConfigError) as info:
        site_from_dict(changed(path, value), "sites/shop.toml", {})
    assert str(info.value) == f"sites/shop.toml: {message}"
    assert info.value.source == "sites/shop.toml"
    assert message.startswith(info.value.field + ":")


def test_error_carries_its_parts_and_is_a_value_error() -> None:
    with pytest.raises(ValueError) as info:
        site_from_dict(changed("page_types[2].fields.price", "span["), "shop.toml", {})
    error = info.value
    assert isinstance(error, SiteConfigError)
    assert (error.source, error.field, error.value) == (
        "shop.toml", "page_types[2].fields.price", "span[")
    assert error.expected.startswith("a CSS selector")
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) and again.field == error.field


def test_no_seed_and_no_sitemap() -> None:
    doc = changed("sitemaps", DELETE)
    doc["seeds"] = []
    with pytest.raises(SiteConfigError, match=r"^s\.toml: seeds: got \[\], expected at least "
                       r"one seed URL \(or a sitemap URL in 'sitemaps'\)$"):
        site_from_dict(doc, "s.toml", {})


def test_valid_document_passes_unchanged() -> None:
    assert site_from_dict(VALID, "s.toml", {}).name == "shop"


@pytest.mark.parametrize(("content", "message"), [
    (b'name = "x"\nseeds = [\n', "{f}: not valid TOML: Invalid value (at end of document), "
     "expected valid TOML (see docs/sites.md)"),
    (b'# comment\nname = "caf\xe9"\n', "{f}: not UTF-8 at line 2 (byte offset 21), expected a "
     "UTF-8 text file"),
    (b"", "{f}: name: missing, expected a site name of lower-case letters, digits, '.', '_' "
     "or '-' (at most 64, starting with a letter or digit)"),
])
def test_unreadable_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "x.toml"
    path.write_bytes(content)
    with pytest.raises(SiteConfigError) as info:
        load_site_file(path)
    assert str(info.value) == message.format(f=path)
    assert info.value.field in ("", "name")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SiteConfigError, match="cannot read it"):
        load_site_file(tmp_path / "absent.toml")
