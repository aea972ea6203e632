"""Exact change times from sitemap ``lastmod`` on hosts whose dates proved reliable (issue 5,
item 1): the spider carries a sitemap entry's date into its PageItem, and the record-hash
pipeline passes ``fetch_time - lastmod`` to the page history as the change age, only for trusted
hosts, only for a date not after the fetch; the history keeps it only for a changed record whose
change fits in the interval since the previous visit. Real Redis."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from scrapy import Request
from scrapy.http import HtmlResponse, Response
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from webcrawl.change import FetchNotes, TrustPolicy
from webcrawl.clock import ManualClock
from webcrawl.items import EXPORTED_FIELDS, PageItem
from webcrawl.middlewares.conditional import ChangeContext
from webcrawl.parse import Canonicalizer
from webcrawl.pipelines.recordhash import RecordHashPipeline
from webcrawl.sites import site_from_dict
from webcrawl.spiderloader import spider_class_for
from webcrawl.spiders.site import SiteSpider
from webcrawl.state.history import HistoryStore, PageRecord
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.sitemaps import SitemapStore
from webcrawl.state.trust import TrustStore

KEYS = CrawlKeys("lastmod")
HOUR = 3600.0
T0 = 1_700_000_000.0
SITE = site_from_dict({
    "name": "shop",
    "seeds": ["http://learn.shop.test/"],
    "sitemaps": ["http://learn.shop.test/sitemap.xml"],
    "allowed_domains": ["shop.test"],
    "politeness": {"user_agent": "bot (ops@shop.test)"},
    "budget": {"billing": "requests", "amount_per_cycle": 100, "cycle_seconds": 3600},
    "page_types": [{"name": "product", "url_pattern": r"/product/\d+", "fields": {"name": "h1"}}],
    "trust": {"validators": "never", "hosts": {
        "always.shop.test": {"sitemaps": "always", "validators": "always"},
        "never.shop.test": {"sitemaps": "never"}}},
})


def pipeline(client: redis.Redis, **kwargs: Any) -> RecordHashPipeline:
    context = ChangeContext(HistoryStore(client, KEYS),
                            TrustStore(client, KEYS, TrustPolicy(earn_after=1), ManualClock()),
                            FetchNotes(), Canonicalizer())
    return RecordHashPipeline(context, MemoryStatsCollector(get_crawler()), site=SITE, **kwargs)


def item(host: str, name: str, fetch_time: float, lastmod: float | None = None,
         headers: dict[str, str] | None = None) -> PageItem:
    url = f"http://{host}/product/1"
    return PageItem(url=url, canonical_url=url, site="shop", page_type="product", status=200,
                    fetch_time=fetch_time, record={"name": name}, body=b"x" * 50,
                    headers=headers or {}, lastmod=lastmod)


def twice(client: redis.Redis, host: str, second: str, lastmod: float | None,
          pipe: RecordHashPipeline | None = None, **kwargs: Any) -> PageRecord:
    """Fetch the page at T0 (record "a"), then at T0 + 10 h (record ``second``) with ``lastmod``."""
    pipe = pipe or pipeline(client)
    pipe.process_item(item(host, "a", T0))
    pipe.process_item(item(host, second, T0 + 10 * HOUR, lastmod, **kwargs))
    record = pipe.context.history.get(f"http://{host}/product/1")
    assert record is not None
    return record


def test_a_trusted_hosts_lastmod_is_the_exact_change_time(redis_client: redis.Redis) -> None:
    record = twice(redis_client, "always.shop.test", "b", T0 + 7 * HOUR)
    assert (record.changes, record.exact_changes, record.exact_seconds) == (1, 1, 3 * HOUR)
    assert record.bins == {}  # not counted as a censored interval
    assert record.page_history().exact_seconds == 3 * HOUR


def test_trust_learned_from_agreement_counts_too(redis_client: redis.Redis) -> None:
    host = "learn.shop.test"
    assert twice(redis_client, host, "b", T0 + 7 * HOUR).exact_changes == 0  # still learning
    redis_client.delete(KEYS.page(f"http://{host}/product/1"))
    sitemaps = SitemapStore(redis_client, KEYS)
    for i in range(sitemaps.min_agreements):
        sitemaps.judge(host, lastmod=T0 + i + 1, previous_fetch=T0, changed=True)
    assert sitemaps.trusted(host)
    pipe = pipeline(redis_client)
    record = twice(redis_client, host, "b", T0 + 9 * HOUR, pipe)
    assert (record.exact_changes, record.exact_seconds) == (1, HOUR)
    assert pipe.stats.get_value("webcrawl/records/lastmod_exact") == 1


@pytest.mark.parametrize(("host", "second", "lastmod", "why"), [
    ("never.shop.test", "b", T0 + 7 * HOUR, "the site file distrusts this host's sitemap"),
    ("learn.shop.test", "b", T0 + 7 * HOUR, "trust not earned yet"),
    ("always.shop.test", "b", T0 + 11 * HOUR, "dated after the fetch"),
    ("always.shop.test", "b", T0 - HOUR, "dated before the previous visit: not this change"),
    ("always.shop.test", "b", None, "no lastmod"),
])
def test_no_exact_time_otherwise(redis_client: redis.Redis, host: str, second: str,
                                 lastmod: float | None, why: str) -> None:
    record = twice(redis_client, host, second, lastmod)
    assert (record.changes, record.exact_changes, record.exact_seconds) == (1, 0, 0.0), why
    assert sum(count for count, _ in record.bins.values()) == 1  # a censored interval instead


def test_an_unchanged_record_stays_unchanged_whatever_its_date(redis_client: redis.Redis) -> None:
    record = twice(redis_client, "always.shop.test", "a", T0 + 7 * HOUR)
    assert (record.changes, record.exact_changes, record.unchanged_seconds) == (0, 0, 10 * HOUR)


def test_last_modified_from_trusted_validators_comes_first_and_the_setting_turns_both_off(
        redis_client: redis.Redis) -> None:
    headers = {"Date": "Tue, 14 Nov 2023 22:13:20 GMT", "Last-Modified": "Tue, 14 Nov 2023 21:13:20 GMT"}
    record = twice(redis_client, "always.shop.test", "b", T0 + 7 * HOUR, headers=headers)
    assert (record.exact_changes, record.exact_seconds) == (1, HOUR)  # the header's age, not 3 h
    redis_client.flushall()
    off = pipeline(redis_client, exact_changes=False)
    record = twice(redis_client, "always.shop.test", "b", T0 + 7 * HOUR, off)
    assert record.exact_changes == 0 and record.changes == 1


def test_the_spider_carries_a_sitemap_entrys_lastmod_into_the_item() -> None:
    crawler = get_crawler(spider_class_for(SITE))
    crawler.spider = spider = crawler._create_spider()
    assert isinstance(spider, SiteSpider)
    sitemap = (b'<?xml version="1.0" encoding="UTF-8"?>'
               b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               b"<url><loc>http://learn.shop.test/product/1</loc><lastmod>2023-11-14T22:13:20Z</lastmod></url>"
               b"<url><loc>http://learn.shop.test/product/2</loc></url></urlset>")
    request = Request("http://learn.shop.test/sitemap.xml", meta={"webcrawl_sitemap_level": 0})
    (dated, undated) = [r for r in spider.parse_sitemap(Response(request.url, body=sitemap, request=request))
                        if isinstance(r, Request)]
    assert dated.meta["webcrawl_lastmod"] == T0 and "webcrawl_lastmod" not in undated.meta
    page = b"<html><body><h1>Kettle</h1></body></html>"
    items = []
    for req in (dated, undated):
        resp = HtmlResponse(req.url, body=page, headers={"Content-Type": "text/html"}, request=req)
        items += [o for o in spider.parse(resp) if isinstance(o, PageItem)]
    assert [i.lastmod for i in items] == [T0, None]
    assert "lastmod" not in EXPORTED_FIELDS
