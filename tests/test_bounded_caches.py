"""The crawl process's in-memory caches keep a size bound however many hosts a long crawl meets:
the hosts' timed LRU (delays, health, validator and sitemap trust, refusal answers) and the cost
middleware's set of hosts whose backoff was logged, a page parser's memo tables. (The spacing middleware's host table:
tests/test_spacing.py; robots.txt policies: tests/test_robots_cache.py.)"""

from __future__ import annotations

import time

import pytest
from scrapy.settings import Settings

from webcrawl.config import StateConfig
from webcrawl.middlewares.cost import _Seen
from webcrawl.parse import PageParser
from webcrawl.parse.page import ParseRules
from webcrawl.state.hosts import TimedCache


def test_the_timed_cache_keeps_the_most_recent_entries_up_to_its_size() -> None:
    cache = TimedCache(100, 60.0)
    for i in range(10_000):
        cache.put(f"host{i}", i)
        if i % 7 == 0:
            cache.get("host0")  # a read does not keep an entry: only puts refresh it
    assert len(cache._data) == 100
    assert cache.get("host9999") == 9999 and cache.get("host9900") == 9900
    assert cache.get("host9899") is None and cache.get("host0") is None
    cache.put("host9900", "again")  # put again: the newest, so the last to go
    for i in range(99):
        cache.put(f"more{i}", i)
    assert cache.get("host9900") == "again" and cache.get("host9901") is None


def test_the_timed_cache_forgets_by_age_but_keeps_the_stale_value_for_an_outage() -> None:
    cache = TimedCache(10, 0.05)
    cache.put("a.test", 2.0)
    assert cache.get("a.test") == 2.0
    deadline = time.monotonic() + 2.0
    while cache.get("a.test") is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cache.get("a.test") is None
    assert cache.stale("a.test", 1.0) == 2.0 and cache.stale("b.test", 1.0) == 1.0
    cache.drop("a.test")
    assert cache.stale("a.test", 1.0) == 1.0


def test_the_set_of_logged_backoffs_keeps_the_newest_hosts_up_to_its_size() -> None:
    seen = _Seen(50)
    for i in range(5_000):
        seen.add(f"host{i}")
    assert len(seen._data) == 50
    assert "host4999" in seen and "host4950" in seen and "host4949" not in seen


def test_a_page_parsers_memo_tables_keep_their_bound_over_many_pages() -> None:
    parser = PageParser(ParseRules(), cache_size=50)
    for i in range(300):
        links = "".join(f'<a href="/d{i}/p{j}.html">x</a><a href="http://h{i}.test/{j}">y</a>'
                        for j in range(5))
        body = f"<html><body>{links}</body></html>".encode()
        result = parser.parse(body, f"http://site.test/d{i}/index.html")
        assert len(result.links) == 10
    canon, links = parser.canonicalizer, parser.link_filter
    assert len(canon._cache) <= 50 and canon._dir_memo_size <= 50
    assert len(links._verdicts) <= 50 and len(links._hosts) <= 50


def test_the_parse_cache_setting_is_read_with_a_one_line_error() -> None:
    assert StateConfig.parse_cache_size_of(Settings()) == 20_000
    assert StateConfig.parse_cache_size_of(Settings({"WEBCRAWL_PARSE_CACHE_SIZE": "500"})) == 500
    with pytest.raises(ValueError, match=r"^WEBCRAWL_PARSE_CACHE_SIZE='0' is out of range"):
        StateConfig.parse_cache_size_of(Settings({"WEBCRAWL_PARSE_CACHE_SIZE": "0"}))
