"""RecordHashPipeline and DropUnchangedPipeline end to end: the demo shop on loopback hosts (real
HTTP, time frozen until a test moves it), a real redis-server, and real Scrapy crawls in
subprocesses whose feeds, stats and Redis state are read back.

The harness (``Shop``, ``crawl``) is shared with test_pipelines_bodystore.py, test_conditional.py
and test_body_command.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from webcrawl.change import record_hash
from webcrawl.demo.server import Headers, MultiHostServer, Response
from webcrawl.demo.shop import DAY, ShopSite
from webcrawl.items import EXPORTED_FIELDS
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys

ROOT = Path(__file__).resolve().parents[1]
HOSTS = 5  # www, three catalog shards (honest, ignoring validators, lying), blog
HONEST, IGNORING, LYING = 1, 2, 3  # host indices; product i lives on shard i % 3
DEMO_FIELDS = ("name", "price", "stock", "sku", "description", "category", "served_at")

CRAWL = textwrap.dedent(
    """
    import json, sys, time
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess
    from webcrawl.items import EXPORTED_FIELDS, PageItem
    from webcrawl.parse import PageParser, rules_for_site
    from webcrawl.sites import load_site_file

    with open(sys.argv[1]) as source:
        config = json.load(source)
    SITE = load_site_file(config["site_file"], {"WEBCRAWL_DEMO_PORT": str(config["port"])})
    PARSER = PageParser(rules_for_site(SITE))
    SELECTED = ("ETag", "Last-Modified", "Content-Type", "Date")

    class ChangeSpider(Spider):
        name = SITE.name
        site = SITE

        async def start(self):
            for url in config["urls"]:
                yield Request(url, dont_filter=True)

        def parse(self, response):
            charset = response.headers.get("Content-Type", b"").decode("latin-1").partition("charset=")[2]
            result = PARSER.parse(response.body, response.url, encoding=charset or None)
            headers = {k: response.headers[k].decode("latin-1") for k in SELECTED if k in response.headers}
            yield PageItem(
                url=response.url, canonical_url=result.url, site=SITE.name,
                page_type=result.page_type, status=response.status, fetch_time=time.time(),
                record=result.record or {}, body=response.body, headers=headers,
            )

    settings = {
        "TELNETCONSOLE_ENABLED": False, "REMOTE_CONTROL_ENABLED": False, "RETRY_ENABLED": False,
        "COOKIES_ENABLED": False, "ROBOTSTXT_OBEY": False, "DOWNLOAD_TIMEOUT": 20,
        "LOG_LEVEL": "INFO", "CONCURRENT_REQUESTS": 8,
        "ITEM_PIPELINES": {
            "webcrawl.pipelines.recordhash.RecordHashPipeline": 300,
            "webcrawl.pipelines.bodystore.BodyStorePipeline": 400,
            "webcrawl.pipelines.recordhash.DropUnchangedPipeline": 900,
        },
        "DOWNLOADER_MIDDLEWARES": {
            "webcrawl.middlewares.conditional.ConditionalRequestMiddleware": 650,
        },
        "FEEDS": {config["feed"]: {"format": "jsonlines", "overwrite": True}},
        "FEED_EXPORT_FIELDS": EXPORTED_FIELDS,
        **config["settings"],
    }
    process = CrawlerProcess(settings=settings)
    crawler = process.create_crawler(ChangeSpider)
    process.crawl(crawler)
    process.start()
    with open(config["stats"], "w") as out:
        json.dump(crawler.stats.get_stats(), out, default=str)
    """
)


class EmptyPageShop(ShopSite):
    """The demo shop plus one empty page (``/empty.html`` on every host)."""

    def respond(self, host: str, path: str, headers: Headers) -> Response:
        if path == "/empty.html":
            return 200, {"Content-Type": "text/html; charset=utf-8"}, b""
        return super().respond(host, path, headers)


@dataclass
class Shop:
    server: MultiHostServer
    site: EmptyPageShop

    def jump(self, seconds: float) -> None:
        """Move the shop's simulated time forward (it is frozen otherwise)."""
        self.site.clock.epoch += seconds

    def product(self, i: int) -> str:
        return self.site.product_url(i)

    def on_host(self, host: int, count: int, *, changing: bool | None = None) -> list[int]:
        """``count`` products of catalog host ``host``; ``changing``: only products that do
        (True) or never do (False) change."""
        shard = host - 1
        found = []
        for i in range(len(self.site.catalog)):
            rate = self.site.catalog.change_rate(i)
            if i % 3 == shard and (changing is None or (rate > 0) == changing):
                found.append(i)
        return found[:count]

    def blog(self, path: str) -> str:
        return self.server.base_url(HOSTS - 1) + path


@pytest.fixture
def shop() -> Iterator[Shop]:
    # time_scale 1e-9: a second of real time is a nanosecond of shop time, so nothing changes
    # unless a test calls jump(); noise (timestamps' digits, tokens, ads) still differs per load.
    site = EmptyPageShop(seed=3, time_scale=1e-9, large_page_kb=3072, min_change_interval=3600.0,
                    max_change_interval=2 * DAY, ignore_validators=(IGNORING,),
                    lying_validators=(LYING,))
    with MultiHostServer(site, hosts=HOSTS) as server:
        yield Shop(server, site)


@dataclass
class Crawl:
    stats: dict[str, Any]
    feed: list[dict[str, Any]]
    stderr: str


def crawl(tmp_path: Path, shop: Shop, redis_url: str, urls: list[str], run: str, **settings: Any) -> Crawl:
    config = {
        "site_file": str(ROOT / "webcrawl" / "sites" / "demo.toml"),
        "port": shop.server.port,
        "urls": urls,
        "feed": str(tmp_path / f"changes-{run}.jsonl"),
        "stats": str(tmp_path / f"stats-{run}.json"),
        "settings": {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DATA_DIR": str(tmp_path / "data"),
                     **settings},
    }
    config_path = tmp_path / f"config-{run}.json"
    config_path.write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CRAWL, str(config_path)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for bad in ("Traceback", "DeprecationWarning", "ERROR"):
        assert bad not in done.stderr, done.stderr
    feed_path = Path(config["feed"])
    feed = [json.loads(line) for line in feed_path.read_text().splitlines()] if feed_path.exists() else []
    return Crawl(json.loads(Path(config["stats"]).read_text()), feed, done.stderr)


def history(redis_client, url: str):
    return HistoryStore(redis_client, CrawlKeys("demo")).get(url)


def test_noise_and_volatile_fields_are_unchanged_and_every_record_change_is_detected(
        tmp_path, shop, redis_url, redis_client):
    changing = shop.on_host(HONEST, 5, changing=True)
    still = shop.on_host(HONEST, 2, changing=False)
    urls = [shop.product(i) for i in changing + still]
    off = {"WEBCRAWL_CONDITIONAL_ENABLED": False}

    first = crawl(tmp_path, shop, redis_url, urls, "first", **off)
    assert sorted(r["url"] for r in first.feed) == sorted(urls)
    assert {r["change"] for r in first.feed} == {"new"}
    assert set(first.feed[0]) == set(EXPORTED_FIELDS)  # no body, no headers in the feed
    assert first.stats["webcrawl/records/new"] == first.stats["webcrawl/records"] == len(urls)
    assert first.stats["webcrawl/records/new/product"] == len(urls)

    # Same records, new noise: every page's HTML and its volatile field differ, its record does not.
    second = crawl(tmp_path, shop, redis_url, urls, "second", **off)
    assert second.feed == []
    assert second.stats["webcrawl/records/unchanged"] == len(urls)
    assert second.stats["webcrawl/records/dropped_unchanged"] == len(urls)
    assert not any(url in second.stderr for url in urls)  # counted, not logged page by page
    assert "Dropped" not in second.stderr
    page = history(redis_client, urls[0])
    assert page.visits == 1 and page.changes == 0 and page.last_changed is False

    before = shop.site.now()
    shop.jump(3 * DAY)
    after = shop.site.now()
    truly = {shop.product(i) for i in changing + still
             if shop.site.catalog.version(i, after) != shop.site.catalog.version(i, before)}
    assert truly and len(truly) < len(urls)  # the still products never change
    third = crawl(tmp_path, shop, redis_url, urls, "third", **off)
    assert {r["url"] for r in third.feed} == truly
    assert {r["change"] for r in third.feed} == {"changed"}
    assert third.stats["webcrawl/records/changed"] == len(truly)
    assert third.stats.get("webcrawl/records/unchanged", 0) == len(urls) - len(truly)
    for row in third.feed:
        i = shop.site.product_index(row["url"])
        truth = shop.site.catalog.record(i, after)
        assert row["record"]["price"] == truth["price"] and row["record"]["stock"] == str(truth["stock"])
        assert row["content_hash"] == record_hash(row["record"], DEMO_FIELDS, {"served_at"})
    changed_page = history(redis_client, next(iter(truly)))
    assert (changed_page.visits, changed_page.changes, changed_page.last_changed) == (2, 1, True)
    assert changed_page.fetches == 3 and changed_page.cost > 3 * 10_000


def test_volatile_field_churn_alone_is_unchanged_even_when_the_field_is_all_that_differs(
        tmp_path, shop, redis_url):
    # The product page's "served_at" (p.generated) differs on every load; nothing else in the
    # record does. Exporting unchanged records shows the differing volatile values side by side.
    urls = [shop.product(i) for i in shop.on_host(HONEST, 3)]
    settings = {"WEBCRAWL_CONDITIONAL_ENABLED": False, "WEBCRAWL_EXPORT_UNCHANGED": True}
    first = crawl(tmp_path, shop, redis_url, urls, "first", **settings)
    second = crawl(tmp_path, shop, redis_url, urls, "second", **settings)
    old = {r["url"]: r for r in first.feed}
    for row in second.feed:
        assert row["change"] == "unchanged"
        assert row["record"]["served_at"] != old[row["url"]]["record"]["served_at"]
        assert row["content_hash"] == old[row["url"]]["content_hash"]
