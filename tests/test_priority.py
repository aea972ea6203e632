"""The cost-aware priority middleware: value x gain / cost ordering, discovery below known pages,
the integer mapping, and frontiers in Redis popping the best request first."""

from __future__ import annotations

import json
import math

import pytest
import redis
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from webcrawl.clock import ManualClock
from webcrawl.middlewares.priority import BANDS, PriorityMiddleware, band_for, scrapy_priority
from webcrawl.revisit import BillingModel, GammaPrior, Objective, estimate_rates, expected_cost, gain
from webcrawl.revisit.cost import CostProfile
from webcrawl.sites import site_from_dict
from webcrawl.state.costs import CostStore
from webcrawl.state.frontier import Entry, Frontier
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.seen import BloomParams

KEYS = CrawlKeys("prio")
DAY = 86_400.0
SITE = site_from_dict({
    "name": "shop",
    "seeds": ["http://shop.test/"],
    "sitemaps": ["http://shop.test/sitemap.xml"],
    "allowed_domains": ["shop.test"],
    "politeness": {"user_agent": "bot (ops@shop.test)"},
    "budget": {"billing": "bandwidth", "amount_per_cycle": 1e9, "cycle_seconds": DAY},
    "page_types": [
        {"name": "product", "url_pattern": "/product/", "tier": "high"},
        {"name": "blog", "url_pattern": "/blog/", "tier": "low"},
    ],
})


def build(client: redis.Redis, clock: ManualClock, billing: BillingModel = BillingModel.BANDWIDTH
          ) -> PriorityMiddleware:
    return PriorityMiddleware(CostStore(client, KEYS, cache_seconds=0), HistoryStore(client, KEYS),
                              MemoryStatsCollector(get_crawler()), billing=billing, site=SITE,
                              prior=GammaPrior.from_mean(1 / (7 * DAY)), clock=clock)


def visit(history: HistoryStore, url: str, times: list[float], changes: list[bool]) -> None:
    """A page's history: fetched at ``times``, the record changed before the visits in ``changes``."""
    version = 0
    for t, changed in zip(times, [True, *changes]):
        version += changed
        history.observe(url, now=t, record_hash=f"v{version}", page_type="product" if "product" in url else "blog")


def test_integer_priority_is_monotone_and_bands_never_overlap() -> None:
    scores = sorted([0.0, 1e-30, 1e-12, 0.003, 0.0031, 0.5, 1.0, 1.03, 7.0, 1e6, 1e40, math.inf])
    mapped = [scrapy_priority(s) for s in scores]
    assert mapped == sorted(mapped)
    assert scrapy_priority(1.03) > scrapy_priority(1.0)  # 3% apart is still ordered
    assert scrapy_priority(1e40, BANDS["discovery"]) < scrapy_priority(0.0, BANDS["known"])
    assert scrapy_priority(1e40, BANDS["known"]) < scrapy_priority(0.0, BANDS["sitemap"])
    assert scrapy_priority(1e40, BANDS["sitemap"]) < scrapy_priority(0.0, BANDS["robots"])
    assert band_for("revisit", known=False) == BANDS["discovery"]  # no history: no head start
    assert band_for("robots", known=False) == BANDS["robots"]


def test_known_pages_rank_by_value_times_gain_over_cost(redis_client: redis.Redis) -> None:
    clock = ManualClock(start=1_800_000_000.0)
    now = clock.time()
    history = HistoryStore(redis_client, KEYS)
    costs = CostStore(redis_client, KEYS, cache_seconds=0)
    # Products: ~2 KB pages; blog posts: ~200 KB. Measured costs, not defaults.
    for _ in range(5):
        costs.record("product", "full", 2_000, 2_000)
        costs.record("blog", "full", 200_000, 200_000)
    pages = {
        "http://shop.test/product/daily": ([now - 10 * DAY + i * DAY for i in range(10)], [True] * 9),
        "http://shop.test/product/static": ([now - 10 * DAY + i * DAY for i in range(10)], [False] * 9),
        "http://shop.test/blog/daily": ([now - 10 * DAY + i * DAY for i in range(10)], [True] * 9),
    }
    for url, (times, changes) in pages.items():
        visit(history, url, times, changes)
    mw = build(redis_client, clock)
    requests = [Request(url, meta={"webcrawl_purpose": "revisit"}) for url in pages]
    requests += [Request("http://shop.test/product/new-one"), Request("http://shop.test/blog/new-one"),
                 Request("http://shop.test/robots.txt"), Request("http://shop.test/sitemap.xml")]
    response = HtmlResponse("http://shop.test/", body=b"<html></html>")
    out = {r.url.split("shop.test/")[1]: r for r in mw.process_spider_output(response, requests)}
    # The score is the model's: value x marginal gain / expected cost.
    daily = out["product/daily"].meta
    record = history.get("http://shop.test/product/daily")
    assert record is not None
    rate = estimate_rates(record.page_history(), mw.prior.shape, mw.prior.rate)[0]
    g = gain(Objective.FRESHNESS, rate, now - record.last_fetched)
    cost = expected_cost(BillingModel.BANDWIDTH, CostProfile(full_bytes=2_000, not_modified_bytes=200))
    assert daily["webcrawl_expected_cost"] == pytest.approx(float(cost))
    assert daily["webcrawl_priority"] == pytest.approx(10.0 * float(g) / float(cost))
    assert daily["webcrawl_purpose"] == "revisit" and daily["webcrawl_page_type"] == "product"
    order = sorted(out, key=lambda k: -out[k].priority)
    # A blog post that changes daily is worth a tenth and costs 100x: even a product that has not
    # changed in nine visits is a better buy.
    assert order == ["robots.txt", "sitemap.xml", "product/daily", "product/static", "blog/daily",
                     "product/new-one", "blog/new-one"]
    assert out["product/static"].meta["webcrawl_priority"] < daily["webcrawl_priority"] / 5
    assert out["product/new-one"].meta["webcrawl_purpose"] == "discovery"
    assert out["robots.txt"].meta["webcrawl_purpose"] == "robots"
    assert mw.stats.get_value("webcrawl/priority/known") == 3
    assert mw.stats.get_value("webcrawl/priority/requests/discovery") == 2


def test_unhealthy_hosts_cost_more_and_credits_ignore_size(redis_client: redis.Redis) -> None:
    clock = ManualClock(start=1_800_000_000.0)
    mw = build(redis_client, clock)
    before = mw.score(Request("http://shop.test/product/x"), "product", None)
    store = CostStore(redis_client, KEYS, cache_seconds=0)
    store.observe_health("shop.test", False, clock.time())
    after = mw.score(Request("http://shop.test/product/x"), "product", None)
    assert after[1] == pytest.approx(5 * before[1]) and after[0] == pytest.approx(before[0] / 5)
    clock.advance(10 * 3600)  # healthy again: the multiplier has decayed
    assert mw.score(Request("http://shop.test/product/x"), "product", None)[1] == pytest.approx(before[1])
    credits = build(redis_client, clock, BillingModel.CREDITS)
    assert credits.score(Request("http://shop.test/blog/x"), "blog", None)[1] == pytest.approx(1.0)


def test_planned_requests_are_mapped_not_rescored(redis_client: redis.Redis) -> None:
    mw = build(redis_client, ManualClock())
    planned = Request("http://shop.test/product/p", meta={
        "webcrawl_purpose": "re-estimation", "webcrawl_priority": 0.25, "webcrawl_expected_cost": 9.0})
    [out] = list(mw.process_spider_output(None, [planned]))
    assert out.priority == scrapy_priority(0.25, BANDS["known"])
    assert out.meta["webcrawl_expected_cost"] == 9.0
    assert mw.stats.get_value("webcrawl/priority/planned") == 1


def test_the_frontier_pops_the_best_first(redis_client: redis.Redis) -> None:
    """The scheduler pushes each request with score -priority; the domain's frontier pops in order."""
    clock = ManualClock(start=1_800_000_000.0)
    history = HistoryStore(redis_client, KEYS)
    now = clock.time()
    for i, period in enumerate([0.5, 1, 2, 4, 8, 16, 32, 64]):  # days between changes
        times = [now - 20 * DAY + k * DAY for k in range(20)]
        visit(history, f"http://shop.test/product/{i}", times, [k % max(int(period), 1) == 0 for k in range(19)])
    mw = build(redis_client, clock)
    requests = [Request(f"http://shop.test/product/{i}", meta={"webcrawl_purpose": "revisit"}) for i in range(8)]
    requests += [Request(f"http://shop.test/product/new{i}") for i in range(3)]
    out = list(mw.process_spider_output(None, requests))
    frontier = Frontier(redis_client, KEYS, BloomParams(1000, 0.01), cap=100, default_delay=0.0,
                        lease_seconds=60)
    frontier.flush([Entry("shop.test", -r.priority, json.dumps({"url": r.url})) for r in out], [], now)
    popped = [json.loads(frontier.pop(now + i).items[0][1])["url"] for i in range(len(out))]
    by_score = sorted(out, key=lambda r: (-band_for(r.meta["webcrawl_purpose"], "new" not in r.url),
                                          -r.meta["webcrawl_priority"]))
    assert popped == [r.url for r in by_score]
    assert all("new" in u for u in popped[-3:]), "a new URL outranked a known page"
