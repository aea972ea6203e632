"""The cost-aware priority middleware (webcrawl.middlewares.priority) on what the spider yields
(new URLs: known pages come out of their due queues): purpose, page type, expected cost from what
the allocator publishes, value x first-copy gain / cost, the integer mapping inside bands; no
Redis read per request; and the crawl's queue popping the best request first."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import redis
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from tests._scheduler_harness import Harness, settings_for
from webcrawl import meta as M
from webcrawl.extensions.allocator import Allocator
from webcrawl.middlewares.priority import BANDS, TIER_VALUES, PriorityMiddleware, band_for, scrapy_priority
from webcrawl.revisit import GammaPrior
from webcrawl.runtime import CrawlRuntime
from webcrawl.sites import site_from_dict
from webcrawl.spiders.site import SiteSpider
from webcrawl.state.pagestore import observe_op

DAY = 86_400.0
PRIOR = GammaPrior.from_mean(1 / (7 * DAY), 0.5)
SITE = site_from_dict({
    "name": "prio",
    "seeds": ["http://shop.test/"],
    "sitemaps": ["http://shop.test/sitemap.xml"],
    "allowed_domains": ["shop.test", "sick.test"],
    "politeness": {"user_agent": "bot (ops@shop.test)"},
    "budget": {"billing": "bandwidth", "amount_per_cycle": 1e9, "cycle_seconds": DAY},
    "page_types": [
        {"name": "product", "url_pattern": "/product/", "tier": "high",
         "value_rules": [{"url_pattern": "/product/clearance-", "tier": "low"}]},
        {"name": "category", "url_pattern": "/category/", "tier": "normal"},
        {"name": "blog", "url_pattern": "/blog/", "tier": "low"},
    ],
})


def build(published: dict[str, float] | None = None, **kwargs: Any) -> PriorityMiddleware:
    return PriorityMiddleware(MemoryStatsCollector(get_crawler()), site=kwargs.pop("site", SITE),
                              prior=PRIOR, default_cost=50_000.0,
                              published=lambda: dict(published or {}), **kwargs)


def first_copy_gain(cycle_seconds: float = DAY) -> float:
    """A first copy of a page changing at the prior's rate, fresh until the next cycle."""
    return -math.expm1(-PRIOR.mean * cycle_seconds) / PRIOR.mean


def scored(mw: PriorityMiddleware, *requests: Request) -> dict[str, Request]:
    return {r.url.split(".test/")[1]: r for r in mw.process_spider_output(None, list(requests))}


def test_integer_priority_is_monotone_and_bands_never_overlap() -> None:
    scores = sorted([0.0, 1e-30, 1e-12, 0.003, 0.0031, 0.5, 1.0, 1.03, 7.0, 1e6, 1e40, math.inf])
    mapped = [scrapy_priority(s) for s in scores]
    assert mapped == sorted(mapped)
    assert scrapy_priority(1.03) > scrapy_priority(1.0)  # 3% apart is still ordered
    assert scrapy_priority(1e40, BANDS["discovery"]) < scrapy_priority(0.0, BANDS["newly_listed"])
    assert scrapy_priority(1e40, BANDS["newly_listed"]) < scrapy_priority(0.0, BANDS["known"])
    assert scrapy_priority(1e40, BANDS["known"]) < scrapy_priority(0.0, BANDS["sitemap"])
    assert scrapy_priority(1e40, BANDS["sitemap"]) < scrapy_priority(0.0, BANDS["robots"])
    assert band_for("revisit", known=False) == BANDS["discovery"]  # no history: no head start
    assert band_for("revisit", known=True) == BANDS["known"]
    assert band_for("robots") == BANDS["robots"] and band_for("sitemap") == BANDS["sitemap"]
    assert band_for("discovery", newly_listed=True) == BANDS["newly_listed"]


def test_new_urls_score_value_times_first_copy_gain_over_published_cost() -> None:
    mw = build({"cost:product": 2_000.0, "cost:blog": 200_000.0})  # category: not measured yet
    out = scored(mw, Request("http://shop.test/product/1"), Request("http://shop.test/category/a/"),
                 Request("http://shop.test/blog/1"), Request("http://shop.test/product/clearance-9"),
                 Request("http://shop.test/robots.txt"), Request("http://shop.test/sitemap.xml"))
    product = out["product/1"].meta
    assert (product[M.PURPOSE], product[M.PAGE_TYPE], product[M.EXPECTED_COST]) == (
        "discovery", "product", 2_000.0)
    assert product[M.PRIORITY] == pytest.approx(TIER_VALUES[3] * first_copy_gain() / 2_000.0)
    assert out["product/1"].priority == scrapy_priority(product[M.PRIORITY], BANDS["discovery"])
    assert out["category/a/"].meta[M.EXPECTED_COST] == 50_000.0  # the default until measured
    assert out["product/clearance-9"].meta[M.PRIORITY] == pytest.approx(product[M.PRIORITY] / 10)
    assert out["robots.txt"].meta[M.PURPOSE] == "robots"
    assert out["sitemap.xml"].meta[M.PURPOSE] == "sitemap"
    order = sorted(out, key=lambda k: -out[k].priority)
    # A clearance product is worth a tenth, a category 3/10 at 25x the cost, a blog post a tenth
    # at 100x.
    assert order == ["robots.txt", "sitemap.xml", "product/1", "product/clearance-9", "category/a/",
                     "blog/1"]
    assert mw.stats.get_value("webcrawl/priority/requests") == 6
    assert mw.stats.get_value("webcrawl/priority/requests/discovery") == 4


def test_what_the_spider_set_is_kept() -> None:
    mw = build()
    out = scored(mw, Request("http://shop.test/p", meta={M.PURPOSE: "revisit", M.PAGE_TYPE: "product",
                                                         M.KNOWN: True}),
                 Request("http://shop.test/other", meta={M.PURPOSE: "revisit"}))
    known, other = out["p"], out["other"]
    assert (known.meta[M.PURPOSE], known.meta[M.PAGE_TYPE]) == ("revisit", "product")
    assert known.priority > scrapy_priority(math.inf, BANDS["discovery"]), "a known page's band"
    assert other.meta[M.PAGE_TYPE] is None and other.meta[M.EXPECTED_COST] == 50_000.0
    assert other.priority < BANDS["known"] - 2000, "no history, no head start"


def test_an_unhealthy_host_costs_more() -> None:
    mw = build({"cost:product": 2_000.0}, health=lambda host: 5.0 if host == "sick.test" else 1.0)
    out = {r.url.split("/")[2]: r.meta for r in mw.process_spider_output(
        None, [Request("http://shop.test/product/1"), Request("http://sick.test/product/1")])}
    assert out["sick.test"][M.EXPECTED_COST] == pytest.approx(5 * out["shop.test"][M.EXPECTED_COST])
    assert out["sick.test"][M.PRIORITY] == pytest.approx(out["shop.test"][M.PRIORITY] / 5)


def test_under_the_events_objective_a_first_copy_is_one_event() -> None:
    events = site_from_dict({**_document(), "objective": "events"})
    mw = build({"cost:product": 4.0}, site=events)
    [request] = mw.process_spider_output(None, [Request("http://shop.test/product/1")])
    assert request.meta[M.PRIORITY] == pytest.approx(TIER_VALUES[3] / 4.0)


def test_published_costs_are_read_at_most_every_few_seconds() -> None:
    reads: list[int] = []

    def published() -> dict[str, float]:
        reads.append(1)
        return {"cost:product": 2_000.0}

    mw = PriorityMiddleware(MemoryStatsCollector(get_crawler()), site=SITE, prior=PRIOR,
                            published=published)
    list(mw.process_spider_output(None, [Request(f"http://shop.test/product/{i}") for i in range(500)]))
    assert len(reads) == 1


def _document() -> dict[str, Any]:
    return {"name": "prio", "seeds": ["http://shop.test/"], "allowed_domains": ["shop.test"],
            "politeness": {"user_agent": "bot (ops@shop.test)"},
            "budget": {"billing": "credits", "amount_per_cycle": 100, "cycle_seconds": 3600},
            "page_types": [{"name": "product", "url_pattern": "/product/", "tier": "high"}]}


class PrioSpider(SiteSpider):
    name = "prio"
    site = site_from_dict(_document())


def test_in_a_crawl_costs_come_from_the_allocator_with_no_redis_read_per_request(
        redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    crawler = get_crawler(PrioSpider, settings_for(redis_url, "prio", tmp_path))
    crawler.spider = crawler._create_spider()
    runtime = CrawlRuntime.of(crawler)
    try:
        mw = PriorityMiddleware.from_crawler(crawler)
        [before] = mw.process_spider_output(None, [Request("http://shop.test/product/new")])
        assert before.meta[M.EXPECTED_COST] == 1.0, "credits: one a fetch until measured"
        # Fetches of products cost 3 credits each; the allocator publishes their mean.
        product = runtime.types.id("product")
        for i in range(3):
            runtime.batch.land("shop.test", observe_op(
                f"http://shop.test/product/{i}", full=True, time=1e9, record_hash="ab" * 8,
                type_id=product, billed=3.0))
        runtime.flush()
        Allocator(runtime, crawler).allocate(force=True)
        fresh = PriorityMiddleware.from_crawler(crawler)
        calls = redis_client.info("commandstats")
        out = list(fresh.process_spider_output(None, [
            Request(f"http://shop.test/product/n{i}") for i in range(300)]))
        after = redis_client.info("commandstats")
        total = sum(v["calls"] for v in after.values()) - sum(v["calls"] for v in calls.values())
        assert {r.meta[M.EXPECTED_COST] for r in out} == {3.0}
        assert total <= 3, f"{total} Redis commands for 300 requests"  # costs, one host's health
    finally:
        runtime.close()


def test_it_can_be_turned_off(redis_url: str, tmp_path: Path) -> None:
    crawler = get_crawler(PrioSpider, settings_for(redis_url, "prio", tmp_path,
                                                   WEBCRAWL_PRIORITY_ENABLED=False))
    with pytest.raises(NotConfigured):
        PriorityMiddleware.from_crawler(crawler)


def test_the_crawls_queue_pops_the_best_request_first(redis_url: str, tmp_path: Path) -> None:
    mw = build({"cost:product": 2_000.0, "cost:blog": 200_000.0})
    urls = ["blog/1", "category/a/", "product/1", "robots.txt", "product/clearance-1",
            "sitemap.xml"]
    requests = list(mw.process_spider_output(None, [Request(f"http://shop.test/{u}") for u in urls]))
    h = Harness(settings_for(redis_url, "prio-queue", tmp_path))
    try:
        h.enqueue(*requests)
        popped = [r.url.split(".test/")[1] for r in h.drain()]
    finally:
        h.close()
    assert popped == ["robots.txt", "sitemap.xml", "product/1", "product/clearance-1", "category/a/",
                      "blog/1"]
