"""Feeding a running crawl the way scrapy-redis users do: redis-py ``LPUSH``/``RPUSH`` of plain
URLs and JSON entries (``url``, ``meta``) to ``<spider>:start_urls`` on the crawl's Redis, while a
real ``scrapy crawl`` runs, in continuous mode and in a one-run crawl waiting for pushed URLs
(``MAX_IDLE_TIME_BEFORE_CLOSE``). What was fetched is read from the site's request log."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import redis

from tests.crawls import finish, start_crawl, stats_of, wait_for
from webcrawl.demo.serve import start_server_process
from webcrawl.spiders._feed import ALLOWED_META, project_meta_keys, safe_meta
from webcrawl.state.feed import FeedError, parse_entry

SITE = r"""
name = "feedsite"
seeds = ["http://127.0.0.2:${WEBCRAWL_DEMO_PORT}/"]
allowed_domains = ["127.0.0.2"]
allowed_private_networks = ["127.0.0.0/8"]
spider = "tests._feedspider.JobLoggingSpider"

[politeness]
user_agent = "webcrawl-test/0.1 (+https://example.org/webcrawl-test; test@example.org)"
min_delay_seconds = 0.05

[budget]
billing = "requests"
amount_per_cycle = %(budget)s
cycle_seconds = %(cycle)s
%(extra)s

[limits]
max_depth = 0   # the seed only: every other page comes from the feed

[[page_types]]
name = "page"
url_pattern = '/page-'
fields = { title = "h1" }
"""


@pytest.mark.parametrize(("entry", "expected"), [
    (b"http://a.example/x", ("http://a.example/x", "GET", {}, {})),
    (b'{"url": "http://a.example/x", "meta": {"job": 1}}', ("http://a.example/x", "GET", {"job": 1}, {})),
    (b'{"url": "http://a.example/x", "method": "post", "q": "shoes"}',
     ("http://a.example/x", "POST", {}, {"q": "shoes"})),
])
def test_entries_read_as_scrapy_redis_reads_them(entry: bytes, expected: tuple) -> None:
    parsed = parse_entry(entry)
    assert (parsed.url, parsed.method, parsed.meta, parsed.formdata) == expected


@pytest.mark.parametrize("entry", [b"not a url", b"{broken", b'{"meta": {}}', b"ftp://a/x",
                                   b'{"url": "http://a/x", "meta": []}', b"\xff\xfe",
                                   b'{"url": "http://a/x", "method": "DELETE"}'])
def test_hostile_entries_say_why(entry: bytes) -> None:
    with pytest.raises(FeedError):
        parse_entry(entry)


@pytest.mark.parametrize(("meta", "kept"), [
    ({"cookiejar": "session-2", "dont_cache": True, "dont_retry": True,
      "referrer_policy": "no-referrer"},
     {"cookiejar": "session-2", "dont_cache": True, "dont_retry": True,
      "referrer_policy": "no-referrer"}),
    # What would lift a limit, reroute or rebind a request, or forge what webcrawl trusts.
    ({"download_maxsize": 0, "download_timeout": 3600, "bindaddress": ["10.0.0.1", 0],
      "proxy": "http://evil.example:3128", "_auth_proxy": "x", "dont_obey_robotstxt": True,
      "handle_httpstatus_all": True, "allow_offsite": True, "download_slot": "other",
      "max_retry_times": 1000, "depth": -1000, "depth_reset": True,
      "webcrawl_known": True, "webcrawl_lease": "x:1", "webcrawl_page_type": "product",
      "webcrawl_charged": -5}, {}),
    # Allowed keys with values of another type: an unhashable cookie jar would fail its request.
    ({"cookiejar": {"a": 1}, "dont_retry": "no", "referrer_policy": 7}, {}),
    # A key of the project's own (WEBCRAWL_FEED_META_KEYS), any JSON value.
    ({"job": {"id": 42, "tags": ["nightly"]}, "other": 1},
     {"job": {"id": 42, "tags": ["nightly"]}}),
])
def test_pushed_meta_keeps_only_the_allowlist(meta: dict, kept: dict) -> None:
    got, dropped = safe_meta(meta, frozenset({"job"}))
    assert got == kept
    assert sorted(dropped) == sorted(set(meta) - set(kept))


@pytest.mark.parametrize("name", ["proxy", "download_maxsize", "webcrawl_purpose", "_auth_proxy",
                                  "handle_httpstatus_list", "depth"])
def test_the_projects_own_keys_may_not_open_scrapys_or_webcrawls(name: str) -> None:
    with pytest.raises(ValueError, match=f"WEBCRAWL_FEED_META_KEYS names '{name}'"):
        project_meta_keys(["job", name])
    # The allowlist's own keys may be named (they stay type-checked).
    assert project_meta_keys(["job", *ALLOWED_META]) == {"job"}


@pytest.mark.parametrize("mode", ["continuous", "idle-wait"])
def test_a_running_crawl_takes_urls_pushed_to_its_start_urls_list(
        mode: str, redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    (tmp_path / "sites").mkdir()
    continuous = mode == "continuous"
    extra = "continuous = true\nstop_after_seconds = 10" if continuous else ""
    (tmp_path / "sites" / "feedsite.toml").write_text(
        SITE % {"cycle": 3 if continuous else 3600, "budget": 15 if continuous else 200,
                "extra": extra})
    with start_server_process("generated", 1, tmp_path / "server.log", pages=8, min_kb=1,
                              max_kb=2, links=10) as site:
        seed, first, second, third = site.site.urls()[:4]
        settings = {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_SITES_DIR": tmp_path / "sites",
                    "WEBCRAWL_DEMO_PORT": site.port, "WEBCRAWL_DATA_DIR": tmp_path / "data",
                    "LOG_LEVEL": "INFO", "WEBCRAWL_FEED_META_KEYS": "job"}
        if not continuous:
            settings["MAX_IDLE_TIME_BEFORE_CLOSE"] = 5
        crawl = start_crawl("feedsite", settings, tmp_path)

        def fetched() -> Counter[str]:
            return Counter(e.path for e in site.read_log() if e.path != "/robots.txt")

        wait_for(lambda: fetched()["/"] == 1, 60, "the crawl to fetch its seed")
        key = "feedsite:start_urls"
        redis_client.lpush(key, first)  # a plain URL, as scrapy-redis's README pushes them
        redis_client.rpush(key, json.dumps({"url": second, "meta": {
            "job": "42", "dont_obey_robotstxt": True, "download_maxsize": 0,
            "cookiejar": {"not": "hashable"}}}))
        redis_client.rpush(key, "not a url", "{broken", json.dumps({"meta": {}}))
        redis_client.rpush(key, seed)  # met before: pushed, it is crawled again
        redis_client.sadd("elsewhere", third)  # another key: not read
        paths = [u.split(str(site.port), 1)[1] for u in (first, second)]
        wait_for(lambda: all(fetched()[p] for p in paths) and fetched()["/"] >= 2, 30,
                 "the pushed URLs to be fetched")
        assert finish(crawl, 60) == 0
        log = (tmp_path / "crawl.log").read_text()
    stats = stats_of(log)
    if continuous:  # known pages are revisited at the budget's rate: each at least once here
        assert set(fetched()) == {"/", *paths}, fetched()
    else:  # one run: each page once, the pushed seed a second time
        assert fetched() == Counter({"/": 2, paths[0]: 1, paths[1]: 1}), fetched()
    assert redis_client.llen(key) == 0
    assert stats["webcrawl/feed/read"] == 6 and stats["webcrawl/feed/requests"] == 3
    assert stats["webcrawl/feed/invalid"] == 3 and stats["webcrawl/feed/meta_dropped"] == 3
    assert f"fed page {second} for job 42" in log
    assert log.count("Skipped a pushed entry") == 1, "one warning per run"
    assert log.count("Dropped the meta key") == 1, "one warning per run"
    assert stats["finish_reason"] == ("stop_after_seconds" if continuous else "finished")
