"""Exact change times from sitemap ``lastmod`` on hosts whose dates proved reliable: the spider
carries a sitemap entry's date into its PageItem, the record-hash pipeline passes ``fetch_time -
lastmod`` as the change age only for hosts whose sitemap dates are trusted (the site file's rule,
or trust learned by the land script from dates that agreed with what fetches found), only for a
date not after the fetch; the page record keeps it only for a changed record whose change fits
in the interval since the previous visit. Real Redis, the pipeline in-process."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler

from tests.runtimes import land, run, runtime_for
from webcrawl.items import EXPORTED_FIELDS, PageItem
from webcrawl.pipelines.recordhash import RecordHashPipeline
from webcrawl.revisit import TrustTracker
from webcrawl.runtime import CrawlRuntime
from webcrawl.sites import site_from_dict
from webcrawl.spiderloader import spider_class_for
from webcrawl.spiders._sitemap import parse_lastmod
from webcrawl.spiders.site import SiteSpider
from webcrawl.state.pagestore import lastmod_op, observe_op
from webcrawl.state.records import Record

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


@pytest.fixture
def runtime(redis_url: str) -> Iterator[CrawlRuntime]:
    runtime = runtime_for(redis_url)
    yield runtime
    runtime.close()


def pipeline(runtime: CrawlRuntime, **kwargs: Any) -> RecordHashPipeline:
    return RecordHashPipeline(runtime, runtime.stats, site=SITE, **kwargs)


def item(host: str, name: str, fetch_time: float, lastmod: float | None = None,
         headers: dict[str, str] | None = None, path: str = "/product/1") -> PageItem:
    url = f"http://{host}{path}"
    return PageItem(url=url, canonical_url=url, site="shop", page_type="product", status=200,
                    fetch_time=fetch_time, record={"name": name}, body=b"x" * 50,
                    headers=headers or {}, lastmod=lastmod)


def twice(runtime: CrawlRuntime, host: str, second: str, lastmod: float | None,
          pipe: RecordHashPipeline | None = None, **kwargs: Any) -> Record:
    """Fetch the page at T0 (record "a"), then at T0 + 10 h (record ``second``) with ``lastmod``."""
    pipe = pipe or pipeline(runtime)
    run(pipe.process_item(item(host, "a", T0)))
    run(pipe.process_item(item(host, second, T0 + 10 * HOUR, lastmod, **kwargs)))
    record = runtime.pages.get(f"http://{host}/product/1", host)
    assert record is not None
    return record


def agree(runtime: CrawlRuntime, host: str, page: int, *, says_changed: bool, changed: bool,
          start: float = T0) -> list[str]:
    """One comparison of a sitemap date with a fetch: page fetched at ``start``, its date read
    8 h later (after the change it reports, or before the previous fetch), fetched again at 9 h.
    Returns the second observation's answer (verdict, interval, sitemap trust news)."""
    url = f"http://{host}/product/{page}"
    land(runtime, host, observe_op(url, full=True, time=start, record_hash="aa" * 8))
    date = start + HOUR if says_changed else start - HOUR
    land(runtime, host, lastmod_op(url, date, start + 8 * HOUR, "learn"))
    return land(runtime, host, observe_op(url, full=True, time=start + 9 * HOUR,
                                          record_hash=("bb" if changed else "aa") * 8))


def test_a_trusted_hosts_lastmod_is_the_exact_change_time(runtime: CrawlRuntime) -> None:
    record = twice(runtime, "always.shop.test", "b", T0 + 7 * HOUR)
    assert (record.changes, record.exact_changes, record.exact_seconds) == (1, 1, 3 * HOUR)
    assert record.bins == []  # not counted as a censored interval
    assert record.page_history().exact_seconds == 3 * HOUR
    assert runtime.stats.get_value("webcrawl/records/lastmod_exact") == 1


def test_trust_learned_from_agreement_counts_too(runtime: CrawlRuntime, redis_url: str) -> None:
    host = "learn.shop.test"
    assert twice(runtime, host, "b", T0 + 7 * HOUR).exact_changes == 0  # still learning
    # Right both ways: the first comparison a date saying "unchanged", the others "changed".
    answers = [agree(runtime, host, 10 + i, says_changed=i > 0, changed=i > 0)
               for i in range(runtime.sitemap_trust.min_agreements)]
    assert [a[2] for a in answers] == [""] * (len(answers) - 1) + ["trusted"]
    fresh = runtime_for(redis_url)  # hosts' trust is cached a few seconds per process
    assert fresh.hosts.sitemaps_trusted(host)
    fresh.client.hdel(fresh.layout.shard(host).pages, f"http://{host}/product/1")
    pipe = pipeline(fresh)
    record = twice(fresh, host, "b", T0 + 9 * HOUR, pipe)
    assert (record.exact_changes, record.exact_seconds) == (1, HOUR)
    assert fresh.stats.get_value("webcrawl/records/lastmod_exact") == 1
    fresh.close()


@pytest.mark.parametrize(("host", "second", "lastmod", "why"), [
    ("never.shop.test", "b", T0 + 7 * HOUR, "the site file distrusts this host's sitemap"),
    ("learn.shop.test", "b", T0 + 7 * HOUR, "trust not earned yet"),
    ("always.shop.test", "b", T0 + 11 * HOUR, "dated after the fetch"),
    ("always.shop.test", "b", T0 - HOUR, "dated before the previous visit: not this change"),
    ("always.shop.test", "b", None, "no lastmod"),
])
def test_no_exact_time_otherwise(runtime: CrawlRuntime, host: str, second: str,
                                 lastmod: float | None, why: str) -> None:
    record = twice(runtime, host, second, lastmod)
    assert (record.changes, record.exact_changes, record.exact_seconds) == (1, 0, 0.0), why
    assert sum(n for _, n, _ in record.bins) == 1  # a censored interval instead


def test_an_unchanged_record_stays_unchanged_whatever_its_date(runtime: CrawlRuntime) -> None:
    record = twice(runtime, "always.shop.test", "a", T0 + 7 * HOUR)
    assert (record.changes, record.exact_changes, record.unchanged_seconds) == (0, 0, 10 * HOUR)


def test_last_modified_from_trusted_validators_comes_first_and_the_setting_turns_both_off(
        runtime: CrawlRuntime) -> None:
    headers = {"Date": "Tue, 14 Nov 2023 22:13:20 GMT", "Last-Modified": "Tue, 14 Nov 2023 21:13:20 GMT"}
    record = twice(runtime, "always.shop.test", "b", T0 + 7 * HOUR, headers=headers)
    assert (record.exact_changes, record.exact_seconds) == (1, HOUR)  # the header's age, not 3 h
    runtime.client.flushall()
    off = pipeline(runtime, exact_changes=False)
    record = twice(runtime, "always.shop.test", "b", T0 + 7 * HOUR, off)
    assert record.exact_changes == 0 and record.changes == 1


def test_sitemap_trust_kept_by_the_land_script_follows_the_trust_model(runtime: CrawlRuntime) -> None:
    """Random agreements and disagreements: the host's trust in Redis after each comparison is
    :class:`TrustTracker`'s (a disagreement past the rate starts the count over)."""
    rng = random.Random(3)
    model = runtime.sitemap_trust
    tracker = TrustTracker(model.min_agreements, model.max_disagreement_rate, model.memory,
                           both_ways=True)
    seen = set()
    for i in range(60):
        agrees, says = rng.random() < 0.85, rng.random() < 0.5
        before = tracker.trusted
        tracker.observe(agrees, says)
        news = agree(runtime, "a.shop.test", i, says_changed=says, changed=says == agrees,
                     start=T0 + i * 100 * HOUR)[2]
        assert news == ("" if tracker.trusted == before else
                        ("trusted" if tracker.trusted else "distrusted")), i
        seen.add(news)
        stored = runtime.hosts.all_sitemap_trust()["a.shop.test"]
        assert stored["comparisons"] == tracker.comparisons
        assert stored["disagreement_rate"] == pytest.approx(tracker.disagreement_rate, rel=1e-12)
    assert seen == {"", "trusted", "distrusted"}  # trust earned and lost along the way


def test_dates_always_saying_changed_never_earn_trust(runtime: CrawlRuntime) -> None:
    """A sitemap stamping every entry with the time of the request: on pages that change at every
    visit it agrees each time, and still says nothing."""
    host = "now.shop.test"
    answers = [agree(runtime, host, i, says_changed=True, changed=True)[2] for i in range(20)]
    assert "trusted" not in answers and not runtime.hosts.sitemaps_trusted(host)
    # One right "unchanged" and it has been right both ways.
    assert agree(runtime, host, 99, says_changed=False, changed=False)[2] == "trusted"


def test_a_date_read_long_after_the_previous_fetch_is_judged_only_when_recent(runtime: CrawlRuntime) -> None:
    """A change made after the date was read cannot be held against it: a reading is judged only
    when the fetch follows it closely (within a quarter of the time before it)."""
    host, url = "b.shop.test", "http://b.shop.test/product/1"
    land(runtime, host, observe_op(url, full=True, time=T0, record_hash="aa" * 8))
    land(runtime, host, lastmod_op(url, T0 - HOUR, T0 + HOUR, "learn"))  # says unchanged
    land(runtime, host, observe_op(url, full=True, time=T0 + 10 * HOUR, record_hash="bb" * 8))
    assert runtime.hosts.all_sitemap_trust() == {}  # 9 h after a reading 1 h in: not judged


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


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-01-01", 1767225600.0), ("2026-01-01T00:00:10Z", 1767225610.0),
    ("2026-01-01T01:00:00+01:00", 1767225600.0), ("2026-13-01", None), ("yesterday", None),
    ("", None), (None, None),
])
def test_parse_lastmod(value: str | None, expected: float | None) -> None:
    assert parse_lastmod(value) == expected
