"""Parsing rules built from a validated site file: the bundled demo site."""

from __future__ import annotations

from importlib.resources import files

from webcrawl.parse import PageParser, rules_for_site
from webcrawl.sites import load_site_file


def test_demo_site_rules() -> None:
    site = load_site_file(files("webcrawl.sites") / "demo.toml")
    rules = rules_for_site(site)
    assert rules.max_body_bytes == site.limits.parse_bytes
    assert rules.links.allowed_domains == tuple(site.allowed_domains)
    assert rules.links.max_depth == site.limits.max_depth
    assert [p.name for p in rules.page_types] == [p.name for p in site.page_types]
    for ours, theirs in zip(rules.page_types, site.page_types):
        assert [f.name for f in ours.fields] == [f.name for f in theirs.fields]
        assert ours.volatile == theirs.volatile
        assert (ours.listing is None) == (theirs.listing is None)


def test_demo_site_rules_parse_a_page() -> None:
    site = load_site_file(files("webcrawl.sites") / "demo.toml")
    parser = PageParser(rules_for_site(site))
    outside = parser.parse(b'<a href="/cart?x=1">c</a><a href="http://8.8.8.8/">o</a><a href="/ok">k</a>', "http://127.0.0.2:8000/")
    assert outside.links == ("http://127.0.0.2:8000/ok",)
    assert outside.counts["links/filtered/pattern"] == 1 and outside.counts["links/filtered/scope"] == 1
