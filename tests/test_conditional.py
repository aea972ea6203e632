"""ConditionalRequestMiddleware end to end (demo shop, real Redis, Scrapy in subprocesses through
the project's scheduler: revisits popped from due queues carry their validators): the 304 path,
verification of 304s, trust earned by an honest host and lost by one that ignores its validators
and by one that answers 304 while the record changed; then the request-side rules, redirects
through Scrapy's own redirect middleware, and the hosts' trust kept by the land script."""

from __future__ import annotations

import random
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy.downloadermiddlewares.redirect import RedirectMiddleware
from scrapy.http import Request, Response

from tests.runtimes import land, runtime_for
from tests.test_pipelines_recordhash import (  # noqa: F401
    HONEST,
    IGNORING,
    LYING,
    Crawl,
    crawl,
    module_redis,
    module_shop,
    state,
)
from webcrawl import meta as M
from webcrawl.change import TrustPolicy, ValidatorTrust
from webcrawl.demo.catalog import DAY
from webcrawl.middlewares.conditional import ConditionalRequestMiddleware, NotModified, http_date
from webcrawl.sites.schema import Trust, TrustRule
from webcrawl.state.hosts import validator_op
from webcrawl.state.pagestore import observe_op
from webcrawl.state.records import MOVED

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
    statuses: list[tuple[str, int]]  # product requests of the last crawl as the server saw them
    pages: dict[str, Any]
    trust: dict[str, ValidatorTrust]
    answers: dict[str, int]  # answers the server gave for each page over the four crawls
    moved_state: int  # the outdated URL's lifecycle state after the crawls


def host_of(url: str) -> str:
    return url.split("/")[2].split(":")[0]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, module_shop, module_redis, state) -> Scenario:
    """Four crawls of pages on three catalog hosts, every page made due before each but the
    first: the first finds them, the second (conditional requests off) starts their histories,
    then the shop's time moves three days before the third and the fourth. Thresholds: trust
    after 2 confirmations, lost after 3 ignored conditional requests or 1 lie; trusted hosts'
    304s are not verified (share 0)."""
    shop, (redis_url, _) = module_shop, module_redis
    tmp = tmp_path_factory.mktemp("conditional")
    still = [shop.product(i) for i in shop.on_host(HONEST, 3, changing=False)]
    moving = [shop.product(i) for i in shop.on_host(HONEST, 2, changing=True)]
    ignoring = [shop.product(i) for i in shop.on_host(IGNORING, 3, changing=False)]
    lying = [shop.product(i) for i in shop.on_host(LYING, 3, changing=True)]
    target_index = shop.on_host(HONEST, 3, changing=False)[-1] + 3
    target = shop.product(target_index)
    old = target + "-2025"  # an outdated slug: the shop answers 301 to the right URL
    etag = f'"p{target_index}-v{shop.site.product_version(target_index)}"'  # the target's own
    # A known page at the outdated URL whose stored validators are the target's: due now.
    state.batch.land(host_of(old), observe_op(old, full=True, time=state.server_time() - 10,
                                              record_hash="ab" * 8, validators=(etag, None)))
    state.make_due([old])
    urls = still + moving + ignoring + lying
    policy = {"WEBCRAWL_CONDITIONAL_EARN_AFTER": 2, "WEBCRAWL_CONDITIONAL_IGNORE_LIMIT": 3,
              "WEBCRAWL_CONDITIONAL_LIE_LIMIT": 1, "WEBCRAWL_CONDITIONAL_VERIFY_SHARE": 0.0}
    crawls = [crawl(tmp, shop, redis_url, urls, "1", **policy)]
    # A page without history could change at any moment: a check that finds it changed after a
    # 304 proves nothing. One unchanged visit first.
    state.make_due(urls)
    crawls.append(crawl(tmp, shop, redis_url, urls, "history", WEBCRAWL_CONDITIONAL_ENABLED=False))
    before = shop.site.now()
    shop.jump(3 * DAY)
    changed = {u for u in moving + lying
               if shop.site.catalog.version(shop.site.product_index(u), shop.site.now())
               != shop.site.catalog.version(shop.site.product_index(u), before)}
    state.make_due(urls)
    crawls.append(crawl(tmp, shop, redis_url, urls, "2", **policy))
    paths = {u.split(str(shop.server.port), 1)[1]: u for u in urls}
    answers = dict.fromkeys(urls, 0)
    for entry in shop.server.log():
        if entry.path in paths:
            answers[paths[entry.path]] += 1
    shop.server._log.clear()
    state.make_due(urls)
    crawls.append(crawl(tmp, shop, redis_url, urls, "4", **policy))
    statuses = [(paths[e.path], e.status) for e in shop.server.log() if e.path in paths]
    for url, _ in statuses:
        answers[url] += 1
    pages = {u: state.record(u) for u in urls}
    trust = {host_of(u): state.hosts.validators(host_of(u)) for u in urls}
    return Scenario(still, moving, ignoring, lying, (old, target), changed, crawls, statuses, pages,
                    trust, answers, state.record(old).state)


def test_first_crawl_sends_validators_only_for_a_known_page_and_not_past_its_redirect(scenario):
    stats = scenario.crawls[0].stats
    assert stats[C + "sent"] == 1 and C + "not_modified" not in stats  # the outdated URL's own
    old, target = scenario.redirected
    # The known page moved (301): one "moved" event; its validators did not follow it.
    [row] = [r for r in scenario.crawls[0].feed if r["moved_to"] == target]
    assert (row["kind"], row["url"]) == ("moved", old)
    assert scenario.moved_state == MOVED


def test_an_honest_host_earns_trust_through_verified_304s(scenario):
    stats = scenario.crawls[2].stats
    assert stats[C + "sent"] == 11
    # still (3) and lying (3) answer 304; a learning host's 304s are all verified
    assert stats[C + "not_modified"] == stats[C + "verification"] == 6
    assert stats[C + "evidence/confirmed"] == 3 and stats[C + "trust/trusted"] == 1
    assert scenario.trust[host_of(scenario.still[0])].state == "trusted"


def test_the_304_path_records_an_unchanged_visit_and_parses_and_stores_nothing(scenario):
    stats = scenario.crawls[3].stats
    honest = scenario.still + scenario.moving
    assert stats[C + "not_modified"] == len(honest) and C + "verification" not in stats
    assert sorted(s for u, s in scenario.statuses if u in honest) == [304] * len(honest)
    assert stats["webcrawl/records"] == len(scenario.ignoring + scenario.lying)  # the others only
    assert stats.get("webcrawl/bodies/stored", 0) == 0
    page = scenario.pages[scenario.still[0]]
    assert (page.visits, page.changes, page.not_modified, page.fetches) == (3, 0, 1, 4)
    assert page.last_changed == 0 and page.last_fetched > page.first_seen  # the 304 landed its time


def test_every_answer_is_billed_to_its_page_304s_and_verifications_included(scenario):
    """The demo bills requests: a page's cost is the number of answers the server gave for it
    (a verified 304 and its verification land once, with both answers' cost)."""
    for url, page in scenario.pages.items():
        assert page.billed == scenario.answers[url], url
        assert page.billed_n == 4, url  # one landing a crawl


def test_changes_behind_an_honest_host_come_as_200s_and_reach_the_feed(scenario):
    second = scenario.crawls[2]
    assert second.stats[C + "modified"] >= len([u for u in scenario.moving if u in scenario.changed])
    feed = {r["url"] for r in second.feed}
    assert feed == scenario.changed  # moving products that changed, and the lying host's


def test_a_host_that_ignores_its_validators_loses_trust(scenario):
    second, third = scenario.crawls[2], scenario.crawls[3]
    host = host_of(scenario.ignoring[0])
    assert second.stats[C + "evidence/ignored"] == 3
    assert "no longer trusted" in second.stderr and host in second.stderr
    assert scenario.trust[host].state == "distrusted" and "200" in scenario.trust[host].reason
    assert third.stats[C + "skipped/untrusted"] == len(scenario.ignoring + scenario.lying)


def test_a_host_that_answers_304_while_the_record_changed_loses_trust(scenario):
    second, third = scenario.crawls[2], scenario.crawls[3]
    host = host_of(scenario.lying[0])
    lies = [u for u in scenario.lying if u in scenario.changed]
    assert lies and second.stats[C + "evidence/lied"] >= 1
    assert scenario.trust[host].state == "distrusted" and "304" in scenario.trust[host].reason
    assert [s for u, s in scenario.statuses if u in scenario.lying] == [200] * len(scenario.lying)
    assert third.stats.get("webcrawl/records/changed", 0) == 0  # the verification found them already


# -- In-process: the request side, redirects, and the trust the land script keeps ------------------

URL = "http://a.example/p"
VALIDATORS = ['"e"', "Thu, 01 Jan 2026 00:00:00 GMT"]


@pytest.fixture
def runtime(redis_url):
    runtime = runtime_for(redis_url)
    yield runtime
    runtime.close()


def middleware(runtime, mode: str = "learn", **kwargs: Any) -> ConditionalRequestMiddleware:
    site = SimpleNamespace(trust=Trust(hosts=(("a.example", TrustRule(validators=mode)),)))
    return ConditionalRequestMiddleware(runtime, runtime.stats, site=site, **kwargs)


def revisit(url: str = URL, **kwargs: Any) -> Request:
    """A known page's revisit as the scheduler builds it when it pops the page."""
    meta = {M.PURPOSE: "revisit", M.CANONICAL_URL: url, M.KNOWN: True,
            M.VALIDATORS: list(VALIDATORS), **kwargs.pop("meta", {})}
    return Request(url, meta=meta, **kwargs)


@pytest.mark.parametrize(("request_kwargs", "mode", "sent"), [
    ({}, "learn", True),
    ({}, "always", True),
    ({}, "never", False),
    ({"method": "POST"}, "learn", False),
    ({"meta": {"webcrawl_conditional": False}}, "learn", False),
    ({"meta": {"webcrawl_purpose": "sitemap"}}, "learn", False),
    ({"meta": {"webcrawl_verify_304": 1.0}}, "learn", False),
    ({"meta": {"webcrawl_validators": None}}, "learn", False),
    ({"headers": {"If-None-Match": '"mine"'}}, "learn", False),
])
def test_which_requests_get_validators(runtime, request_kwargs, mode, sent):
    mw = middleware(runtime, mode)
    request = revisit(**request_kwargs)
    mw.process_request(request)
    assert (request.headers.get("If-None-Match") == b'"e"') is sent
    assert ("If-Modified-Since" in request.headers) is sent
    assert (request.meta.get(M.VALIDATORS_FOR) == URL) is sent


def test_skips_are_counted_by_reason(runtime):
    mw = middleware(runtime, "never")
    mw.process_request(revisit())
    middleware(runtime).process_request(revisit(meta={M.VALIDATORS: None}))
    middleware(runtime).process_request(Request("http://a.example/new"))  # not known: not a skip
    stats = runtime.stats
    assert (stats.get_value(C + "skipped"), stats.get_value(C + "skipped/never"),
            stats.get_value(C + "skipped/no_validators")) == (2, 1, 1)


def test_a_distrusted_host_gets_validators_only_when_the_site_says_always(runtime):
    policy = runtime.trust_policy()
    for _ in range(policy.ignore_limit):
        land(runtime, "a.example", validator_op("ignored", runtime.clock.time(), policy))
    for mode, sent in (("learn", False), ("always", True)):
        runtime.hosts.forget_validators("a.example")
        request = revisit()
        middleware(runtime, mode).process_request(request)
        assert ("If-None-Match" in request.headers) is sent
    assert runtime.stats.get_value(C + "skipped/untrusted") == 1


def test_validators_do_not_follow_a_redirect_to_another_page(runtime):
    """Scrapy's redirect middleware copies headers and meta to the new request: the validators
    of the page before the redirect must not go to the page after it (its own would be answered
    304 and the new page never fetched)."""
    mw = middleware(runtime, "always")
    request = revisit("http://a.example/old")
    mw.process_request(request)
    assert request.headers.get("If-None-Match") == b'"e"'
    redirect = RedirectMiddleware(runtime.crawler.settings)
    redirect.crawler = runtime.crawler
    moved = Response(request.url, status=301, headers={"Location": "http://a.example/new"},
                     request=request)
    assert mw.process_response(request, moved) is moved
    follow = redirect.process_response(request, moved)
    assert isinstance(follow, Request) and follow.url == "http://a.example/new"
    mw.process_request(follow)
    assert not any(h in follow.headers for h in (b"If-None-Match", b"If-Modified-Since"))
    assert M.VALIDATORS_FOR not in follow.meta
    answered = Response(follow.url, status=304, request=follow)
    assert mw.process_response(follow, answered) is answered  # no 304 to validators we did not send
    # A retry of our own conditional request keeps them.
    again = request.replace()
    mw.process_request(again)
    assert again.headers.get("If-None-Match") == b'"e"'


def test_a_304_is_an_unchanged_observation_with_its_cost_unless_verified(runtime):
    url = "http://a.example/p"
    land(runtime, "a.example", observe_op(url, full=True, time=runtime.clock.time() - 60,
                                          record_hash="ab" * 8, validators=tuple(VALIDATORS)))
    mw = middleware(runtime, "always")
    request = revisit(meta={M.BILLED: 1.0})
    mw.process_request(request)
    with pytest.raises(NotModified):
        mw.process_response(request, Response(url, status=304, request=request))
    runtime.batch.flush()
    record = runtime.pages.get(url, "a.example")
    assert (record.visits, record.not_modified, record.changes, record.billed, record.billed_n) == (1, 1, 0, 1.0, 1)
    assert runtime.pages.validators(url, "a.example") == tuple(VALIDATORS)  # a 304 keeps them
    # A learning host: every 304 is verified; the check carries the 304's own Date.
    learning = middleware(runtime, "learn", rng=random.Random(1))
    request = revisit(meta={M.BILLED: 1.0})
    learning.process_request(request)
    date = "Thu, 01 Jan 2026 00:05:00 GMT"
    check = learning.process_response(request, Response(url, status=304, headers={"Date": date},
                                                        request=request))
    assert isinstance(check, Request) and check.dont_filter and check.priority == 25_000
    assert check.meta[M.VERIFY_304] == http_date(date) and M.VALIDATORS_FOR not in check.meta
    assert "If-None-Match" not in check.headers
    learning.process_request(check)  # and it goes out without validators
    assert "If-None-Match" not in check.headers
    runtime.batch.flush()
    assert runtime.pages.get(url, "a.example").not_modified == 1  # not observed: verified instead
    assert runtime.stats.get_value(C + "verification") == 1


def test_http_date():
    assert http_date(b"Thu, 01 Jan 2026 00:00:00 GMT") == 1767225600.0
    assert http_date("garbage") is None and http_date(None) is None


def test_trust_kept_by_the_land_script_follows_the_trust_model(runtime):
    """Random evidence sequences: the host's trust in Redis after each event equals
    :class:`ValidatorTrust`'s own, retry period included."""
    policy = TrustPolicy(earn_after=2, ignore_limit=2, lie_limit=1, retry_seconds=100.0)
    rng = random.Random(7)
    model, now = ValidatorTrust(), 1_000.0
    for _ in range(200):
        now += rng.choice([1.0, 5.0, 60.0])
        event = rng.choice(["confirmed", "confirmed", "ignored", "lied", "not_modified"])
        changed = model.observe(event, now, policy)
        (answer, *_) = land(runtime, "t.example", validator_op(event, now, policy))
        assert answer == (changed or ""), event
        runtime.hosts.forget_validators("t.example")
        stored = runtime.hosts.validators("t.example")
        assert (stored.state, stored.confirmed, stored.ignored_run, stored.lies) == (
            model.state, model.confirmed, model.ignored_run, model.lies)


def test_trust_is_shared_between_processes_and_cached_a_few_seconds(redis_url):
    a, b = runtime_for(redis_url, name="shared"), runtime_for(redis_url, name="shared")
    policy = TrustPolicy(earn_after=2)
    assert b.hosts.validators("h.example").state == "learning"  # now cached in b
    for _ in range(2):
        land(a, "h.example", validator_op("confirmed", a.clock.time(), policy))
    assert b.hosts.validators("h.example").state == "learning", "b's answer is cached"
    b.hosts.forget_validators("h.example")
    assert b.hosts.validators("h.example").state == "trusted"
    a.close()
    b.close()


def test_unreadable_trust_is_learned_again(runtime):
    runtime.client.hset(runtime.layout.shard("h.example").trust_validators, "h.example", "{not json")
    assert runtime.hosts.validators("h.example").state == "learning"
