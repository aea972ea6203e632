"""SiteSpider on pages: start requests, links, PageItem and ListingItem contents, meta keys, the
per-process seen set, stats, and hostile bodies (never an exception)."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.test import get_crawler

from webcrawl import meta as M
from webcrawl.items import ListingItem, PageItem
from webcrawl.sites import site_from_dict
from webcrawl.spiderloader import spider_class_for
from webcrawl.spiders.site import HEADERS_KEPT, SiteSpider

SITE = site_from_dict({
    "name": "shop",
    "seeds": ["http://shop.test/", "http://SHOP.test:80/start?b=2&a=1#top"],
    "sitemaps": ["http://shop.test/sitemap.xml"],
    "allowed_domains": ["shop.test"],
    "politeness": {"user_agent": "bot (ops@shop.test)"},
    "budget": {"billing": "requests", "amount_per_cycle": 100, "cycle_seconds": 3600},
    "limits": {"max_depth": 3, "parse_bytes": 4096, "denied_url_patterns": ["/cart"]},
    "page_types": [
        {"name": "product", "url_pattern": r"/product/\d+", "volatile": ["served"],
         "fields": {"name": "h1.name", "price": "span.price", "served": "p.served"}},
        {"name": "category", "url_pattern": "/category/",
         "listing": {"item": "li.item", "link": "a", "summary": {"price": "span.price"}}},
    ],
})

PRODUCT = b"""<html><head><title>x</title></head><body>
<h1 class="name">Blue <em>Kettle</em></h1><span class="price">12.50</span><p class="served">now</p>
<a href="/product/2">two</a> <a href="../product/3?sid=abc#r">three</a> <a href="/product/2">again</a>
<a href="http://other.test/x">elsewhere</a> <a href="/cart">cart</a> <a href="mailto:a@b">mail</a>
</body></html>"""

CATEGORY = b"""<html><body><h1>Kettles</h1><ul>
<li class="item"><a href="/product/1">One</a><span class="price">10</span></li>
<li class="item"><a href="/product/2">Two</a><span class="price">20</span></li>
</ul></body></html>"""


@pytest.fixture
def spider() -> SiteSpider:
    crawler = get_crawler(spider_class_for(SITE))
    crawler.spider = crawler._create_spider()
    assert isinstance(crawler.spider, SiteSpider)
    return crawler.spider


def stats(spider: SiteSpider) -> dict[str, Any]:
    assert spider.crawler.stats is not None
    return spider.crawler.stats.get_stats()


def response(url: str, body: bytes, cls: type[Response] = HtmlResponse, depth: int = 1,
             headers: dict[str, str] | None = None) -> Response:
    request = Request(url, meta={"depth": depth})
    headers = {"Content-Type": "text/html; charset=utf-8", **(headers or {})}
    return cls(url, body=body, headers=headers, request=request)


def run(spider: SiteSpider, resp: Response) -> tuple[list[Request], list[Any]]:
    out = list(spider.parse(resp))
    return [o for o in out if isinstance(o, Request)], [o for o in out if not isinstance(o, Request)]


def start_requests(spider: SiteSpider) -> list[Request]:
    """What ``start()`` yields, on a private event loop (``asyncio.run`` would unset the
    reactor's loop for the tests after this one)."""

    async def collect() -> list[Request]:
        return [r async for r in spider.start()]

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(collect())
    finally:
        loop.close()


def test_start_yields_canonical_seeds_then_sitemaps(spider: SiteSpider) -> None:
    requests = start_requests(spider)
    assert [r.url for r in requests] == [
        "http://shop.test/", "http://shop.test/start?a=1&b=2", "http://shop.test/sitemap.xml"]
    seed, _, sitemap = requests
    assert seed.meta["webcrawl_purpose"] == "discovery" and seed.meta["webcrawl_page_type"] is None
    assert seed.callback == spider.parse and not seed.dont_filter
    assert sitemap.meta["webcrawl_purpose"] == "sitemap" and sitemap.callback == spider.parse_sitemap
    # Through the seen filter (read once per due time), never conditional.
    assert not sitemap.dont_filter and sitemap.meta["webcrawl_conditional"] is False


def test_the_base_class_has_no_name_and_refuses_to_start() -> None:
    assert getattr(SiteSpider, "name", None) is None and SiteSpider.site is None
    spider = SiteSpider(name="x")
    with pytest.raises(ValueError, match="has no site"):
        start_requests(spider)


def test_product_page_links_item_and_meta(spider: SiteSpider) -> None:
    url = "http://shop.test/product/1"
    resp = response(url, PRODUCT, headers={"ETag": '"v1"', "Last-Modified": "Tue, 01 Dec 2026 00:00:00 GMT",
                                           "X-Other": "no"})
    requests, items = run(spider, resp)
    assert [r.url for r in requests] == ["http://shop.test/product/2", "http://shop.test/product/3"]
    assert all(r.meta["webcrawl_purpose"] == "discovery" and r.meta["webcrawl_page_type"] == "product"
               and r.callback == spider.parse for r in requests)
    (item,) = items
    assert isinstance(item, PageItem)
    assert (item.url, item.canonical_url, item.site, item.page_type, item.status) == (
        url, url, "shop", "product", 200)
    assert item.record == {"name": "Blue Kettle", "price": "12.50", "served": "now"}
    assert item.body == PRODUCT and item.fetch_time > 1.7e9
    assert item.headers == {"ETag": '"v1"', "Last-Modified": "Tue, 01 Dec 2026 00:00:00 GMT",
                            "Content-Type": "text/html; charset=utf-8"}
    assert set(item.headers) <= set(HEADERS_KEPT)
    s = stats(spider)
    assert s["webcrawl/parse/pages/html"] == 1 and s["webcrawl/parse/page_type/product"] == 1
    assert s["webcrawl/parse/links/filtered/scope"] == 1 and s["webcrawl/parse/links/filtered/pattern"] == 1
    assert s["webcrawl/spider/items/page/product"] == 1


def test_links_already_requested_are_not_requested_again(spider: SiteSpider) -> None:
    first, _ = run(spider, response("http://shop.test/product/1", PRODUCT))
    again, items = run(spider, response("http://shop.test/product/4", PRODUCT))
    assert len(first) == 2
    assert again == []  # the same two links: both asked for already
    assert len(items) == 1 and stats(spider)["webcrawl/spider/links/known"] == 2


def test_seen_set_is_bounded(spider: SiteSpider) -> None:
    spider.seen_cache_size = 1
    run(spider, response("http://shop.test/product/1", PRODUCT))
    requests, _ = run(spider, response("http://shop.test/product/1", PRODUCT))
    assert requests, "forgotten URLs are requested again (the scheduler's filter drops them)"


def test_listing_page_yields_listing_items(spider: SiteSpider) -> None:
    url = "http://shop.test/category/kettles/"
    requests, items = run(spider, response(url, CATEGORY))
    page, *listed = items
    assert isinstance(page, PageItem) and page.page_type == "category" and page.record == {}
    assert listed == [
        ListingItem(url, "http://shop.test/product/1", {"price": "10"}, "shop", page.fetch_time),
        ListingItem(url, "http://shop.test/product/2", {"price": "20"}, "shop", page.fetch_time),
    ]
    assert len(requests) == 2
    assert stats(spider)["webcrawl/spider/items/listing/category"] == 2


def test_listing_items_can_be_switched_off(spider: SiteSpider) -> None:
    spider.listing_items = False
    _, items = run(spider, response("http://shop.test/category/kettles/", CATEGORY))
    assert [type(i) for i in items] == [PageItem]


def test_depth_limit_applies_to_links(spider: SiteSpider) -> None:
    requests, items = run(spider, response("http://shop.test/product/1", PRODUCT, depth=3))
    assert requests == [] and len(items) == 1
    assert stats(spider)["webcrawl/parse/links/filtered/depth"] > 0


def test_untyped_page_linking_typed_pages_is_a_hub_item(spider: SiteSpider) -> None:
    requests, items = run(spider, response("http://shop.test/about", PRODUCT))
    assert len(requests) == 2
    [hub] = items
    assert (hub.page_type, hub.body) == (None, b"")
    assert hub.record == {"links": ["http://shop.test/product/2", "http://shop.test/product/3"]}
    assert stats(spider)["webcrawl/parse/page_type/none"] == 1
    assert stats(spider)["webcrawl/spider/items/hub"] == 1


def test_untyped_page_linking_no_typed_page_yields_links_only(spider: SiteSpider) -> None:
    body = b"<html><body><a href=\"/about\">about</a><a href=\"/contact\">contact</a></body></html>"
    requests, items = run(spider, response("http://shop.test/help", body))
    assert items == [] and len(requests) == 2


def test_item_body_is_the_body_as_fetched_not_the_truncated_one(spider: SiteSpider) -> None:
    body = PRODUCT.replace(b"</body>", b"<p>" + b"x" * 10_000 + b"</p></body>")
    _, (item,) = run(spider, response("http://shop.test/product/1", body))
    assert item.body == body and item.record["name"] == "Blue Kettle"
    assert stats(spider)["webcrawl/parse/truncated"] == 1


@pytest.mark.parametrize(("body", "cls", "content_type", "kind"), [
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, HtmlResponse, "text/html", "binary"),
    (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", Response, "application/pdf", "pdf"),
    (gzip.compress(PRODUCT), HtmlResponse, "text/html", "binary"),
    (b"", HtmlResponse, "text/html", "empty"),
    (b"  \n\t ", TextResponse, "text/plain", "empty"),
    (b"<html><body><h1 class=name>caf\xe9 \xff\xfe</h1><a href='/product/9'>x</a></body></html>",
     HtmlResponse, "text/html; charset=utf-8", "html"),
    (b"<html><body><h1 class=name>" + "\u00e9t\u00e9".encode("utf-16-le") + b"</h1></body></html>",
     HtmlResponse, "text/html; charset=utf-16", "html"),
    (b"<html><body>" + b"<div>" * 5000 + b"<a href='/product/9'>deep</a>", HtmlResponse,
     "text/html", "html"),
])
def test_hostile_bodies_never_raise_and_are_counted(spider: SiteSpider, body: bytes,
                                                    cls: type[Response], content_type: str,
                                                    kind: str) -> None:
    resp = response("http://shop.test/product/1", body, cls, headers={"Content-Type": content_type})
    _, items = run(spider, resp)
    (item,) = items  # a typed URL is an item whatever its body, so a broken page is a change
    assert item.body == body
    assert stats(spider)[f"webcrawl/parse/pages/{kind}"] == 1


def test_broken_utf8_is_counted(spider: SiteSpider) -> None:
    body = b"<html><body><h1 class=name>caf\xe9 \xff</h1></body></html>"
    _, (item,) = run(spider, response("http://shop.test/product/1", body))
    assert item.record["name"].startswith("caf")
    assert stats(spider)["webcrawl/parse/encoding/broken"] == 1


def test_a_lister_read_again_rechecks_the_known_pages_it_stopped_showing(spider: SiteSpider) -> None:
    url = "http://shop.test/category/kettles/"
    resp = response(url, CATEGORY)
    resp.meta.update({M.KNOWN: True, M.LINKS: ("http://shop.test/product/1", "http://shop.test/product/9")})
    requests, items = run(spider, resp)
    [recheck] = [r for r in requests if r.meta.get(M.RECHECK)]
    assert recheck.url == "http://shop.test/product/9" and recheck.dont_filter
    assert recheck.meta[M.KNOWN] and recheck.meta[M.CANONICAL_URL] == recheck.url
    assert recheck.meta["handle_httpstatus_list"] == [404, 410]  # a removal is seen
    assert items[0].links == ("http://shop.test/product/1", "http://shop.test/product/2")


def test_a_page_this_process_just_revisited_is_not_rechecked(spider: SiteSpider) -> None:
    """Its revisit told its fate (a moved page's listing stops showing it once it moved: the
    revisit that met the 301 is enough)."""
    spider.revisit_request("http://shop.test/product/9")
    resp = response("http://shop.test/category/kettles/", CATEGORY)
    resp.meta.update({M.KNOWN: True, M.LINKS: ("http://shop.test/product/1", "http://shop.test/product/9")})
    requests, _ = run(spider, resp)
    assert not [r for r in requests if r.meta.get(M.RECHECK)]


def test_a_known_page_reached_through_redirects_is_moved_only_when_all_were_permanent(
        spider: SiteSpider) -> None:
    old, new = "http://shop.test/product/1", "http://shop.test/product/7"
    for reasons, moved, item_count in (([301], old, 1), ([301, 308], old, 1), ([302], None, 1),
                                       ([301, 307], None, 1)):
        resp = response(new, PRODUCT)
        resp.meta.update({M.KNOWN: True, M.CANONICAL_URL: old, "redirect_urls": [old] * len(reasons),
                          "redirect_reasons": reasons})
        _, items = run(spider, resp)
        pages = [i for i in items if isinstance(i, PageItem)]
        assert len(pages) == item_count
        if moved:
            assert (pages[0].moved_from, pages[0].moved_url) == (moved, old)
        else:  # a temporary redirect: a check of the fetch, nothing observed
            assert (pages[0].check_only, pages[0].moved_from, pages[0].body) == ("redirected", None, b"")


def test_a_known_page_answering_404_is_a_bodiless_item(spider: SiteSpider) -> None:
    url = "http://shop.test/product/1"
    resp = HtmlResponse(url, status=404, body=b"gone", request=Request(url, meta={
        M.KNOWN: True, M.CANONICAL_URL: url, M.PAGE_TYPE: "product"}))
    requests, [item] = run(spider, resp)
    assert requests == [] and (item.status, item.body, item.page_type) == (404, b"", "product")
    unknown = HtmlResponse(url, status=404, body=b"gone", request=Request(url))
    assert run(spider, unknown) == ([], [])
