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
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from webcrawl.change import FetchNote, FetchNotes, TrustPolicy, record_hash
from webcrawl.clock import ManualClock
from webcrawl.demo.server import Headers, MultiHostServer, Response
from webcrawl.demo.catalog import DAY
from webcrawl.demo.shop import ShopSite
from webcrawl.items import EXPORTED_FIELDS, PageItem
from webcrawl.middlewares.conditional import ChangeContext, ConditionalRequestMiddleware
from webcrawl.parse import Canonicalizer
from webcrawl.pipelines.bodystore import BodyStorePipeline
from webcrawl.pipelines.recordhash import (
    DropUnchangedPipeline,
    RecordHashPipeline,
    change_age,
)
from webcrawl.sites import load_site_file
from webcrawl.sites.schema import Trust, TrustRule
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.trust import TrustStore

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
            for key, count in result.counts.items():
                self.crawler.stats.inc_value("test/parse/" + key, count)
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


def start_shop() -> Shop:
    """A started shop; the caller stops ``shop.server``."""
    # time_scale 1e-9: a second of real time is a nanosecond of shop time, so nothing changes
    # unless a test calls jump(); noise (timestamps' digits, tokens, ads) still differs per load.
    site = EmptyPageShop(seed=3, time_scale=1e-9, large_page_kb=3072, min_change_interval=3600.0,
                         max_change_interval=2 * DAY, ignore_validators=(IGNORING,),
                         lying_validators=(LYING,))
    return Shop(MultiHostServer(site, hosts=HOSTS).start(), site)


@pytest.fixture(scope="module")
def module_shop() -> Iterator[Shop]:
    """One shop for a module whose tests read one scenario's crawls."""
    shop = start_shop()
    yield shop
    shop.server.stop()


@pytest.fixture(scope="module")
def module_redis(redis_server) -> Iterator[Any]:
    """(url, client) of the test redis-server, emptied once for a module's scenario. Tests that
    use the function-scoped ``redis_url`` fixture empty it again: read what a scenario left in
    Redis inside the scenario fixture."""
    client = redis_server.client()
    client.flushall()
    yield redis_server.url, client
    client.close()


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


@dataclass
class Scenario:
    urls: list[str]
    truly_changed: set[str]
    first: Crawl
    second: Crawl
    third: Crawl
    pages: dict[str, Any]
    truth: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, module_shop, module_redis) -> Scenario:
    """Three crawls of the same product pages, conditional requests off: a first, a second with
    new noise only (unchanged records exported too, to compare volatile values), a third after
    the shop's time moved three days (some records changed)."""
    shop, (redis_url, client) = module_shop, module_redis
    tmp = tmp_path_factory.mktemp("recordhash")
    changing, still = shop.on_host(HONEST, 5, changing=True), shop.on_host(HONEST, 2, changing=False)
    urls = [shop.product(i) for i in changing + still]
    off = {"WEBCRAWL_CONDITIONAL_ENABLED": False}
    first = crawl(tmp, shop, redis_url, urls, "first", **off)
    second = crawl(tmp, shop, redis_url, urls, "second", WEBCRAWL_EXPORT_UNCHANGED=True, **off)
    before = shop.site.now()
    shop.jump(3 * DAY)
    after = shop.site.now()
    truly = {shop.product(i) for i in changing + still
             if shop.site.catalog.version(i, after) != shop.site.catalog.version(i, before)}
    third = crawl(tmp, shop, redis_url, urls, "third", **off)
    pages = {u: history(client, u) for u in urls}
    truth = {u: shop.site.catalog.record(shop.site.product_index(u), after) for u in urls}
    return Scenario(urls, truly, first, second, third, pages, truth)


def test_first_fetches_are_new_and_reach_the_feed_without_body_or_headers(scenario):
    first, urls = scenario.first, scenario.urls
    assert sorted(r["url"] for r in first.feed) == sorted(urls)
    assert {r["change"] for r in first.feed} == {"new"}
    assert set(first.feed[0]) == set(EXPORTED_FIELDS)
    assert first.stats["webcrawl/records/new"] == first.stats["webcrawl/records"] == len(urls)
    assert first.stats["webcrawl/records/new/product"] == len(urls)


def test_noise_and_volatile_field_churn_are_unchanged(scenario):
    # Every load differs in its HTML noise and in the volatile field "served_at"; no record does.
    old = {r["url"]: r for r in scenario.first.feed}
    assert len(scenario.second.feed) == len(scenario.urls)
    for row in scenario.second.feed:
        assert row["change"] == "unchanged"
        assert row["record"]["served_at"] != old[row["url"]]["record"]["served_at"]
        assert row["content_hash"] == old[row["url"]]["content_hash"]
    assert scenario.second.stats["webcrawl/records/unchanged"] == len(scenario.urls)


def test_every_record_change_is_detected_and_only_changes_are_emitted(scenario):
    third, truly, urls = scenario.third, scenario.truly_changed, scenario.urls
    assert truly and len(truly) < len(urls)  # the "still" products never change
    assert {r["url"] for r in third.feed} == truly
    assert {r["change"] for r in third.feed} == {"changed"}
    assert third.stats["webcrawl/records/changed"] == len(truly)
    assert third.stats["webcrawl/records/unchanged"] == len(urls) - len(truly)
    assert third.stats["webcrawl/records/dropped_unchanged"] == len(urls) - len(truly)
    unchanged = set(urls) - truly
    assert not any(url in third.stderr for url in unchanged)  # counted, not logged page by page
    for row in third.feed:
        truth = scenario.truth[row["url"]]
        assert (row["record"]["price"], row["record"]["stock"]) == (truth["price"], str(truth["stock"]))
        assert row["content_hash"] == record_hash(row["record"], DEMO_FIELDS, {"served_at"})


def test_the_page_history_holds_what_the_revisit_model_needs(scenario):
    row = scenario.third.feed[0]
    changed = scenario.pages[row["url"]]
    assert (changed.visits, changed.changes, changed.last_changed, changed.fetches) == (2, 1, True, 3)
    assert changed.hash == row["content_hash"]
    assert changed.first_seen < changed.last_change == changed.last_fetched
    assert changed.cost > 3 * 10_000  # three whole product pages
    assert changed.page_history().changes == 1 and changed.page_type == "product"
    still = scenario.pages[next(u for u in scenario.urls if u not in scenario.truly_changed)]
    assert (still.visits, still.changes, still.last_changed) == (2, 0, False)
    assert still.unchanged_seconds == still.seconds > 0


# -- In-process checks of the branches a crawl rarely takes -------------------------------------


def _pipeline(redis_client, mode: str = "learn"):
    keys = CrawlKeys("unit")
    context = ChangeContext(HistoryStore(redis_client, keys),
                            TrustStore(redis_client, keys, TrustPolicy(earn_after=1), ManualClock()),
                            FetchNotes(), Canonicalizer())
    site = load_demo_site()
    site = SimpleNamespace(page_types=site.page_types,
                           trust=Trust(hosts=(("a.example", TrustRule(validators=mode)),)))
    return RecordHashPipeline(context, MemoryStatsCollector(get_crawler()), site=site)


def load_demo_site():
    return load_site_file(ROOT / "webcrawl" / "sites" / "demo.toml", {"WEBCRAWL_DEMO_PORT": "1"})


def _item(record: dict[str, Any], **kwargs: Any):
    url = "http://a.example/product/1/x"
    return PageItem(url=url, canonical_url=url, site="demo", page_type="product", status=200,
                    fetch_time=kwargs.pop("fetch_time", 1000.0), record=record, body=b"<html>" * 10, **kwargs)


def test_other_items_pass_and_a_missing_fetch_note_estimates_the_cost(redis_client, redis_url):
    pipeline = _pipeline(redis_client)
    other = {"not": "a page item"}
    assert pipeline.process_item(other) is other
    item = pipeline.process_item(_item({"name": "x", "price": "1"}))
    assert item.change == "new" and pipeline.stats.get_value("webcrawl/records/no_fetch_note") == 1
    assert pipeline.context.history.get(item.canonical_url).cost == 60 + 300


@pytest.mark.parametrize(("note", "record", "event", "state"), [
    ({"verifies_304": True}, {"name": "x"}, "confirmed", "trusted"),
    ({"verifies_304": True}, {"name": "y"}, "lied", "distrusted"),
    ({"conditional": True}, {"name": "x"}, "ignored", "learning"),
    ({"conditional": True}, {"name": "y"}, None, "learning"),  # a 200 with a change: no evidence
    ({}, {"name": "x"}, None, "learning"),
])
def test_trust_evidence_from_fetch_notes(redis_client, redis_url, note, record, event, state):

    pipeline = _pipeline(redis_client)
    pipeline.process_item(_item({"name": "x"}))
    pipeline.context.notes.put("http://a.example/product/1/x", FetchNote(500, "a.example", **note))
    item = pipeline.process_item(_item(record, fetch_time=2000.0))
    assert item.change == ("unchanged" if record == {"name": "x"} else "changed")
    evidence = {k.rsplit("/", 1)[1] for k in pipeline.stats.get_stats() if "/evidence/" in k}
    assert evidence == ({event} if event else set())
    assert pipeline.context.trust.get("a.example").state == state


def test_a_site_rule_overrides_learning(redis_client, redis_url):

    pipeline = _pipeline(redis_client, mode="always")
    pipeline.process_item(_item({"name": "x"}))
    pipeline.context.notes.put("http://a.example/product/1/x", FetchNote(500, "a.example", verifies_304=True))
    pipeline.process_item(_item({"name": "y"}, fetch_time=2000.0))
    assert not any("/evidence/" in k for k in pipeline.stats.get_stats())


def test_exact_change_age_comes_from_the_servers_own_clock(redis_client, redis_url):

    assert change_age({"Date": "Thu, 01 Jan 2026 01:00:00 GMT",
                       "last-modified": "Thu, 01 Jan 2026 00:00:00 GMT"}) == 3600.0
    assert change_age({"Date": "Thu, 01 Jan 2026 00:00:00 GMT",
                       "Last-Modified": "Thu, 01 Jan 2026 01:00:00 GMT"}) is None  # from the future
    assert change_age({"Date": "garbage", "Last-Modified": "Thu, 01 Jan 2026 00:00:00 GMT"}) is None
    assert change_age({}) is None
    pipeline = _pipeline(redis_client, mode="always")
    pipeline.process_item(_item({"name": "x"}))
    headers = {"Date": "Thu, 01 Jan 2026 01:00:00 GMT", "Last-Modified": "Thu, 01 Jan 2026 00:50:00 GMT"}
    pipeline.process_item(_item({"name": "y"}, fetch_time=5000.0, headers=headers))
    page = pipeline.context.history.get("http://a.example/product/1/x")
    assert (page.exact_changes, page.exact_seconds) == (1, 600.0)


@pytest.mark.parametrize(("settings", "error"), [
    ({"WEBCRAWL_CONDITIONAL_VERIFY_SHARE": 2}, "WEBCRAWL_CONDITIONAL_"),
    ({"WEBCRAWL_CONDITIONAL_ENABLED": False}, "WEBCRAWL_CONDITIONAL_ENABLED"),
])
def test_components_from_crawler(redis_url, settings, error):
    crawler = get_crawler(Spider, {"WEBCRAWL_REDIS_URL": redis_url, **settings})
    crawler.spider = crawler._create_spider("unit")
    with pytest.raises((ValueError, NotConfigured), match=error):
        build_from_crawler(ConditionalRequestMiddleware, crawler)


def test_components_build_from_a_crawler_without_the_projects_settings(redis_url, tmp_path):
    crawler = get_crawler(Spider, {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DATA_DIR": str(tmp_path)})
    crawler.spider = crawler._create_spider("unit")
    mw = build_from_crawler(ConditionalRequestMiddleware, crawler)
    record = build_from_crawler(RecordHashPipeline, crawler)
    store = build_from_crawler(BodyStorePipeline, crawler)
    build_from_crawler(DropUnchangedPipeline, crawler)
    assert mw.context is record.context and store.history is record.context.history
    assert store.change == "record" and store.max_bytes == 8 * 1024 * 1024
    assert mw.context.trust.policy.verify_share == 0.05


def test_the_whole_project_stack_from_the_command_line_with_dash_o(tmp_path, module_shop, redis_url):
    """``scrapy runspider ... -O changes.jsonl`` in the project: the Redis scheduler (which carries
    304 verifications as JSON requests), robots.txt and SSRF middlewares, and these components."""
    shop = module_shop
    spider = tmp_path / "spider.py"
    source = CRAWL.split("settings = {", 1)[0].replace(
        'with open(sys.argv[1]) as source:\n    config = json.load(source)\n',
        f"config = {json.dumps({'site_file': str(ROOT / 'webcrawl' / 'sites' / 'demo.toml'), 'port': shop.server.port, 'urls': [shop.product(i) for i in shop.on_host(HONEST, 3, changing=False)]})}\n")
    spider.write_text(source)
    settings = {
        "WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DATA_DIR": str(tmp_path / "data"),
        "WEBCRAWL_DOMAIN_DELAY_SECONDS": "0.01", "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8",
        "ITEM_PIPELINES": json.dumps({"webcrawl.pipelines.recordhash.RecordHashPipeline": 300,
                                      "webcrawl.pipelines.bodystore.BodyStorePipeline": 400,
                                      "webcrawl.pipelines.recordhash.DropUnchangedPipeline": 900}),
        "DOWNLOADER_MIDDLEWARES": json.dumps({
            "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
            "webcrawl.middlewares.ssrf.SSRFGuardMiddleware": 45,
            "webcrawl.middlewares.robots.RobotsMiddleware": 100,
            "webcrawl.middlewares.conditional.ConditionalRequestMiddleware": 650}),
        "FEED_EXPORT_FIELDS": json.dumps(EXPORTED_FIELDS), "LOG_LEVEL": "INFO",
        # The change-detection stack alone: the cycle planner would add its own revisits of the
        # same pages (tested in tests/test_planner*.py).
        "EXTENSIONS": json.dumps({}), "SPIDER_MIDDLEWARES": json.dumps({}),
    }
    args = [a for k, v in settings.items() for a in ("-s", f"{k}={v}")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    feeds = []
    for run in ("1", "2"):
        out = tmp_path / f"changes-{run}.jsonl"
        done = subprocess.run([sys.executable, "-m", "scrapy", "runspider", str(spider), "-O", str(out), *args],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        feeds.append([json.loads(line) for line in out.read_text().splitlines()])
    assert [r["change"] for r in feeds[0]] == ["new"] * 3
    assert feeds[1] == []  # unchanged: 304s, each verified (a learning host) through the scheduler
    assert "'webcrawl/conditional/verification': 3" in done.stderr
    assert "'webcrawl/conditional/evidence/confirmed': 3" in done.stderr


def test_feeds_get_new_and_changed_records_only():
    """The last pipeline drops unchanged records and listing summaries (change detectors, whose
    partial rows would otherwise reach -O feeds); new and changed records pass."""
    from scrapy.exceptions import DropItem

    from webcrawl.items import ListingItem, PageItem

    drop = DropUnchangedPipeline(MemoryStatsCollector(get_crawler(Spider)))
    page = {"url": "http://a/p", "canonical_url": "http://a/p", "site": "s", "page_type": "product",
            "status": 200, "fetch_time": 1.0}
    for change in ("new", "changed"):
        item = PageItem(**page, change=change)
        assert drop.process_item(item) is item
    for item in (PageItem(**page, change="unchanged"),
                 ListingItem(url="http://a/list", item_url="http://a/p", summary={"price": "1"},
                             site="s", fetch_time=1.0)):
        with pytest.raises(DropItem):
            drop.process_item(item)
