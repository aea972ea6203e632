"""Value overrides per page type (issue 5, item 1): ``value_rules`` (URL) and ``value_field``
(a record field) in the site file, validated, and used by the real priority middleware and the
cycle planner's scoring, with the record field's tier stored at record-hash time (real Redis)."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from scrapy import Request
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from webcrawl.change import FetchNotes, TrustPolicy
from webcrawl.clock import ManualClock
from webcrawl.extensions._planner_score import TIER_VALUES, Scoring, score_and_plan, values
from webcrawl.items import PageItem
from webcrawl.middlewares.conditional import ChangeContext
from webcrawl.middlewares.priority import PriorityMiddleware
from webcrawl.parse import Canonicalizer
from webcrawl.pipelines.recordhash import RecordHashPipeline
from webcrawl.revisit import GammaPrior, Reserves
from webcrawl.revisit.cost import BillingModel
from webcrawl.sites import SiteConfigError, load_site_file, site_from_dict
from webcrawl.state.costs import CostStore
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.pages import PageIndex
from webcrawl.state.trust import TrustStore

KEYS = CrawlKeys("value")
DAY = 86_400.0
TIER = "a tier 1 to 4 or one of 'low', 'normal', 'high', 'critical'"
DOC: dict[str, Any] = {
    "name": "shop",
    "seeds": ["http://shop.test/"],
    "allowed_domains": ["shop.test"],
    "politeness": {"user_agent": "bot (ops@shop.test)"},
    "budget": {"billing": "requests", "amount_per_cycle": 100, "cycle_seconds": DAY},
    "page_types": [
        {"name": "blog", "url_pattern": "/blog/", "tier": "low"},
        {"name": "product", "url_pattern": "/product/", "tier": "normal",
         "fields": {"name": "h1", "badge": "span.badge", "tags": {"css": "li", "many": True}},
         "value_rules": [{"url_pattern": "/product/featured-", "tier": "high"},
                         {"url_pattern": "/product/featured-old", "tier": 1}],
         "value_field": {"field": "badge", "tiers": {"Best seller": "critical", "Clearance": 1}}},
    ],
}
SITE = site_from_dict(DOC)
PLAIN, FEATURED, BEST = ("http://shop.test/product/plain-1", "http://shop.test/product/featured-1",
                         "http://shop.test/product/plain-2")


def with_product(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    product = doc["page_types"][1]
    for key, value in changes.items():
        if value is None:
            product.pop(key, None)
        else:
            product[key] = value
    return doc


# -- the file format -------------------------------------------------------------------------------


def test_the_overrides_are_read_and_applied_field_first_then_first_url_rule_then_tier() -> None:
    product = SITE.page_types[1]
    assert [r.tier for r in product.value_rules] == [3, 1]
    assert product.value_field is not None and product.value_field.field == "badge"
    assert dict(product.value_field.tiers) == {"Best seller": 4, "Clearance": 1}
    assert product.tier_for(PLAIN) == 2 and product.override_tier(PLAIN) is None
    assert product.tier_for(FEATURED) == 3
    assert product.tier_for("http://shop.test/product/featured-old") == 3  # first rule wins
    assert product.tier_for(PLAIN, {"badge": " Best seller "}) == 4
    assert product.tier_for(FEATURED, {"badge": "Clearance"}) == 1  # the field beats the URL
    assert product.tier_for(FEATURED, {"badge": "New"}) == 3  # unlisted value: the URL rule
    assert product.tier_for(PLAIN, {"badge": None}) == 2
    blog = SITE.page_types[0]
    assert not blog.has_overrides and blog.tier_for("http://shop.test/blog/x", {"badge": "Best seller"}) == 1


def test_a_numeric_or_many_field_is_looked_up_as_text() -> None:
    site = site_from_dict(with_product(value_field={"field": "tags", "tiers": {"1": 4, "true": 3}}))
    product = site.page_types[1]
    assert product.tier_for(PLAIN, {"tags": ["1", "2"]}) == 4
    assert product.tier_for(PLAIN, {"tags": 1}) == 4
    assert product.tier_for(PLAIN, {"tags": True}) == 3
    assert product.tier_for(PLAIN, {"tags": []}) == 2


@pytest.mark.parametrize(("changes", "message"), [
    ({"value_rules": [{"url_pattern": "/x", "tier": 3, "weight": 2}]},
     "page_types[1].value_rules[0].weight: unknown key, expected one of: tier, url_pattern"),
    ({"value_rules": [{"url_pattern": "(", "tier": 3}]},
     "page_types[1].value_rules[0].url_pattern: got '(', expected a Python regular expression "
     "that compiles (missing ), unterminated subpattern at position 0)"),
    ({"value_rules": [{"url_pattern": "/x"}]},
     f"page_types[1].value_rules[0].tier: missing, expected {TIER}"),
    ({"value_rules": [{"url_pattern": "/x", "tier": 5}]},
     f"page_types[1].value_rules[0].tier: got 5, expected {TIER}"),
    ({"value_rules": [{"url_pattern": "/x", "tier": True}]},
     f"page_types[1].value_rules[0].tier: got True, expected {TIER}"),
    ({"value_rules": {"url_pattern": "/x", "tier": 3}},
     "page_types[1].value_rules: got {'url_pattern': '/x', 'tier': 3}, expected an array of "
     "tables ([[page_types[1].value_rules]])"),
    ({"value_field": {"field": "price", "tiers": {"a": 1}}},
     "page_types[1].value_field.field: got 'price', expected one of this page type's fields "
     "['badge', 'name', 'tags']"),
    ({"value_field": {"tiers": {"a": 1}}},
     "page_types[1].value_field.field: missing, expected the name of one of this page type's fields"),
    ({"value_field": {"field": "badge", "tiers": {}}},
     "page_types[1].value_field.tiers: got {}, expected a non-empty table of record values and "
     "their tiers"),
    ({"value_field": {"field": "badge", "tiers": {"Best seller": "top"}}},
     f"page_types[1].value_field.tiers.\"Best seller\": got 'top', expected {TIER}"),
    ({"value_field": {"field": "badge", "tiers": {"a": 1}, "default": 2}},
     "page_types[1].value_field.default: unknown key, expected one of: field, tiers"),
    ({"value_field": "badge"}, "page_types[1].value_field: got 'badge', expected a table"),
])
def test_bad_overrides_name_the_file_field_value_and_expectation(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(SiteConfigError) as raised:
        site_from_dict(with_product(**changes), source="sites/shop.toml")
    assert str(raised.value) == f"sites/shop.toml: {message}"


def test_the_toml_syntax_of_the_docs_loads(tmp_path: Path) -> None:
    path = tmp_path / "shop.toml"
    path.write_text(textwrap.dedent("""\
        name = "shop"
        seeds = ["http://shop.test/"]
        allowed_domains = ["shop.test"]
        politeness = { user_agent = "bot (ops@shop.test)" }
        budget = { billing = "requests", amount_per_cycle = 100, cycle_seconds = 86400 }

        [[page_types]]
        name = "product"
        url_pattern = "/product/"
        tier = "normal"
        fields = { name = "h1", badge = "span.badge", rank = "span.rank" }
        value_field = { field = "badge", tiers = { "Best seller" = "critical", "Clearance" = "low" } }

        [[page_types.value_rules]]
        url_pattern = "/product/featured-"
        tier = "high"

        [[page_types.value_rules]]
        url_pattern = "["
        tier = 2
        """))
    with pytest.raises(SiteConfigError) as raised:
        load_site_file(path)
    assert raised.value.source.endswith("shop.toml")
    assert raised.value.field == "page_types[0].value_rules[1].url_pattern" and raised.value.value == "["
    path.write_text(path.read_text().replace('url_pattern = "["', 'url_pattern = "/product/x-"'))
    product = load_site_file(path).page_types[0]
    assert [r.tier for r in product.value_rules] == [3, 2]
    assert product.value_field is not None and dict(product.value_field.tiers) == {"Best seller": 4, "Clearance": 1}


# -- where value is computed: request scoring and the planner (real Redis) ----------------------------


def pipeline(client: redis.Redis) -> RecordHashPipeline:
    context = ChangeContext(HistoryStore(client, KEYS),
                            TrustStore(client, KEYS, TrustPolicy(earn_after=1), ManualClock()),
                            FetchNotes(), Canonicalizer())
    return RecordHashPipeline(context, MemoryStatsCollector(get_crawler()), site=SITE)


def fetch_three_equal_pages(client: redis.Redis) -> RecordHashPipeline:
    """Three product pages with identical histories (three fetches, one change); one of them
    on a featured URL, one whose record says it is a best seller."""
    pipe = pipeline(client)
    for t, version in [(0.0, "a"), (DAY, "b"), (2 * DAY, "b")]:
        for url, badge in [(PLAIN, "New"), (FEATURED, "New"), (BEST, "Best seller")]:
            pipe.process_item(PageItem(url=url, canonical_url=url, site="shop", page_type="product",
                                       status=200, fetch_time=t, body=b"x" * 100,
                                       record={"name": version, "badge": badge}))
    return pipe


def test_the_pipeline_stores_the_override_tier_in_the_page_history(redis_client: redis.Redis) -> None:
    pipe = fetch_three_equal_pages(redis_client)
    stored = {u: redis_client.hget(KEYS.page(u), "value_tier") for u in (PLAIN, FEATURED, BEST)}
    assert stored == {PLAIN: b"0", FEATURED: b"3", BEST: b"4"}
    blog = "http://shop.test/blog/1"
    pipe.process_item(PageItem(url=blog, canonical_url=blog, site="shop", page_type="blog",
                               status=200, fetch_time=0.0, record={"badge": "Best seller"}))
    assert redis_client.hget(KEYS.page(blog), "value_tier") is None  # no overrides: nothing stored
    # A best seller no longer one: its stored tier goes back to none.
    pipe.process_item(PageItem(url=BEST, canonical_url=BEST, site="shop", page_type="product",
                               status=200, fetch_time=3 * DAY, record={"name": "b", "badge": "New"}))
    assert redis_client.hget(KEYS.page(BEST), "value_tier") == b"0"


def test_url_rule_and_best_seller_pages_outrank_equal_pages_in_request_scoring(redis_client: redis.Redis) -> None:
    fetch_three_equal_pages(redis_client)
    clock = ManualClock(3 * DAY)
    mw = PriorityMiddleware(CostStore(redis_client, KEYS, cache_seconds=0), HistoryStore(redis_client, KEYS),
                            MemoryStatsCollector(get_crawler()), billing=BillingModel.REQUESTS, site=SITE,
                            prior=GammaPrior.from_mean(1 / (7 * DAY)), clock=clock)
    scored = {}
    for url in (PLAIN, FEATURED, BEST):
        request = mw.get_processed_request(Request(url, meta={"webcrawl_purpose": "revisit"}), None)
        assert request is not None
        scored[url] = (request.meta["webcrawl_priority"], request.priority)
    assert mw.stats.get_value("webcrawl/priority/known") == 3
    assert scored[FEATURED][0] == pytest.approx(scored[PLAIN][0] * TIER_VALUES[3] / TIER_VALUES[2])
    assert scored[BEST][0] == pytest.approx(scored[PLAIN][0] * TIER_VALUES[4] / TIER_VALUES[2])
    assert scored[PLAIN][1] < scored[FEATURED][1] < scored[BEST][1]
    # New links: the URL rule applies before any fetch; a record field cannot yet.
    links = [mw.get_processed_request(Request(u), None) for u in
             ("http://shop.test/product/plain-9", "http://shop.test/product/featured-9")]
    assert links[0] is not None and links[1] is not None
    assert links[1].meta["webcrawl_priority"] == pytest.approx(
        links[0].meta["webcrawl_priority"] * TIER_VALUES[3] / TIER_VALUES[2])
    assert links[0].priority < links[1].priority


def test_url_rule_and_best_seller_pages_outrank_equal_pages_in_the_planner(redis_client: redis.Redis) -> None:
    fetch_three_equal_pages(redis_client)
    index = PageIndex(redis_client, KEYS)
    index.mark([PLAIN, FEATURED, BEST], now=0.0)
    assert index.sync(now=1.0) == 3
    columns = index.load()
    urls = index.urls(columns.ids)
    assert columns.tiers is not None
    assert dict(zip(urls, columns.tiers.tolist())) == {PLAIN: 0, FEATURED: 3, BEST: 4}
    scoring = Scoring(budget=2.0, cycle_seconds=DAY, reserves=Reserves(0.0, 0.0, 0.0),
                      tiers={t.name: t.tier for t in SITE.page_types})
    assert dict(zip(urls, values(columns, scoring).tolist())) == {
        PLAIN: TIER_VALUES[2], FEATURED: TIER_VALUES[3], BEST: TIER_VALUES[4]}
    plan, pages = score_and_plan(columns, scoring, now=3 * DAY, rng=np.random.default_rng(0))
    score = dict(zip(urls, pages.scores(scoring.objective).tolist()))
    assert score[PLAIN] < score[FEATURED] < score[BEST]
    assert [urls[i] for i in plan.revisit] == [BEST, FEATURED]  # a budget for two: not the plain one
    # The override goes when the page loses it: the index follows the history.
    pipeline(redis_client).process_item(PageItem(
        url=BEST, canonical_url=BEST, site="shop", page_type="product", status=200,
        fetch_time=3 * DAY, record={"name": "b", "badge": "New"}))
    index.mark([BEST], now=3 * DAY)
    index.sync(now=3 * DAY + 1)
    columns = index.load()
    assert dict(zip(index.urls(columns.ids), columns.tiers.tolist()))[BEST] == 0
    assert not redis_client.hexists(KEYS.pages_prefix + "tiers", str(int(columns.ids[urls.index(BEST)])))
