"""Records, listings and page types."""

from __future__ import annotations

import pytest

from webcrawl.parse import FieldRule, LinkRules, ListingRule, PageParser, PageType, ParseRules

PRODUCT_HTML = """<html><head><title>Shop</title></head><body>
<h1 class="name">  Blue
   <em>Widget</em>  </h1>
<span class="price" data-currency="EUR">12.50</span>
<img class="main" src="/img/blue.jpg?sid=77">
<ul class="tags"><li>a</li><li> b  c </li><li></li></ul>
<a class="vendor" href="../vendors/acme;jsessionid=X1">Acme</a>
<p class="stamp">Rendered 2026-12-01 02:00:01</p>
</body></html>"""

PRODUCT = PageType(
    "product",
    r"/product/\d+",
    (
        FieldRule.parse("name", "h1.name"),
        FieldRule.parse("price", "span.price::text"),
        FieldRule.parse("currency", "span.price::attr(data-currency)"),
        FieldRule.parse("image", "img.main::attr(src)"),
        FieldRule.parse("vendor", "a.vendor::attr(href)"),
        FieldRule.parse("tags", "ul.tags li", many=True),
        FieldRule("missing", "div.nothing"),
        FieldRule("missing_attr", "h1", attr="data-x"),
        FieldRule.parse("stamp", "p.stamp"),
    ),
    volatile=frozenset({"stamp"}),
)

LISTING_HTML = """<html><body><div class="grid">
<div class="card"><a href="/product/1?sid=a">One</a><span class="price">1.00</span></div>
<div class="card"><a href="/product/2">Two</a><span class="price">2.00</span><span class="badge">new</span></div>
<div class="card"><span class="price">no link</span></div>
<div class="card"><a href="/product/1">One again</a><span class="price">9.99</span></div>
<div class="card"><a href="http://elsewhere.org/product/3">Off-site</a></div>
<div class="card"><a href="javascript:buy(4)">JS</a></div>
<div class="card"><a href="/product/5.pdf">PDF</a></div>
<a class="card" href="/product/6"><span class="price">6.00</span></a>
</div><a href="/list?page=2">next</a></body></html>"""

LISTING = PageType(
    "list",
    r"/list",
    (FieldRule("title", "title"),),
    listing=ListingRule("div.grid .card", "a[href]", (FieldRule("price", ".price"), FieldRule("badge", ".badge"))),
)

PARSER = PageParser(ParseRules(links=LinkRules(allowed_domains=("shop.example",)), page_types=(PRODUCT, LISTING)))


def test_record_fields() -> None:
    result = PARSER.parse(PRODUCT_HTML.encode(), "http://shop.example/product/42/")
    assert result.page_type == "product"
    assert result.record == {
        "name": "Blue Widget",
        "price": "12.50",
        "currency": "EUR",
        "image": "http://shop.example/img/blue.jpg",
        "vendor": "http://shop.example/product/vendors/acme",
        "tags": ["a", "b c", ""],
        "missing": None,
        "missing_attr": None,
        "stamp": "Rendered 2026-12-01 02:00:01",
    }
    assert result.volatile == frozenset({"stamp"})
    stable = result.stable_record()
    assert stable is not None and "stamp" not in stable and stable["name"] == "Blue Widget"


def test_listing_items_and_counts() -> None:
    result = PARSER.parse(LISTING_HTML.encode(), "http://shop.example/list?page=1")
    assert result.page_type == "list"
    assert [(i.url, i.summary) for i in result.listing] == [
        ("http://shop.example/product/1", {"price": "1.00", "badge": None}),
        ("http://shop.example/product/2", {"price": "2.00", "badge": "new"}),
        ("http://shop.example/product/6", {"price": "6.00", "badge": None}),
    ]
    counts = result.counts
    assert counts["listing/items"] == 8 and counts["listing/kept"] == 3
    assert counts["listing/nolink"] == 1 and counts["listing/duplicate"] == 1
    assert counts["listing/filtered/scope"] == 1 and counts["listing/filtered/scheme"] == 1
    assert counts["listing/filtered/extension"] == 1
    assert "http://shop.example/list?page=2" in result.links


def test_page_type_first_match_wins_and_none_matches() -> None:
    first = PageType("first", r"/product/")
    second = PageType("second", r"/product/\d+", (FieldRule("h", "h1"),))
    parser = PageParser(ParseRules(page_types=(first, second)))
    assert parser.parse(PRODUCT_HTML.encode(), "http://shop.example/product/1").page_type == "first"
    none = parser.parse(PRODUCT_HTML.encode(), "http://shop.example/about")
    assert none.page_type is None and none.record is None and none.stable_record() is None


def test_non_html_keeps_page_type_without_record() -> None:
    result = PARSER.parse(b"%PDF-1.5 ...", "http://shop.example/product/7")
    assert result.kind == "pdf" and result.page_type == "product" and result.record is None


@pytest.mark.parametrize(
    ("spec", "css", "attr"),
    [
        ("h1", "h1", None),
        ("h1.title::text", "h1.title", None),
        ("img.main::attr(src)", "img.main", "src"),
        ("a[rel=next] ::attr(data-page)", "a[rel=next]", "data-page"),
    ],
)
def test_field_spec_parsing(spec: str, css: str, attr: str | None) -> None:
    rule = FieldRule.parse("f", spec)
    assert (rule.css, rule.attr) == (css, attr)


def test_rule_validation_names_field_and_value() -> None:
    with pytest.raises(ValueError, match=r"field 'f'.*a\[\["):
        FieldRule("f", "a[[")
    with pytest.raises(ValueError, match="url_pattern"):
        PageType("p", "(")
    with pytest.raises(ValueError, match="volatile"):
        PageType("p", ".", (FieldRule("a", "a"),), volatile=frozenset({"b"}))
    with pytest.raises(ValueError, match="repeat a name"):
        PageType("p", ".", (FieldRule("a", "a"), FieldRule("a", "b")))
    with pytest.raises(ValueError, match="listing item"):
        ListingRule("")
    with pytest.raises(ValueError, match="max_body_bytes"):
        ParseRules(max_body_bytes=10)
