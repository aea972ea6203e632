"""Link extraction: which elements, how hrefs resolve, deduplication, filters and their counts."""

from __future__ import annotations

import re

import pytest

from webcrawl.parse import LinkRules, PageParser, ParseRules, TrapRules

PAGE = "http://example.com/docs/guide/page.html?x=1"


def links_of(html: str, url: str = PAGE, depth: int = 0, **rules: object) -> tuple[tuple[str, ...], dict[str, int]]:
    parser = PageParser(ParseRules(links=LinkRules(**rules)))  # type: ignore[arg-type]
    result = parser.parse(html.encode(), url, depth=depth)
    assert result.kind == "html"
    return result.links, result.counts


def test_a_and_area_in_document_order() -> None:
    links, counts = links_of(
        '<a href="one.html">1</a><map><area href="/two" shape=rect></map><link href="/css-not-a-link">'
        '<a name="no-href">x</a><img src="/img-not-a-link.png"><a href="three.html">3</a>'
    )
    assert links == (
        "http://example.com/docs/guide/one.html",
        "http://example.com/two",
        "http://example.com/docs/guide/three.html",
    )
    assert counts["links/found"] == 3 and counts["links/kept"] == 3


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("other.html", "http://example.com/docs/guide/other.html"),
        ("./other.html", "http://example.com/docs/guide/other.html"),
        ("../api/", "http://example.com/docs/api/"),
        ("../../../../up.html", "http://example.com/up.html"),
        ("/root?b=2&a=1", "http://example.com/root?a=1&b=2"),
        ("//cdn.example.com/x", "http://cdn.example.com/x"),
        ("?page=2", "http://example.com/docs/guide/page.html?page=2"),
        ("other.html#section", "http://example.com/docs/guide/other.html"),
        ("HTTPS://Example.COM:443/A", "https://example.com/A"),
        ("  spaced.html\n", "http://example.com/docs/guide/spaced.html"),
        ("caf\u00e9.html", "http://example.com/docs/guide/caf%C3%A9.html"),
        ("list?sid=abc&page=3", "http://example.com/docs/guide/list?page=3"),
    ],
)
def test_relative_forms(href: str, expected: str) -> None:
    links, _ = links_of(f'<a href="{href}">x</a>')
    assert links == (expected,)


def test_base_href_is_respected() -> None:
    links, _ = links_of(
        '<html><head><base href="http://static.example.com/v2/"></head>'
        '<body><a href="a.html">a</a><a href="/b">b</a><a href="#frag">c</a></body></html>'
    )
    assert links == (
        "http://static.example.com/v2/a.html",
        "http://static.example.com/b",
        "http://static.example.com/v2/",
    )


def test_relative_base_href() -> None:
    links, _ = links_of('<head><base href="../shared/"></head><a href="x.html">x</a>')
    assert links == ("http://example.com/docs/shared/x.html",)


def test_fragments_and_self_links() -> None:
    links, counts = links_of('<a href="#top">t</a><a href="">e</a><a href="#">h</a><a href="page.html?x=1#s">s</a><a href="page.html">o</a>')
    assert links == ("http://example.com/docs/guide/page.html",)
    assert counts["links/self"] == 4


@pytest.mark.parametrize(
    "href", ["javascript:void(0)", "JavaScript:go()", "mailto:a@example.com", "tel:+123", "data:text/html,x", "ftp://example.com/f", "http://[::1"]
)
def test_non_http_links_are_ignored_and_counted(href: str) -> None:
    links, counts = links_of(f'<a href="{href}">x</a><a href="{href}">again</a>')
    assert links == ()
    assert counts["links/filtered/scheme"] == 2


def test_duplicates_within_the_page() -> None:
    links, counts = links_of('<a href="a.html">1</a><a href="./a.html">2</a><a href="a.html#x">3</a><a href="b.html">4</a><a href="a.html">5</a>')
    assert links == ("http://example.com/docs/guide/a.html", "http://example.com/docs/guide/b.html")
    assert counts["links/duplicate"] == 3 and counts["links/kept"] == 2 and counts["links/found"] == 5


def test_scope_includes_subdomains() -> None:
    links, counts = links_of(
        '<a href="http://example.com/a">1</a><a href="http://www.example.com/b">2</a>'
        '<a href="http://notexample.com/c">3</a><a href="http://example.com.evil.org/d">4</a>'
        '<a href="http://other.org/e">5</a>',
        allowed_domains=("Example.com",),
    )
    assert links == ("http://example.com/a", "http://www.example.com/b")
    assert counts["links/filtered/scope"] == 3


def test_denied_extensions_default_and_custom() -> None:
    html = '<a href="/f.pdf">1</a><a href="/i.JPG">2</a><a href="/p.html">3</a><a href="/x.tar.gz">4</a><a href="/d.v1/">5</a>'
    links, counts = links_of(html)
    assert links == ("http://example.com/p.html", "http://example.com/d.v1/")
    assert counts["links/filtered/extension"] == 3
    links, _ = links_of(html, denied_extensions=frozenset({"html"}))
    assert links == ("http://example.com/f.pdf", "http://example.com/i.JPG", "http://example.com/x.tar.gz", "http://example.com/d.v1/")


def test_url_length() -> None:
    long = "/" + "a" * 200
    links, counts = links_of(f'<a href="{long}">1</a><a href="/short">2</a>', max_url_length=100)
    assert links == ("http://example.com/short",)
    assert counts["links/filtered/length"] == 1


def test_denied_patterns_strings_and_compiled() -> None:
    html = '<a href="/login?next=/">1</a><a href="/cart/add">2</a><a href="/ok">3</a>'
    links, counts = links_of(html, denied_patterns=(r"/login\b", re.compile(r"/cart/")))
    assert links == ("http://example.com/ok",)
    assert counts["links/filtered/pattern"] == 2


def test_depth_limit() -> None:
    html = '<a href="/a">1</a><a href="/b">2</a>'
    assert links_of(html, depth=1, max_depth=2)[0] == ("http://example.com/a", "http://example.com/b")
    links, counts = links_of(html, depth=2, max_depth=2)
    assert links == () and counts["links/filtered/depth"] == 2


def test_traps_are_counted_by_kind() -> None:
    html = (
        '<a href="/a/b/a/b/a/b/">rep</a>'
        '<a href="/cal?month=2040-01">far month</a>'
        '<a href="/cal?month=2026-02">near month</a>'
        '<a href="/' + "/".join(f"s{i}" for i in range(30)) + '">deep</a>'
    )
    links, counts = links_of(html, traps=TrapRules(current_year=2026))
    assert links == ("http://example.com/cal?month=2026-02",)
    assert counts["links/filtered/trap/repeat"] == 1
    assert counts["links/filtered/trap/calendar"] == 1
    assert counts["links/filtered/trap/deep"] == 1


def test_every_link_is_counted_once() -> None:
    html = "".join(f'<a href="{h}">x</a>' for h in ["/a", "/a", "#t", "mailto:x", "/f.zip", "http://o.org/", "/b"])
    links, counts = links_of(html, allowed_domains=("example.com",))
    accounted = counts["links/kept"] + counts["links/duplicate"] + counts["links/self"] + sum(
        v for k, v in counts.items() if k.startswith("links/filtered/")
    )
    assert accounted == counts["links/found"] == 7


def test_rule_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="denied_patterns"):
        LinkRules(denied_patterns=("(",))
    with pytest.raises(ValueError, match="allowed_domains"):
        LinkRules(allowed_domains=("http://example.com/",))
    with pytest.raises(ValueError, match="max_depth"):
        LinkRules(max_depth=-1)


def test_base_href_outside_head_is_ignored() -> None:
    """A documented simplification: only <head> is searched for <base>."""
    links, _ = links_of('<html><body><p>x</p><BASE HREF="http://other.example.com/b/"><a href="c">c</a></body></html>')
    assert links == ("http://example.com/docs/guide/c",)


def test_unicode_allowed_domain_matches_punycode_hosts() -> None:
    links, counts = links_of(
        '<a href="http://b\u00fccher.de/a">1</a><a href="http://www.xn--bcher-kva.de/b">2</a><a href="http://other.de/">3</a>',
        allowed_domains=("B\u00fccher.de",),
    )
    assert links == ("http://xn--bcher-kva.de/a", "http://www.xn--bcher-kva.de/b")
    assert counts["links/filtered/scope"] == 1
