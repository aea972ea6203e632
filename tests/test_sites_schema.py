"""Valid site documents become the typed, frozen objects of webcrawl.sites.schema.

Also home of VALID and changed(), the document the other test_sites_* files break field by field.
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
import re
from typing import Any

import pytest

from webcrawl.sites import (
    Budget,
    FieldRule,
    Limits,
    ListingRule,
    Politeness,
    Reserves,
    SiteConfig,
    TrustRule,
    load_sites,
    site_from_dict,
)
from webcrawl.sites.schema import DEFAULT_DENIED_EXTENSIONS

DELETE: Any = object()

VALID: dict[str, Any] = {
    "name": "shop",
    "seeds": ["https://www.shop.example/"],
    "allowed_domains": ["shop.example"],
    "sitemaps": ["https://www.shop.example/sitemap.xml"],
    "politeness": {"user_agent": "testbot/1.0 (+https://bots.example/testbot)",
                   "min_delay_seconds": 2},
    "budget": {"billing": "credits", "amount_per_cycle": 1000, "cycle_seconds": 86400,
               "reserve": {"discovery": 0.2, "reestimation": 0.1, "verification": 0.05}},
    "page_types": [
        {"name": "home", "url_pattern": r"^https://www\.shop\.example/$", "tier": "low"},
        {"name": "category", "url_pattern": r"/c/[a-z-]+", "tier": 2,
         "listing": {"item": "li.item", "link": "a.name",
                     "summary": {"price": "span.price",
                                 "name": {"css": "a.name", "attr": "title"}}}},
        {"name": "product", "url_pattern": r"/p/\d+", "tier": "critical",
         "fields": {"title": "h1", "price": "span.price",
                    "images": {"css": "img.photo", "attr": "src", "many": True},
                    "seen": "time.now"},
         "volatile": ["seen"]},
    ],
    "limits": {"max_depth": 3, "parse_bytes": 65536, "denied_extensions": ["pdf", "tar.gz"],
               "denied_url_patterns": [r"\?sort="]},
    "allowed_private_networks": ["10.0.0.0/8", "fd00::/8"],
    "trust": {"validators": "never", "hosts": {"cdn.shop.example": {"sitemaps": "always"}}},
    "cookies_enabled": True,
}

MINIMAL: dict[str, Any] = {
    "name": "mini",
    "seeds": ["http://mini.example/"],
    "allowed_domains": ["mini.example"],
    "politeness": {"user_agent": "minibot (ops@mini.example)"},
    "budget": {"billing": "bandwidth", "amount_per_cycle": 1e9, "cycle_seconds": 3600},
    "page_types": [{"name": "page", "url_pattern": "."}],
}


def changed(path: str, value: Any) -> dict[str, Any]:
    """A deep copy of VALID with the field at ``path`` (``a.b[2].c``) set, or removed (DELETE)."""
    doc = copy.deepcopy(VALID)
    steps: list[Any] = []
    for part in path.split("."):
        m = re.fullmatch(r"([^\[]+)((?:\[\d+\])*)", part)
        assert m, part
        steps.append(m.group(1))
        steps += [int(i) for i in re.findall(r"\[(\d+)\]", m.group(2))]
    node: Any = doc
    for step in steps[:-1]:
        node = node.setdefault(step, {}) if isinstance(step, str) else node[step]
    if value is DELETE:
        del node[steps[-1]]
    else:
        node[steps[-1]] = value
    return doc


def test_valid_document_becomes_typed_objects() -> None:
    site = site_from_dict(VALID, "shop.toml")
    assert site.name == "shop" and site.source == "shop.toml"
    assert site.seeds == ("https://www.shop.example/",)
    assert site.sitemaps == ("https://www.shop.example/sitemap.xml",)
    assert site.allowed_domains == ("shop.example",)
    assert site.politeness == Politeness("testbot/1.0 (+https://bots.example/testbot)", 2.0)
    assert isinstance(site.politeness.min_delay_seconds, float)
    assert site.budget == Budget("credits", 1000.0, 86400.0, Reserves(0.2, 0.1, 0.05))
    assert site.budget.reserves.total == pytest.approx(0.43)
    assert [p.name for p in site.page_types] == ["home", "category", "product"]
    assert [p.tier for p in site.page_types] == [1, 2, 4]
    product = site.page_types[2]
    assert product.fields == (
        FieldRule("title", "h1"), FieldRule("price", "span.price"),
        FieldRule("images", "img.photo", "src", many=True), FieldRule("seen", "time.now"))
    assert product.volatile == frozenset({"seen"})
    assert [f.name for f in product.hashed_fields] == ["title", "price", "images"]
    assert site.page_types[1].listing == ListingRule(
        item="li.item", link=FieldRule("link", "a.name", "href"),
        summary=(FieldRule("price", "span.price"), FieldRule("name", "a.name", "title")))
    assert site.limits.max_depth == 3 and site.limits.parse_bytes == 65536
    assert site.limits.denied_extensions == frozenset({"pdf", "tar.gz"})
    assert [p.pattern for p in site.limits.denied_url_patterns] == [r"\?sort="]
    assert site.allowed_private_networks == (ipaddress.ip_network("10.0.0.0/8"),
                                             ipaddress.ip_network("fd00::/8"))
    assert site.trust.default == TrustRule(validators="never", sitemaps="learn")
    assert site.trust.for_host("cdn.shop.example") == TrustRule("never", "always")
    assert site.trust.for_host("www.shop.example") == site.trust.default
    assert site.cookies_enabled is True and site.spider is None and site.objective == "freshness"


def test_defaults_of_a_minimal_document() -> None:
    site = site_from_dict(MINIMAL)
    assert site.sitemaps == () and site.objective == "freshness"
    assert site.politeness.min_delay_seconds == 1.0
    assert site.budget.reserves == Reserves()
    assert site.limits == Limits()
    assert site.limits.denied_extensions == DEFAULT_DENIED_EXTENSIONS
    assert "rss" not in DEFAULT_DENIED_EXTENSIONS and "pdf" in DEFAULT_DENIED_EXTENSIONS
    assert site.page_types[0].tier == 2 and site.page_types[0].listing is None
    assert site.allowed_private_networks == () and site.cookies_enabled is False


def test_helpers_answer_scope_and_page_type_questions() -> None:
    site = site_from_dict(VALID)
    assert site.page_type_for("https://www.shop.example/p/12?x=1").name == "product"
    assert site.page_type_for("https://www.shop.example/").name == "home"
    assert site.page_type_for("https://www.shop.example/about") is None
    assert site.allows_host("shop.example") and site.allows_host("WWW.Shop.Example.")
    assert not site.allows_host("evilshop.example") and not site.allows_host("example")
    assert site.allows_private_address("10.1.2.3") and site.allows_private_address("fd00::1")
    assert not site.allows_private_address("192.168.0.1")
    assert not site.allows_private_address("not an address")


def test_objects_are_frozen_and_hashable() -> None:
    site = site_from_dict(VALID)
    with pytest.raises(dataclasses.FrozenInstanceError):
        site.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        site.page_types[0].tier = 4  # type: ignore[misc]
    assert hash(site) == hash(site_from_dict(VALID))


def test_hosts_are_normalised_and_ips_accepted() -> None:
    doc = dict(MINIMAL, allowed_domains=["Mini.Example.", "127.0.0.2", "::1"])
    site = site_from_dict(doc)
    assert site.allowed_domains == ("mini.example", "127.0.0.2", "::1")


def test_parse_bytes_defaults_to_at_most_the_download_limit() -> None:
    site = site_from_dict(dict(MINIMAL, limits={"max_download_bytes": 65536}))
    assert site.limits.parse_bytes == 65536 and site.limits.max_download_bytes == 65536


def test_sitemaps_alone_are_enough_to_start() -> None:
    doc = dict(MINIMAL, seeds=[], sitemaps=["http://mini.example/sitemap.xml"])
    assert site_from_dict(doc).seeds == ()


def test_bundled_sites_are_valid_and_describe_the_demo_shop() -> None:
    sites = load_sites(variables={})
    assert {"demo", "books"} <= set(sites)
    demo = sites["demo"]
    assert isinstance(demo, SiteConfig)
    assert demo.seeds == ("http://127.0.0.2:8000/",)  # the placeholder's default port
    assert set(demo.allowed_domains) == {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}
    assert ipaddress.ip_network("127.0.0.0/8") in demo.allowed_private_networks
    assert demo.page_type_for("http://127.0.0.3:8000/product/7/alpine-kettle?sid=ab").name \
        == "product"
    assert demo.page_type_for("http://127.0.0.2:8000/category/kitchen/?page=2").name \
        == "category"
    product = demo.page_type_for("http://127.0.0.3:8000/product/7/alpine-kettle")
    assert product is not None
    assert {"name", "price", "stock", "description", "sku"} <= {f.name for f in product.fields}
    assert product.volatile == frozenset({"served_at"})
    listing = demo.page_type_for("http://127.0.0.2:8000/category/kitchen/")
    assert listing is not None and listing.listing is not None
    assert {f.name for f in listing.listing.summary} == {"name", "price", "stock"}


def test_demo_port_comes_from_the_variables() -> None:
    demo = load_sites(variables={"WEBCRAWL_DEMO_PORT": "54321"})["demo"]
    assert demo.seeds == ("http://127.0.0.2:54321/",)
    assert all(":54321/" in u for u in demo.sitemaps)
