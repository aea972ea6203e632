"""Value overrides per page type: ``value_rules`` (URL) and ``value_field`` (a record field) in the
site file, validated; the tier they give a page stored in its record (``tier``) by the
record-hash pipeline through the land script (real Redis), read by the allocation's value of
each page; URL rules also score new links in the priority middleware."""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scrapy import Request

from tests.runtimes import run, runtime_for
from webcrawl.extensions._alloc_plan import TIER_VALUES, AllocInput, plan
from webcrawl.items import PageItem
from webcrawl.middlewares.priority import PriorityMiddleware
from webcrawl.pipelines.recordhash import RecordHashPipeline
from webcrawl.revisit import GammaPrior
from webcrawl.runtime import CrawlRuntime
from webcrawl.sites import SiteConfigError, load_site_file, site_from_dict
from webcrawl.state.records import unpack_many

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


# -- where value is used: the page record, the allocation, new links (real Redis) -------------------


@pytest.fixture
def runtime(redis_url: str) -> Iterator[CrawlRuntime]:
    runtime = runtime_for(redis_url)
    yield runtime
    runtime.close()


def page(url: str, fetch_time: float, name: str, badge: str, page_type: str = "product") -> PageItem:
    return PageItem(url=url, canonical_url=url, site="shop", page_type=page_type, status=200,
                    fetch_time=fetch_time, body=b"x" * 100, record={"name": name, "badge": badge})


def fetch_three_equal_pages(runtime: CrawlRuntime) -> RecordHashPipeline:
    """Three product pages with identical histories (three fetches, one change, the same cost);
    one of them on a featured URL, one whose record says it is a best seller."""
    pipe = RecordHashPipeline(runtime, runtime.stats, site=SITE)
    for t, version in [(0.0, "a"), (DAY, "b"), (2 * DAY, "b")]:
        for url, badge in [(PLAIN, "New"), (FEATURED, "New"), (BEST, "Best seller")]:
            item = page(url, t, version, badge)
            item.fetch["billed"] = 1.0
            run(pipe.process_item(item))
    return pipe


def tiers(runtime: CrawlRuntime, *urls: str) -> dict[str, int]:
    return {u: runtime.pages.get(u, "shop.test").tier for u in urls}


def test_the_pipeline_stores_the_override_tier_in_the_page_record(runtime: CrawlRuntime) -> None:
    pipe = fetch_three_equal_pages(runtime)
    assert tiers(runtime, PLAIN, FEATURED, BEST) == {PLAIN: 0, FEATURED: 3, BEST: 4}  # 0: none
    blog = "http://shop.test/blog/1"
    run(pipe.process_item(page(blog, 0.0, "x", "Best seller", page_type="blog")))
    assert tiers(runtime, blog) == {blog: 0}  # no overrides for its type: nothing given
    # A best seller no longer one: its stored tier goes back to none.
    run(pipe.process_item(page(BEST, 3 * DAY, "b", "New")))
    assert tiers(runtime, BEST) == {BEST: 0}


def allocation_input(runtime: CrawlRuntime, urls: list[str], budget_rate: float) -> AllocInput:
    """The allocation's input for ``urls`` as the allocator reads it: the pages' records."""
    rows = unpack_many(runtime.pages.raw_records(0, urls))
    n = len(urls)
    return AllocInput(
        rows=rows, host=np.zeros(n, dtype=np.intp), delay=np.array([1.0]), hold_until=np.zeros(1),
        health=np.ones(1), sitemap_trusted=np.zeros(1, dtype=bool), seed=np.zeros(n, dtype=bool),
        now=3 * DAY, budget_rate=budget_rate, period=60.0, cycle_seconds=DAY, sitemap_seconds=DAY,
        shares={"discovery": 0.0, "reestimation": 0.0, "verification": 0.0, "detectors": 0.0},
        type_tier={runtime.types.id(t.name): t.tier for t in SITE.page_types},
        listing_types=frozenset(), prior=GammaPrior.from_mean(1 / (7 * DAY)), default_cost=1.0,
        backlog=0.0, seed_rng=0)


def test_url_rule_and_best_seller_pages_outrank_equal_pages_in_the_allocation(runtime: CrawlRuntime) -> None:
    fetch_three_equal_pages(runtime)
    urls = [PLAIN, FEATURED, BEST]
    result = plan(allocation_input(runtime, urls, budget_rate=2.0 / DAY))
    assert dict(zip(urls, result.value.tolist())) == {
        PLAIN: TIER_VALUES[2], FEATURED: TIER_VALUES[3], BEST: TIER_VALUES[4]}  # none: the type's
    assert np.allclose(result.rate, result.rate[0]) and np.allclose(result.cost, 1.0)  # all equal
    interval = dict(zip(urls, result.interval.tolist()))
    assert interval[BEST] < interval[FEATURED] < interval[PLAIN], interval
    # The override goes when the page loses it: the allocation follows the record.
    pipe = RecordHashPipeline(runtime, runtime.stats, site=SITE)
    run(pipe.process_item(page(BEST, 3 * DAY, "b", "New")))
    again = plan(allocation_input(runtime, urls, budget_rate=2.0 / DAY))
    assert again.value[2] == TIER_VALUES[2]


def test_url_rules_outrank_equal_new_links_in_request_scoring() -> None:
    """New links: the URL rule applies before any fetch; a record field cannot yet."""
    from scrapy.statscollectors import MemoryStatsCollector
    from scrapy.utils.test import get_crawler

    mw = PriorityMiddleware(MemoryStatsCollector(get_crawler()), site=SITE,
                            prior=GammaPrior.from_mean(1 / (7 * DAY)))
    links = [mw.get_processed_request(Request(u), None) for u in
             ("http://shop.test/product/plain-9", "http://shop.test/product/featured-9",
              "http://shop.test/blog/9")]
    assert all(link is not None for link in links)
    plain, featured, blog = (link.meta["webcrawl_priority"] for link in links)  # type: ignore[union-attr]
    assert featured == pytest.approx(plain * TIER_VALUES[3] / TIER_VALUES[2])
    assert blog == pytest.approx(plain * TIER_VALUES[1] / TIER_VALUES[2])
    assert links[2].priority < links[0].priority < links[1].priority  # type: ignore[union-attr]
