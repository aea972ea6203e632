"""Typed and structured record fields in site files: what is accepted, what reaches the parser,
and the one-line error for each kind of mistake."""

from __future__ import annotations

from typing import Any

import pytest
from tests.test_sites_schema import changed

from webcrawl.parse import PageParser, rules_for_site
from webcrawl.sites import FieldRule, SiteConfigError, parse_site, site_from_dict

SITE = """
name = "shop"
seeds = ["https://www.shop.example/"]
allowed_domains = ["shop.example"]

[politeness]
user_agent = "testbot/1.0 (+https://bots.example/testbot)"

[budget]
billing = "requests"
amount_per_cycle = 100
cycle_seconds = 3600

[[page_types]]
name = "product"
url_pattern = "/p/"
value_field = { field = "rating", tiers = { "5" = "critical" } }

[page_types.fields]
name = "h1"
price = { jsonld = "Product.offers.price", css = "span.price", type = "price" }
price_eur = { css = ".p", type = "price", currency = "EUR" }
stock = { css = ".stock", type = "availability", microdata = "Product.offers.availability" }
rating = { css = ".r", type = "number" }
released = { css = "time", attr = "datetime", type = "date" }
shipped = { css = ".shipped", type = "date", format = "%d/%m/%Y" }
sizes = { css = "li.size", type = "number", many = true }
brand = { jsonld = "Product.brand.name" }

[[page_types]]
name = "category"
url_pattern = "/c/"

[page_types.listing]
item = "li.item"
summary = { price = { css = "b", type = "price" } }
"""

PAGE = b"""<html><head><script type="application/ld+json">
{"@context": "https://schema.org", "@type": "Product", "brand": {"@type": "Brand", "name": "Acme"},
 "offers": {"@type": "Offer", "price": 19.5, "priceCurrency": "GBP"}}</script></head><body>
<h1>Kettle</h1><span class="price">$25</span><span class="p">12,00</span>
<span class="stock">In stock: 5</span><span class="r">5.0</span><time datetime="2026-03-05">x</time>
<span class="shipped">06/03/2026</span><ul><li class="size">1,5</li><li class="size">2</li></ul>
</body></html>"""


def test_typed_fields_are_read_and_reach_the_parser() -> None:
    site = parse_site(SITE, "shop.toml")
    product = site.page_types[0]
    fields = {f.name: f for f in product.fields}
    assert fields["name"] == FieldRule("name", "h1")
    assert fields["price"] == FieldRule("price", "span.price", type="price",
                                        jsonld="Product.offers.price")
    assert fields["price_eur"].currency == "EUR"
    assert fields["stock"].microdata == "Product.offers.availability"
    assert fields["shipped"].date_format == "%d/%m/%Y"
    assert fields["brand"].css is None and fields["brand"].type == "text"
    listing = site.page_types[1].listing
    assert listing is not None and listing.summary == (FieldRule("price", "b", type="price"),)

    rules = rules_for_site(site)
    ours = {f.name: f for f in rules.page_types[0].fields}
    for name, theirs in fields.items():
        assert (ours[name].css, ours[name].attr, ours[name].many, ours[name].type,
                ours[name].currency, ours[name].date_format, ours[name].jsonld,
                ours[name].microdata) == (theirs.css, theirs.attr, theirs.many, theirs.type,
                                          theirs.currency, theirs.date_format, theirs.jsonld,
                                          theirs.microdata)
    assert rules.page_types[0].structured and not rules.page_types[1].structured

    result = PageParser(rules).parse(PAGE, "https://www.shop.example/p/1")
    assert result.errors == {}
    assert result.record == {
        "name": "Kettle",
        "price": {"amount": 19.5, "currency": "GBP"},
        "price_eur": {"amount": 12.0, "currency": "EUR"},
        "stock": "InStock",
        "rating": 5.0,
        "released": "2026-03-05",
        "shipped": "2026-03-06",
        "sizes": [1.5, 2.0],
        "brand": "Acme",
    }
    # A number field's whole value is looked up as "5", not "5.0".
    assert product.tier_for(None, result.record) == 4


EXPECT_PATH = "a schema.org type then dotted keys, e.g. 'Product.offers.price'"
FIELD = "page_types[2].fields.price"

CASES: list[tuple[str, Any, str]] = [
    (FIELD, {"css": "span", "type": "money"}, f"{FIELD}.type: got 'money', expected one of "
     "'text', 'number', 'price', 'availability', 'date'"),
    (FIELD, {"css": "span", "type": 1}, f"{FIELD}.type: got 1, expected one of 'text', "
     "'number', 'price', 'availability', 'date'"),
    (FIELD, {"css": "span", "type": "price", "currency": "EURO"}, f"{FIELD}.currency: got "
     "'EURO', expected an ISO 4217 currency code in capitals, e.g. 'EUR' or 'USD'"),
    (FIELD, {"css": "span", "type": "price", "currency": "eur"}, f"{FIELD}.currency: got "
     "'eur', expected an ISO 4217 currency code in capitals, e.g. 'EUR' or 'USD'"),
    (FIELD, {"css": "span", "type": "price", "currency": "XYZ"}, f"{FIELD}.currency: got "
     "'XYZ', expected an ISO 4217 currency code in capitals, e.g. 'EUR' or 'USD'"),
    (FIELD, {"css": "span", "type": "number", "currency": "EUR"}, f"{FIELD}.currency: got "
     "'EUR' on a field of type 'number', expected currency only on a field of type 'price'"),
    (FIELD, {"css": "span", "currency": "EUR"}, f"{FIELD}.currency: got 'EUR' on a field of "
     "type 'text', expected currency only on a field of type 'price'"),
    (FIELD, {"css": "span", "type": "price", "format": "%d/%m/%Y"}, f"{FIELD}.format: got "
     "'%d/%m/%Y' on a field of type 'price', expected format only on a field of type 'date'"),
    (FIELD, {"css": "span", "type": "date", "format": "%d/%m"}, f"{FIELD}.format: got "
     "'%d/%m', expected a strptime format with day, month and year, e.g. '%d/%m/%Y'"),
    (FIELD, {"css": "span", "type": "date", "format": "%Q"}, f"{FIELD}.format: got '%Q', "
     "expected a strptime format with day, month and year, e.g. '%d/%m/%Y'"),
    (FIELD, {"jsonld": "Product"}, f"{FIELD}.jsonld: got 'Product', expected {EXPECT_PATH}"),
    (FIELD, {"jsonld": "Product..price"},
     f"{FIELD}.jsonld: got 'Product..price', expected {EXPECT_PATH}"),
    (FIELD, {"jsonld": "Product.offers price"},
     f"{FIELD}.jsonld: got 'Product.offers price', expected {EXPECT_PATH}"),
    (FIELD, {"microdata": ["Product.price"]},
     f"{FIELD}.microdata: got ['Product.price'], expected {EXPECT_PATH}"),
    (FIELD, {"jsonld": "Product.url", "attr": "href"}, f"{FIELD}.attr: got 'href' without css, "
     "expected css beside attr (attr names an attribute of the css match)"),
    (FIELD, {"type": "price"},
     f"{FIELD}.css: missing, expected a CSS selector (or a jsonld or microdata path)"),
    (FIELD, {"jsonld": "Product.name", "css": "span["}, f"{FIELD}.css: got 'span[', expected a "
     "CSS selector that selectolax parses (no ::text or ::attr(); use attr)"),
    ("page_types[1].listing.summary.price", {"css": "b", "jsonld": "Product.offers.price"},
     "page_types[1].listing.summary.price.jsonld: got 'Product.offers.price', expected css "
     "alone in a listing summary (it is read inside each item, not from the page's structured "
     "data)"),
    ("page_types[1].listing.summary.price", {"css": "b", "type": "cost"},
     "page_types[1].listing.summary.price.type: got 'cost', expected one of 'text', 'number', "
     "'price', 'availability', 'date'"),
    ("page_types[1].listing.link", {"css": "a", "type": "number"},
     "page_types[1].listing.link.type: unknown key, expected one of: attr, css, many"),
]


@pytest.mark.parametrize(("path", "value", "message"), CASES,
                         ids=[f"{p}={v!r}"[-60:] for p, v, _ in CASES])
def test_bad_typed_field_gives_one_exact_message(path: str, value: Any, message: str) -> None:
    with pytest.raises(SiteConfigError) as info:
        site_from_dict(changed(path, value), "sites/shop.toml", {})
    assert str(info.value) == f"sites/shop.toml: {message}"
    assert message.startswith(info.value.field + ":")


def test_a_price_cannot_name_the_tier() -> None:
    doc = changed(FIELD, {"css": "span", "type": "price"})
    doc["page_types"][2]["value_field"] = {"field": "price", "tiers": {"1": 4}}
    with pytest.raises(SiteConfigError) as info:
        site_from_dict(doc, "s.toml", {})
    assert str(info.value) == (
        "s.toml: page_types[2].value_field.field: got 'price', expected a field that is not a "
        "price ['images', 'seen', 'title'] (a price is a table of amount and currency, not a "
        "value to look up)")
