"""ConditionalRequestMiddleware end to end (demo shop, real Redis, Scrapy in subprocesses): the
304 path, verification of 304s, trust earned by an honest host and lost by one that ignores its
validators and by one that answers 304 while the record changed; plus the request-side rules."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy.http import Request
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from tests.test_pipelines_recordhash import (  # noqa: F401
    HONEST,
    IGNORING,
    LYING,
    Crawl,
    crawl,
    history,
    module_redis,
    module_shop,
)
from webcrawl.change import FetchNotes, TrustPolicy, ValidatorTrust
from webcrawl.clock import ManualClock
from webcrawl.demo.catalog import DAY
from webcrawl.middlewares.conditional import ChangeContext, ConditionalRequestMiddleware
from webcrawl.parse import Canonicalizer
from webcrawl.sites.schema import Trust, TrustRule
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.trust import TrustStore

C = "webcrawl/conditional/"


@dataclass
class Scenario:
    still: list[str]  # honest host, records never change
    moving: list[str]  # honest host, records changed before the second crawl
    ignoring: list[str]  # host that answers 200 to any conditional request
    lying: list[str]  # host that answers 304 to any conditional request; records changed
    redirected: tuple[str, str]  # an outdated URL with another page's validators, its target
    changed: set[str]
    crawls: list[Crawl]
    statuses: list[tuple[str, int]]  # product requests of the third crawl as the server saw them
    pages: dict[str, Any]
    trust: dict[str, ValidatorTrust]
    wire: dict[str, int]  # bytes the server wrote for each page over the three crawls


def host_of(url: str) -> str:
    return url.split("/")[2].split(":")[0]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, module_shop, module_redis) -> Scenario:
    """Three crawls of pages on three catalog hosts; the shop's time moves three days between
    the first and the second. Thresholds: trust after 2 confirmations, lost after 3 ignored
    conditional requests or 1 lie; trusted hosts' 304s are not verified (share 0)."""
    shop, (redis_url, client) = module_shop, module_redis
    tmp = tmp_path_factory.mktemp("conditional")
    still = [shop.product(i) for i in shop.on_host(HONEST, 3, changing=False)]
    moving = [shop.product(i) for i in shop.on_host(HONEST, 2, changing=True)]
    ignoring = [shop.product(i) for i in shop.on_host(IGNORING, 3, changing=False)]
    lying = [shop.product(i) for i in shop.on_host(LYING, 3, changing=True)]
    target_index = shop.on_host(HONEST, 3, changing=False)[-1] + 3
    target = shop.product(target_index)
    old = target + "-2025"  # an outdated slug: the shop answers 301 to the right URL
    etag = f'"p{target_index}-v{shop.site.product_version(target_index)}"'  # the target's own
    HistoryStore(client, CrawlKeys("demo")).observe(old, now=1.0, record_hash="x", validators=(etag, None))
    urls = still + moving + ignoring + lying
    policy = {"WEBCRAWL_CONDITIONAL_EARN_AFTER": 2, "WEBCRAWL_CONDITIONAL_IGNORE_LIMIT": 3,
              "WEBCRAWL_CONDITIONAL_LIE_LIMIT": 1, "WEBCRAWL_CONDITIONAL_VERIFY_SHARE": 0.0}
    crawls = [crawl(tmp, shop, redis_url, [*urls, old], "1", **policy)]
    before = shop.site.now()
    shop.jump(3 * DAY)
    changed = {u for u in moving + lying
               if shop.site.catalog.version(shop.site.product_index(u), shop.site.now())
               != shop.site.catalog.version(shop.site.product_index(u), before)}
    crawls.append(crawl(tmp, shop, redis_url, urls, "2", **policy))
    paths = {u.split(str(shop.server.port), 1)[1]: u for u in urls}
    wire: dict[str, int] = {}
    for entry in shop.server.log():
        if entry.path in paths:
            wire[paths[entry.path]] = wire.get(paths[entry.path], 0) + entry.bytes
    shop.server._log.clear()
    crawls.append(crawl(tmp, shop, redis_url, urls, "3", **policy))
    statuses = [(paths[e.path], e.status) for e in shop.server.log() if e.path in paths]
    for entry in shop.server.log():
        if entry.path in paths:
            wire[paths[entry.path]] += entry.bytes
    pages = {u: history(client, u) for u in urls}
    trust = TrustStore(client, CrawlKeys("demo"), TrustPolicy(), ManualClock()).all()
    return Scenario(still, moving, ignoring, lying, (old, target), changed, crawls, statuses, pages,
                    trust, wire)


def test_first_crawl_has_no_validators_to_send_except_through_a_redirect(scenario):
    stats = scenario.crawls[0].stats
    assert stats[C + "skipped/no_validators"] == 12  # 11 pages and the redirect's target
    assert stats[C + "sent"] == 1 and C + "not_modified" not in stats  # the outdated URL's own
    _, target = scenario.redirected
    row = next(r for r in scenario.crawls[0].feed if r["url"] == target)
    assert row["change"] == "new"  # its validators did not follow it to the target's URL


def test_an_honest_host_earns_trust_through_verified_304s(scenario):
    stats = scenario.crawls[1].stats
    assert stats[C + "sent"] == 11
    # still (3) and lying (3) answer 304; a learning host's 304s are all verified
    assert stats[C + "not_modified"] == stats[C + "verification"] == 6
    assert stats[C + "evidence/confirmed"] == 3 and stats[C + "trust/trusted"] == 1
    assert scenario.trust[host_of(scenario.still[0])].state == "trusted"


def test_the_304_path_records_an_unchanged_visit_and_parses_and_stores_nothing(scenario):
    stats = scenario.crawls[2].stats
    honest = scenario.still + scenario.moving
    assert stats[C + "not_modified"] == len(honest) and C + "verification" not in stats
    assert sorted(s for u, s in scenario.statuses if u in honest) == [304] * len(honest)
    assert stats["webcrawl/records"] == len(scenario.ignoring + scenario.lying)  # the others only
    assert stats.get("webcrawl/bodies/stored", 0) == 0
    page = scenario.pages[scenario.still[0]]
    assert (page.visits, page.changes, page.not_modified, page.fetches, page.kind) == (2, 0, 1, 3, "304")
    assert page.last_changed is False and page.status == 304



def test_cost_is_the_bytes_on_the_wire_of_every_response_304s_included(scenario):
    for url, page in scenario.pages.items():
        assert page.cost == scenario.wire[url], url


def test_changes_behind_an_honest_host_come_as_200s_and_reach_the_feed(scenario):
    second = scenario.crawls[1]
    assert second.stats[C + "modified"] >= len([u for u in scenario.moving if u in scenario.changed])
    feed = {r["url"] for r in second.feed}
    assert feed == scenario.changed  # moving products that changed, and the lying host's


def test_a_host_that_ignores_its_validators_loses_trust(scenario):
    second, third = scenario.crawls[1], scenario.crawls[2]
    host = host_of(scenario.ignoring[0])
    assert second.stats[C + "evidence/ignored"] == 3
    assert "no longer trusted" in second.stderr and host in second.stderr
    assert scenario.trust[host].state == "distrusted" and "200" in scenario.trust[host].reason
    assert third.stats[C + "skipped/untrusted"] == len(scenario.ignoring + scenario.lying)


def test_a_host_that_answers_304_while_the_record_changed_loses_trust(scenario):
    second, third = scenario.crawls[1], scenario.crawls[2]
    host = host_of(scenario.lying[0])
    lies = [u for u in scenario.lying if u in scenario.changed]
    assert lies and second.stats[C + "evidence/lied"] >= 1
    assert scenario.trust[host].state == "distrusted" and "304" in scenario.trust[host].reason
    assert [s for u, s in scenario.statuses if u in scenario.lying] == [200] * len(scenario.lying)
    assert third.stats.get("webcrawl/records/changed", 0) == 0  # the verification found them already


@pytest.fixture
def middleware(redis_client, redis_url):
    def build(mode: str = "learn") -> ConditionalRequestMiddleware:
        keys = CrawlKeys("unit")
        clock = ManualClock()
        context = ChangeContext(HistoryStore(redis_client, keys),
                                TrustStore(redis_client, keys, TrustPolicy(), clock),
                                FetchNotes(), Canonicalizer())
        context.history.observe("http://a.example/p", now=1.0, record_hash="h",
                                validators=('"e"', "Thu, 01 Jan 2026 00:00:00 GMT"))
        site = SimpleNamespace(trust=Trust(hosts=(("a.example", TrustRule(validators=mode)),)))
        stats = MemoryStatsCollector(get_crawler())
        return ConditionalRequestMiddleware(context, stats, site=site, clock=clock)
    return build


@pytest.mark.parametrize(("request_kwargs", "mode", "sent"), [
    ({}, "learn", True),
    ({}, "always", True),
    ({}, "never", False),
    ({"method": "POST"}, "learn", False),
    ({"meta": {"webcrawl_conditional": False}}, "learn", False),
    ({"meta": {"webcrawl_verify_304": True}}, "learn", False),
    ({"headers": {"If-None-Match": '"mine"'}}, "learn", False),
])
def test_which_requests_get_validators(middleware, request_kwargs, mode, sent):
    mw = middleware(mode)
    request = Request("http://A.example/p#frag", **request_kwargs)
    mw.process_request(request)
    assert (request.headers.get("If-None-Match") == b'"e"') is sent
    assert ("If-Modified-Since" in request.headers) is sent


def test_a_distrusted_host_gets_validators_only_when_the_site_says_always(middleware):
    for mode, sent in (("learn", False), ("always", True)):
        mw = middleware(mode)
        for _ in range(3):
            mw.context.trust.observe("a.example", "ignored")
        request = Request("http://a.example/p")
        mw.process_request(request)
        assert ("If-None-Match" in request.headers) is sent
