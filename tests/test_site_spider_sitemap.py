"""Sitemaps: reading them (indexes, gzip, lastmod, hostile XML) and the spider's requests from
them (lastmod in meta, depth reset, scope, nesting limit)."""

from __future__ import annotations

import gzip
import time
from datetime import UTC, datetime

import pytest
from scrapy import Request
from scrapy.http import Response, XmlResponse
from scrapy.utils.test import get_crawler

from webcrawl.sites import site_from_dict
from webcrawl.spiderloader import spider_class_for
from webcrawl.spiders._sitemap import SitemapError, parse_lastmod, read_sitemap
from webcrawl.spiders.site import MAX_SITEMAP_NESTING, SiteSpider

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*entries: tuple[str, str | None]) -> bytes:
    body = "".join(f"<url><loc>{loc}</loc>" + (f"<lastmod>{m}</lastmod>" if m else "") + "</url>"
                   for loc, m in entries)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>{body}</urlset>'.encode()


def index(*locs: str) -> bytes:
    body = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0"?><sitemapindex {NS}>{body}</sitemapindex>'.encode()


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-03-04", utc(2026, 3, 4)),
    ("2026-03", utc(2026, 3, 1)),
    ("2026", utc(2026, 1, 1)),
    ("2026-03-04T05:06Z", utc(2026, 3, 4, 5, 6)),
    ("2026-03-04T05:06:07+02:00", utc(2026, 3, 4, 3, 6, 7)),
    ("2026-03-04T05:06:07.5-0100", utc(2026, 3, 4, 6, 6, 7) + 0.5),
    (" 2026-03-04T05:06:07 ", utc(2026, 3, 4, 5, 6, 7)),
    ("2026-02-30", None), ("2026-13-01", None), ("yesterday", None), ("", None), (None, None),
])
def test_parse_lastmod(text: str | None, expected: float | None) -> None:
    assert parse_lastmod(text) == expected


def test_read_urlset_and_index() -> None:
    doc = read_sitemap(urlset(("http://a.test/1", "2026-01-01"), ("http://a.test/2", "soon"),
                              (" http://a.test/3 ", None), ("", "2026-01-01")))
    assert doc.kind == "urlset" and not doc.gzipped and doc.invalid_lastmod == 1
    assert doc.entries == (("http://a.test/1", utc(2026, 1, 1)), ("http://a.test/2", None),
                           ("http://a.test/3", None))
    assert read_sitemap(index("http://a.test/s1.xml")).entries == (("http://a.test/s1.xml", None),)


def test_read_gzip_files_nested_once() -> None:
    body = urlset(("http://a.test/1", None))
    assert read_sitemap(gzip.compress(body)).gzipped
    assert read_sitemap(gzip.compress(gzip.compress(body))).entries == (("http://a.test/1", None),)
    with pytest.raises(SitemapError) as error:
        read_sitemap(gzip.compress(gzip.compress(gzip.compress(body))))
    assert error.value.kind == "gzip"


@pytest.mark.parametrize(("body", "kind"), [
    (b"", "xml"), (b"not xml at all", "xml"), (b"\x1f\x8b\x08garbage", "gzip"),
    (b"<html><body><a href='/x'>x</a></body></html>", "root"),
    (gzip.compress(b"<urlset>" + b" " * 5000 + b"</urlset>", mtime=0), "too_large"),
])
def test_bad_sitemaps_raise_sitemap_error(body: bytes, kind: str) -> None:
    with pytest.raises(SitemapError) as error:
        read_sitemap(body, max_bytes=1000)
    assert error.value.kind == kind


def test_entities_are_never_expanded() -> None:
    bomb = (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaaaaaaaa">'
            b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">'
            b'<!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;"><!ENTITY x SYSTEM "file:///etc/passwd">]>'
            b'<urlset><url><loc>http://a.test/&d;&x;</loc></url></urlset>')
    started = time.monotonic()
    doc = read_sitemap(bomb)
    assert time.monotonic() - started < 1
    assert all("aaaa" not in loc and "root:" not in loc for loc, _ in doc.entries)


SITE = site_from_dict({
    "name": "maps",
    "sitemaps": ["http://a.test/sitemap.xml"],
    "allowed_domains": ["a.test"],
    "politeness": {"user_agent": "bot (ops@a.test)"},
    "budget": {"billing": "requests", "amount_per_cycle": 100, "cycle_seconds": 3600},
    "limits": {"denied_url_patterns": ["/private/"]},
    "page_types": [{"name": "item", "url_pattern": "/item/"}],
})


@pytest.fixture
def spider() -> SiteSpider:
    crawler = get_crawler(spider_class_for(SITE), {"DOWNLOAD_MAXSIZE": 100_000})
    crawler.spider = crawler._create_spider()
    assert isinstance(crawler.spider, SiteSpider)
    return crawler.spider


def sitemap_response(url: str, body: bytes, level: int = 0, cls: type[Response] = XmlResponse) -> Response:
    return cls(url, body=body, request=Request(url, meta={"webcrawl_sitemap_level": level}))


def test_urlset_entries_become_discovery_requests_with_lastmod(spider: SiteSpider) -> None:
    body = urlset(("http://a.test/item/1", "2026-01-02"), ("http://a.test/item/2", None),
                  ("http://other.test/item/3", None), ("http://a.test/private/4", None),
                  ("http://a.test/logo.png", None), ("ftp://a.test/x", None))
    requests = list(spider.parse_sitemap(sitemap_response("http://a.test/sitemap.xml", body)))
    assert [r.url for r in requests] == ["http://a.test/item/1", "http://a.test/item/2"]
    first, second = requests
    assert first.meta["webcrawl_lastmod"] == utc(2026, 1, 2) and "webcrawl_lastmod" not in second.meta
    assert all(r.meta["webcrawl_purpose"] == "discovery" and r.meta["webcrawl_page_type"] == "item"
               and r.meta["depth_reset"] and r.callback == spider.parse for r in requests)
    stats = spider.crawler.stats.get_stats()  # type: ignore[union-attr]
    assert stats["webcrawl/sitemap/urls"] == 6 and stats["webcrawl/sitemap/lastmod"] == 1
    for reason in ("scope", "pattern", "extension", "scheme"):
        assert stats[f"webcrawl/sitemap/filtered/{reason}"] == 1


def test_a_sitemap_read_again_requests_no_url_this_process_asked_for(spider: SiteSpider) -> None:
    """Its dates reach the crawl state as notes (land operation "M"), not as requests: a page is
    fetched at most once per due time."""
    body = urlset(("http://a.test/item/1", "2026-01-02"), ("http://a.test/item/2", None))
    list(spider.parse_sitemap(sitemap_response("http://a.test/sitemap.xml", body)))
    again = list(spider.parse_sitemap(sitemap_response("http://a.test/sitemap.xml", body)))
    assert again == []
    assert spider.crawler.stats.get_value("webcrawl/spider/links/known") == 2  # type: ignore[union-attr]


def test_index_fetches_child_sitemaps_in_scope_up_to_the_nesting_limit(spider: SiteSpider) -> None:
    body = index("http://a.test/s1.xml.gz", "http://other.test/s2.xml", "http://a.test/s3.xml")
    requests = list(spider.parse_sitemap(sitemap_response("http://a.test/sitemap.xml", body, level=1)))
    assert [r.url for r in requests] == ["http://a.test/s1.xml.gz", "http://a.test/s3.xml"]
    assert all(r.meta["webcrawl_purpose"] == "sitemap" and r.meta["webcrawl_sitemap_level"] == 2
               and not r.dont_filter and r.callback == spider.parse_sitemap for r in requests)
    deep = list(spider.parse_sitemap(sitemap_response("http://a.test/s.xml", body, MAX_SITEMAP_NESTING)))
    assert deep == []
    stats = spider.crawler.stats.get_stats()  # type: ignore[union-attr]
    assert stats["webcrawl/sitemap/filtered/nesting"] == 2 and stats["webcrawl/sitemap/filtered/scope"] == 2


def test_gzip_file_and_bad_sitemaps_through_the_spider(spider: SiteSpider) -> None:
    body = gzip.compress(urlset(("http://a.test/item/7", "2026-05-01T00:00:00Z")))
    requests = list(spider.parse_sitemap(sitemap_response("http://a.test/s.xml.gz", body, cls=Response)))
    assert [r.url for r in requests] == ["http://a.test/item/7"]
    assert list(spider.parse_sitemap(sitemap_response("http://a.test/s.xml", b"<html>oops</html>"))) == []
    stats = spider.crawler.stats.get_stats()  # type: ignore[union-attr]
    assert stats["webcrawl/sitemap/gzip"] == 1 and stats["webcrawl/sitemap/errors/root"] == 1


def test_urls_first_listed_by_a_sitemap_read_again_go_before_other_new_urls(spider: SiteSpider) -> None:
    first = list(spider.parse_sitemap(sitemap_response(
        "http://a.test/sitemap.xml", urlset(("http://a.test/item/1", None)))))
    assert not first[0].meta.get("webcrawl_newly_listed"), "a first reading lists what exists"
    reread = Request("http://a.test/sitemap.xml", meta={"webcrawl_sitemap_level": 0, "webcrawl_known": True})
    body = urlset(("http://a.test/item/1", None), ("http://a.test/item/2", None))
    again = list(spider.parse_sitemap(XmlResponse("http://a.test/sitemap.xml", body=body, request=reread)))
    assert [r.url for r in again] == ["http://a.test/item/2"]
    assert again[0].meta["webcrawl_newly_listed"] is True
