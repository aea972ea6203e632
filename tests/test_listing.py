"""Cheap signals: listing summaries item by item (webcrawl.pipelines.listing) and sitemap lastmod
trust (webcrawl.state.sitemaps), in a real redis-server."""

from __future__ import annotations

import pytest
import redis
from scrapy import Request
from scrapy.statscollectors import StatsCollector

from tests.test_planner import Stats
from webcrawl.items import ListingItem, PageItem
from webcrawl.pipelines.listing import ListingPipeline
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.pages import PageIndex
from webcrawl.state.sitemaps import SitemapStore, parse_lastmod

KEYS = CrawlKeys("listing")
LISTING = "http://shop.test/category/a/"
ITEM = "http://shop.test/product/1/x"


def listed(price: str, when: float, item: str = ITEM) -> ListingItem:
    return ListingItem(LISTING, item, {"price": price, "stock": "3"}, "shop", when)


@pytest.fixture
def parts(redis_client: redis.Redis) -> tuple[ListingPipeline, HistoryStore, list[Request], StatsCollector]:
    history, sent, stats = HistoryStore(redis_client, KEYS), list[Request](), Stats()
    pipeline = ListingPipeline(redis_client, KEYS, history, stats, crawl=sent.append,
                               index=PageIndex(redis_client, KEYS))
    return pipeline, history, sent, stats


def test_a_changed_summary_schedules_the_item(parts: tuple) -> None:
    pipeline, history, sent, stats = parts
    history.observe(ITEM, now=0.0, record_hash="r1")
    item = listed("10", 100.0)
    assert pipeline.process_item(item) is item and stats.get_value("webcrawl/listing/first") == 1
    pipeline.process_item(listed("12", 200.0))
    assert stats.get_value("webcrawl/listing/changed") == 1 and len(sent) == 1
    request = sent[0]
    assert request.url == ITEM and request.dont_filter and request.priority > 10_000
    assert request.meta["webcrawl_purpose"] == "revisit" and request.meta["webcrawl_trigger"] == "listing"


def test_an_unchanged_summary_is_an_unchanged_observation_at_the_listing_share(
        parts: tuple, redis_client: redis.Redis) -> None:
    pipeline, history, sent, stats = parts
    history.observe(LISTING, now=0.0, record_hash="l")
    redis_client.hset(KEYS.page(LISTING), "billed", 40.0)  # 40 units a fetch of the listing
    history.observe(ITEM, now=0.0, record_hash="r1")
    pipeline.process_item(listed("10", 50.0))
    for k in range(2, 5):  # the same fetch listed 4 items
        pipeline.process_item(listed("10", 50.0, f"http://shop.test/product/{k}/y"))
    pipeline.process_item(listed("10", 100.0))
    record = history.get(ITEM)
    assert stats.get_value("webcrawl/listing/observed") == 1 and sent == []
    assert (record.visits, record.changes, record.unchanged_seconds, record.last_fetched) == (1, 0, 100.0, 100.0)
    assert float(redis_client.hget(KEYS.page(ITEM), "billed") or 0) == pytest.approx(10.0)
    assert PageIndex(redis_client, KEYS).dirty() == 1


def test_no_unchanged_observation_while_a_change_is_still_to_be_seen(parts: tuple) -> None:
    pipeline, history, sent, stats = parts
    history.observe(ITEM, now=0.0, record_hash="r1")
    pipeline.process_item(listed("10", 10.0))
    pipeline.process_item(listed("12", 20.0))  # changed: a visit is due
    pipeline.process_item(listed("12", 30.0))  # same summary, but the item was not fetched since
    assert stats.get_value("webcrawl/listing/pending") == 1 and history.get(ITEM).visits == 0
    history.observe(ITEM, now=40.0, record_hash="r2")  # the visit
    pipeline.process_item(listed("12", 50.0))
    assert stats.get_value("webcrawl/listing/observed") == 1


def test_pages_pass_through(parts: tuple) -> None:
    pipeline = parts[0]
    page = PageItem("http://a.test/", "http://a.test/", "shop", None, 200, 0.0)
    assert pipeline.process_item(page) is page


@pytest.mark.parametrize(("value", "expected"), [
    (1767225600.0, 1767225600.0), ("2026-01-01", 1767225600.0), ("2026-01-01T00:00:10Z", 1767225610.0),
    ("2026-01-01T01:00:00+01:00", 1767225600.0), ("yesterday", None), (None, None), (True, None),
])
def test_parse_lastmod(value: object, expected: float | None) -> None:
    assert parse_lastmod(value) == expected


def test_sitemap_dates_are_trusted_only_after_they_agreed(redis_client: redis.Redis) -> None:
    store = SitemapStore(redis_client, KEYS, min_agreements=3)
    for k in range(2):
        store.judge("a.test", lastmod=100.0 + k, previous_fetch=50.0, changed=True)
    assert not store.trusted("a.test")
    store.judge("a.test", lastmod=10.0, previous_fetch=50.0, changed=False)
    assert store.trusted("a.test")
    store.judge("a.test", lastmod=100.0, previous_fetch=50.0, changed=False)  # a lie
    assert not store.trusted("a.test")
    ruled = SitemapStore(redis_client, KEYS, mode=lambda host: "always" if host == "b.test" else "never")
    assert ruled.trusted("b.test") and not ruled.trusted("a.test")
    store.note({"http://a.test/1": 5.0})
    assert store.dates(["http://a.test/1", "http://a.test/2"]) == [5.0, None]
    assert store.all_dates() == {"http://a.test/1": 5.0}
