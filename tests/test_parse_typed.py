"""Typed record fields: numbers, prices, availability and dates, read from CSS, JSON-LD and
microdata, and the errors a present value that does not convert gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from webcrawl.parse import FieldRule, ListingRule, PageParser, PageType, ParseRules
from webcrawl.parse.amounts import currency_code, to_number, to_price
from webcrawl.parse.structured import MAX_MICRODATA_ITEMS, find, parse_path
from webcrawl.parse.typed import AVAILABILITY, convert, to_availability, to_date

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("text", "amount", "currency"), [
    ("$1,299.99", 1299.99, "USD"),
    ("1.299,99 €", 1299.99, "EUR"),
    ("EUR 12", 12.0, "EUR"),
    ("eur 12", 12.0, "EUR"),
    ("19.99 USD", 19.99, "USD"),
    ("£5", 5.0, "GBP"),
    ("¥1200", 1200.0, "JPY"),
    ("12,50 zł", 12.5, "PLN"),
    ("Price: 19.99", 19.99, None),
    ("from $9", 9.0, "USD"),
    ("CHF 1'234.50", 1234.5, "CHF"),
    ("US$ 5", 5.0, "USD"),
    ("R$ 10,50", 10.5, "BRL"),
    ("C$12", 12.0, "CAD"),
    ("₹1,23,456.00", 123456.0, "INR"),
    ("100 Kč", 100.0, "CZK"),
    ("kr 100", 100.0, None),
    ("Free", 0.0, None),
])
def test_price_texts(text: str, amount: float, currency: str | None) -> None:
    assert to_price(text) == {"amount": amount, "currency": currency}


@pytest.mark.parametrize(("text", "default", "currency"), [
    ("$12", "CAD", "CAD"),      # a shared symbol is read as the site's currency
    ("kr 100", "SEK", "SEK"),
    ("¥1200", "CNY", "CNY"),
    ("12.00", "EUR", "EUR"),    # no currency in the text: the default
    ("€12", "USD", "EUR"),      # a symbol that names one currency wins over the default
    ("GBP 3", "EUR", "GBP"),
])
def test_price_default_currency(text: str, default: str, currency: str) -> None:
    assert to_price(text, default)["currency"] == currency


def test_price_structured_currency_wins_and_numbers_stay_exact() -> None:
    assert to_price("12.50", "USD", "eur") == {"amount": 12.5, "currency": "EUR"}
    assert to_price("$12", None, "not a code") == {"amount": 12.0, "currency": "USD"}
    assert to_price(1299.99) == {"amount": 1299.99, "currency": None}
    assert to_price(7, "EUR") == {"amount": 7.0, "currency": "EUR"}
    # schema.org's form has a decimal point and no group separator; a page's "1.234" is 1234.
    assert to_price("1.234", structured=True)["amount"] == 1.234
    assert to_price("1.234")["amount"] == 1234.0
    assert to_price("1,234.50", structured=True)["amount"] == 1234.5
    assert currency_code("zł") == "PLN" and currency_code("XYZ") is None
    assert currency_code(None, "EUR") == "EUR"


@pytest.mark.parametrize("text", ["call for price", "Free shipping", "", "€", True])
def test_no_price(text: Any) -> None:
    with pytest.raises(ValueError):
        to_price(text)


@pytest.mark.parametrize(("text", "number"), [
    ("12", 12.0), ("12.0", 12.0), (" 12 ", 12.0), ("-5", -5.0), ("−3.5", -3.5), ("1e3", 1000.0),
    ("0.5", 0.5), ("1.234", 1.234), ("1,299.5", 1299.5), ("1.299,5", 1299.5),
    ("1 299,50", 1299.5), ("- 1,299.5", -1299.5), ("4.5 out of 5", 4.5), ("Rating: 4", 4.0),
    (3, 3.0), (2.5, 2.5),
])
def test_numbers(text: Any, number: float) -> None:
    value = to_number(text)
    assert value == number and isinstance(value, float)


@pytest.mark.parametrize("text", ["", "abc", "Free", "nan", "inf", False, float("nan")])
def test_no_number(text: Any) -> None:
    with pytest.raises(ValueError):
        to_number(text)


@pytest.mark.parametrize(("text", "member"), [
    ("In stock", "InStock"), ("IN STOCK", "InStock"), ("In stock: 5", "InStock"),
    ("Available", "InStock"), ("Only 2 left", "LimitedAvailability"),
    ("Only 2 left in stock", "LimitedAvailability"), ("Out of stock", "OutOfStock"),
    ("Temporarily  out of stock", "OutOfStock"), ("Not in stock", "OutOfStock"),
    ("Currently unavailable", "OutOfStock"), ("Sold out", "SoldOut"), ("Pre-order", "PreOrder"),
    ("Available for pre-order", "PreOrder"), ("Backorder", "BackOrder"),
    ("Available on back-order", "BackOrder"), ("Discontinued", "Discontinued"),
    ("No longer available", "Discontinued"), ("Made to order", "MadeToOrder"),
    ("In-store only", "InStoreOnly"), ("Online only", "OnlineOnly"),
    ("https://schema.org/InStock", "InStock"), ("http://schema.org/OutOfStock", "OutOfStock"),
    ("http://www.schema.org/PreSale/", "PreSale"), ("schema:SoldOut", "SoldOut"),
    ("InStock", "InStock"), ("instock", "InStock"), ("Reserved", "Reserved"),
])
def test_availability(text: str, member: str) -> None:
    assert to_availability(text) == member
    assert member in AVAILABILITY


@pytest.mark.parametrize("text", ["", "Blue", "https://schema.org/Product", "stocky"])
def test_no_availability(text: str) -> None:
    with pytest.raises(ValueError):
        to_availability(text)


@pytest.mark.parametrize(("text", "iso"), [
    ("2026-03-05", "2026-03-05"),
    ("20260305", "2026-03-05"),
    ("2026-03-05T10:00:00Z", "2026-03-05T10:00:00Z"),
    ("2026-03-05T10:00:00+01:00", "2026-03-05T09:00:00Z"),
    ("2026-03-05T23:30:00-05:00", "2026-03-06T04:30:00Z"),
    ("2026-03-05T10:00:00.789", "2026-03-05T10:00:00Z"),
    ("2026-03-05 10:00", "2026-03-05T10:00:00Z"),
    ("Thu, 05 Mar 2026 10:00:00 GMT", "2026-03-05T10:00:00Z"),
    ("Thu, 05 Mar 2026 10:00:00 -0500", "2026-03-05T15:00:00Z"),
    ("5 March 2026", "2026-03-05"),
    ("5 Mar 2026", "2026-03-05"),
    ("March 5, 2026", "2026-03-05"),
    ("Mar. 5, 2026", "2026-03-05"),
    ("Thursday, 5th March 2026", "2026-03-05"),
    ("march 5th, 2026", "2026-03-05"),
    ("2026/03/05", "2026-03-05"),
    ("05.03.2026", "2026-03-05"),
])
def test_dates(text: str, iso: str) -> None:
    assert to_date(text) == iso


@pytest.mark.parametrize("text", ["05/03/2026", "yesterday", "2026-13-01", "March 2026", ""])
def test_no_date(text: str) -> None:
    with pytest.raises(ValueError):
        to_date(text)


def test_date_format() -> None:
    assert to_date("05/03/2026", "%d/%m/%Y") == "2026-03-05"
    assert to_date("03/05/2026 14:07", "%m/%d/%Y %H:%M") == "2026-03-05T14:07:00Z"
    with pytest.raises(ValueError):
        to_date("2026-03-05", "%d/%m/%Y")


def test_convert_text_of_structured_values() -> None:
    assert convert("text", "  a \n b ") == "a b"
    assert convert("text", 12.5) == "12.5" and convert("text", True) == "true"
    assert convert("number", "12") == 12.0


def test_paths() -> None:
    assert parse_path("Product.offers.price") == ("Product", "offers", "price")
    assert parse_path("Event.@id") == ("Event", "@id")
    for bad in ("Product", "Product..price", ".price", "Product.offers price", "1x.y", ""):
        with pytest.raises(ValueError):
            parse_path(bad)
    items = [{"@type": "WebPage", "mainEntity": {"@type": "schema:Product",
                                                 "offers": [{"price": 3}, {"price": 4}]}}]
    assert find(items, ("Product", "offers", "price")) == (3, {"price": 3})
    assert find(items, ("Product", "brand")) is None and find(items, ("Event", "x")) is None


# Pages parsed end to end.

PRODUCT_JSONLD = {
    "@context": "https://schema.org",
    "@graph": [
        {"@type": "BreadcrumbList", "itemListElement": []},
        {"@type": ["Product", "Thing"], "name": "Widget", "sku": 42,
         "offers": [{"@type": "Offer", "price": "1299.99", "priceCurrency": "USD",
                     "availability": "https://schema.org/InStock"},
                    {"@type": "Offer", "price": "1.00", "priceCurrency": "USD"}],
         "releaseDate": "2026-03-05T10:00:00+01:00",
         "aggregateRating": {"@type": "AggregateRating", "ratingValue": 4.5},
         "brand": {"@type": "Brand", "name": "Acme"},
         "color": ["red", "blue"]},
    ],
}


def page(jsonld: Any = None, body: str = "") -> bytes:
    script = ("" if jsonld is None else
              f'<script type="application/ld+json">{json.dumps(jsonld)}</script>')
    return f"<html><head>{script}</head><body>{body}</body></html>".encode()


def parse(fields: tuple[FieldRule, ...], body: bytes,
          listing: ListingRule | None = None) -> Any:
    parser = PageParser(ParseRules(page_types=(PageType("p", "/p/", fields, listing=listing),)))
    return parser.parse(body, "http://shop.example/p/1")


CSS_BODY = """<h1>Widget</h1><span class="price">1.299,99 €</span>
<span class="stock">Only 2 left</span><time datetime="2026-03-05">5 March</time>
<span class="r">4,5</span><ul><li class="p">$1</li><li class="p"> </li><li class="p">$2.50</li></ul>"""


def test_css_typed_fields() -> None:
    result = parse((
        FieldRule("name", "h1"),
        FieldRule("price", "span.price", type="price"),
        FieldRule("price_eur", "span.r", type="price", currency="EUR"),
        FieldRule("stock", ".stock", type="availability"),
        FieldRule("rating", ".r", type="number"),
        FieldRule("released", "time", attr="datetime", type="date"),
        FieldRule("prices", "li.p", many=True, type="price"),
        FieldRule("missing", ".nothing", type="price"),
        FieldRule("missing_attr", "h1", attr="data-x", type="number"),
        FieldRule("none", ".nothing", many=True, type="number"),
    ), page(body=CSS_BODY))
    assert result.record == {
        "name": "Widget",
        "price": {"amount": 1299.99, "currency": "EUR"},
        "price_eur": {"amount": 4.5, "currency": "EUR"},
        "stock": "LimitedAvailability",
        "rating": 4.5,
        "released": "2026-03-05",
        "prices": [{"amount": 1.0, "currency": "USD"}, {"amount": 2.5, "currency": "USD"}],
        "missing": None,
        "missing_attr": None,
        "none": [],
    }
    assert result.errors == {} and not any(k.startswith("record/") for k in result.counts)


def test_jsonld_product_with_graph_and_list_type() -> None:
    result = parse((
        FieldRule("name", jsonld="Product.name"),
        FieldRule("price", "span.price", type="price", jsonld="Product.offers.price"),
        FieldRule("stock", ".stock", type="availability", jsonld="Product.offers.availability"),
        FieldRule("released", type="date", jsonld="Product.releaseDate"),
        FieldRule("rating", type="number", jsonld="Product.aggregateRating.ratingValue"),
        FieldRule("sku", jsonld="Product.sku"),
        FieldRule("brand", jsonld="Product.brand.name"),
        FieldRule("colors", jsonld="Product.color", many=True),
        FieldRule("crumbs", jsonld="BreadcrumbList.itemListElement", many=True),
    ), page(PRODUCT_JSONLD, CSS_BODY))
    assert result.record == {
        "name": "Widget",
        "price": {"amount": 1299.99, "currency": "USD"},  # priceCurrency beside the price
        "stock": "InStock",
        "released": "2026-03-05T09:00:00Z",
        "rating": 4.5,
        "sku": "42",
        "brand": "Acme",
        "colors": ["red", "blue"],
        "crumbs": [],
    }
    assert result.errors == {}


def test_structured_value_wins_css_is_the_fallback() -> None:
    fields = (FieldRule("price", "span.price", type="price", jsonld="Product.offers.price"),
              FieldRule("gtin", "h1", jsonld="Product.gtin"))
    assert parse(fields, page(PRODUCT_JSONLD, CSS_BODY)).record == {
        "price": {"amount": 1299.99, "currency": "USD"}, "gtin": "Widget"}
    # No Product (the shop dropped its markup), a blank price, a broken script: CSS answers.
    for jsonld in ({"@type": "WebPage"}, {"@type": "Product", "offers": {"price": " "}}):
        assert parse(fields, page(jsonld, CSS_BODY)).record["price"] == {
            "amount": 1299.99, "currency": "EUR"}
    broken = page(body=CSS_BODY).replace(
        b"<head>", b'<head><script type="application/ld+json">{"@type": "Product",</script>')
    result = parse(fields, broken)
    assert result.record["price"] == {"amount": 1299.99, "currency": "EUR"}
    assert result.counts["record/jsonld/broken"] == 1 and result.errors == {}


def test_jsonld_script_with_comments_and_value_objects() -> None:
    body = (b'<html><head><script type="application/LD+JSON">\n<!-- shop -->\n'
            b'[{"@type": "http://schema.org/Product", "offers": {"@type": "AggregateOffer",'
            b' "lowPrice": {"@value": "9.5"}, "priceCurrency": "GBP",'
            b' "availability": {"@id": "http://schema.org/PreOrder"}}}]</script></head></html>')
    result = parse((FieldRule("low", type="price", jsonld="Product.offers.lowPrice"),
                    FieldRule("stock", type="availability",
                              jsonld="Product.offers.availability")), body)
    assert result.record == {"low": {"amount": 9.5, "currency": "GBP"}, "stock": "PreOrder"}


MICRODATA = """
<div itemscope itemtype="https://schema.org/Product">
  <h1 itemprop="name">Blue  Widget</h1>
  <div itemprop="offers" itemscope itemtype="http://schema.org/Offer">
    <span itemprop="price" content="1234.500">1.234,50 €</span>
    <meta itemprop="priceCurrency" content="EUR">
    <link itemprop="availability" href="https://schema.org/OutOfStock">
    <time itemprop="priceValidUntil" datetime="2026-12-31">end of year</time>
  </div>
</div>
<div itemscope itemtype="https://schema.org/Product"><span itemprop="name">Other</span></div>
<span class="price">$99</span>"""


def test_microdata_product() -> None:
    result = parse((
        FieldRule("name", "h1", microdata="Product.name"),
        FieldRule("price", "span.price", type="price", microdata="Product.offers.price"),
        FieldRule("stock", type="availability", microdata="Product.offers.availability"),
        FieldRule("until", type="date", microdata="Product.offers.priceValidUntil"),
        FieldRule("both", type="price", jsonld="Product.offers.price",
                  microdata="Product.offers.price"),
    ), page(body=MICRODATA))
    assert result.record == {
        "name": "Blue Widget",
        "price": {"amount": 1234.5, "currency": "EUR"},
        "stock": "OutOfStock",
        "until": "2026-12-31",
        "both": {"amount": 1234.5, "currency": "EUR"},  # no JSON-LD: microdata is next
    }


def test_microdata_itemref_reads_the_whole_page() -> None:
    body = ('<div itemscope itemtype="https://schema.org/Product" itemref="offer"></div>'
            '<p><span id="offer" itemprop="price">7.25</span></p>')
    result = parse((FieldRule("price", type="number", microdata="Product.price"),), page(body=body))
    assert result.record == {"price": 7.25}


def test_unparsable_values_are_named_errors() -> None:
    long = "call us " * 40
    body = (f'<span class="price">{long}</span><span class="stock">Ask</span>'
            '<span class="n">12</span><li>1</li><li>two</li>')
    result = parse((
        FieldRule("price", "span.price", type="price"),
        FieldRule("stock", ".stock", type="availability"),
        FieldRule("n", ".n", type="number"),
        FieldRule("nums", "li", many=True, type="number"),
        FieldRule("brand", type="price", jsonld="Product.brand"),
    ), page({"@type": "Product", "brand": {"@type": "Brand", "name": "Acme"}}, body))
    assert result.record == {"price": None, "stock": None, "n": 12.0, "nums": None, "brand": None}
    assert result.errors == {
        "price": long.strip()[:200], "stock": "Ask", "nums": "two",
        "brand": '{"@type": "Brand", "name": "Acme"}'}
    assert len(result.errors["price"]) == 200
    assert result.counts["record/errors"] == 4
    assert {k: v for k, v in result.counts.items() if k.startswith("record/errors/")} == {
        "record/errors/price": 1, "record/errors/stock": 1, "record/errors/nums": 1,
        "record/errors/brand": 1}


def test_empty_values() -> None:
    body = '<span class="p"> </span><h2></h2>'
    result = parse((FieldRule("price", ".p", type="price"),
                    FieldRule("title", "h2", jsonld="Product.name")), page(body=body))
    # A typed field with nothing in it has no value; a text field keeps its empty text.
    assert result.record == {"price": None, "title": ""} and result.errors == {}


def test_listing_summaries_are_typed_and_keep_text_that_does_not_convert() -> None:
    body = ('<li><a href="/p/1">a</a><b>$5.00</b></li><li><a href="/p/2">b</a><b>ask</b></li>')
    result = parse((), page(body=body), ListingRule("li", "a", (FieldRule("price", "b",
                                                                          type="price"),)))
    assert [i.summary for i in result.listing] == [
        {"price": {"amount": 5.0, "currency": "USD"}}, {"price": "ask"}]
    assert result.counts["listing/errors"] == 1 and result.errors == {}


def test_rule_validation() -> None:
    assert FieldRule("a", "p").plain and not FieldRule("a", "p", type="number").plain
    assert PageType("t", ".", (FieldRule("a", jsonld="Product.name"),)).structured
    assert not PageType("t", ".", (FieldRule("a", "p", type="date"),)).structured
    assert FieldRule.parse("p", "span::attr(content)", type="price").attr == "content"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"css": "p", "type": "money"}, "type 'money'"),
        ({"css": "p", "type": "price", "currency": "EURO"}, "currency 'EURO'"),
        ({"css": "p", "currency": "EUR"}, "currency 'EUR'"),
        ({"css": "p", "type": "date", "date_format": "%d"}, "date_format '%d'"),
        ({"css": "p", "date_format": "%d/%m/%Y"}, "date_format"),
        ({"jsonld": "Product"}, "jsonld 'Product' is not a path"),
        ({"microdata": "Product.offers..price"}, "microdata"),
        ({}, "css is None"),
        ({"attr": "href", "jsonld": "Product.url"}, "attr reads an attribute"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            FieldRule("f", **kwargs)


def test_text_only_page_types_never_load_extruct() -> None:
    script = (
        "import sys\n"
        "from webcrawl.parse import FieldRule, PageParser, PageType, ParseRules\n"
        "rules = ParseRules(page_types=(PageType('p', '.', (FieldRule('a', 'h1'),"
        " FieldRule('b', 'p', type='price'))),))\n"
        "r = PageParser(rules).parse(b'<script type=\"application/ld+json\">{}</script>"
        "<h1 itemscope>x</h1><p>$1</p>', 'http://e.example/')\n"
        "assert r.record == {'a': 'x', 'b': {'amount': 1.0, 'currency': 'USD'}}, r.record\n"
        "print('extruct' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_hostile_structured_data() -> None:
    fields = (FieldRule("price", "h1", type="price", jsonld="Product.offers.price"),
              FieldRule("name", "h1", microdata="Product.name"))
    deep = "[" * 100_000 + "]" * 100_000
    result = parse(fields, page(body="<h1>$3</h1>").replace(
        b"<head>", f'<head><script type="application/ld+json">{deep}</script>'.encode()))
    assert result.record == {"price": {"amount": 3.0, "currency": "USD"}, "name": "$3"}
    assert result.counts["record/jsonld/broken"] == 1
    # Raw control characters, which lxml refuses in a text node, are read as spaces.
    controls = '\x0b{"@type": "Product", "offers": {"price": "1\x01", "priceCurrency": "EUR"}}'
    result = parse(fields, page(body="<h1>$3</h1>").replace(
        b"<head>", f'<head><script type="application/ld+json">{controls}</script>'.encode()))
    assert result.record["price"] == {"amount": 1.0, "currency": "EUR"}
    # Too many items: microdata is not read, CSS answers.
    items = '<p itemscope itemtype="https://schema.org/Product"><b itemprop="name">x</b></p>'
    result = parse(fields, page(body="<h1>$3</h1>" + items * (MAX_MICRODATA_ITEMS + 1)))
    assert result.record["name"] == "$3" and result.counts["record/microdata/skipped"] == 1
