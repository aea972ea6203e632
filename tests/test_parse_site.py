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


def test_rule_objects_without_the_typed_attributes_still_work() -> None:
    """rules_for_site reads by attribute: an object from before field types is plain text."""
    from types import SimpleNamespace

    from webcrawl.parse import FieldRule

    site = load_site_file(files("webcrawl.sites") / "demo.toml")
    old = SimpleNamespace(name="title", css="h1", attr=None, many=False)
    page_type = SimpleNamespace(name="p", url_pattern=r"/p/", fields=(old,), volatile=(),
                                listing=None)
    rules = rules_for_site(SimpleNamespace(allowed_domains=site.allowed_domains,
                                           limits=site.limits, page_types=(page_type,)))
    assert rules.page_types[0].fields == (FieldRule("title", "h1"),)
    assert rules.page_types[0].fields[0].plain and not rules.page_types[0].structured
