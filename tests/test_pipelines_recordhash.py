"""RecordHashPipeline and EventFeedPipeline end to end: the demo shop on loopback hosts (real
HTTP, time frozen until a test moves it), a real redis-server, and real Scrapy crawls in
subprocesses (the site's own spider on chosen pages, the project's scheduler, middlewares and
pipelines; no allocator: the test makes pages due as it would) whose feeds, stats and page
records are read back. Then the pipeline in-process for the branches a crawl rarely takes.

The harness (``Shop``, ``crawl``, ``state``) is shared with test_pipelines_bodies.py,
test_conditional.py and test_body_command.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from email.utils import formatdate
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler

from tests.runtimes import StateView, run, runtime_for
from webcrawl.change import record_hash
from webcrawl.demo.catalog import DAY
from webcrawl.demo.server import Headers, MultiHostServer, Response
from webcrawl.demo.shop import ShopSite
from webcrawl.items import EXPORTED_FIELDS, PageItem
from webcrawl.middlewares.conditional import ConditionalRequestMiddleware
from webcrawl.pipelines.events import EventFeedPipeline
from webcrawl.pipelines.recordhash import RecordHashPipeline, change_age, verification_event
from webcrawl.sites import load_site_file
from webcrawl.sites.schema import Trust, TrustRule
from webcrawl.state.pagestore import hash_bytes

ROOT = Path(__file__).resolve().parents[1]
HOSTS = 5  # www, three catalog shards (honest, ignoring validators, lying), blog
HONEST, IGNORING, LYING = 1, 2, 3  # host indices; product i lives on shard i % 3
DEMO_FIELDS = ("name", "price", "stock", "sku", "description", "category", "served_at")

CRAWL = textwrap.dedent(
    """
    import json, sys
    import scrapy
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.project import get_project_settings
    from webcrawl.sites import load_site_file
    from webcrawl.spiderloader import spider_class_for

    with open(sys.argv[1]) as source:
        config = json.load(source)
    SITE = load_site_file(config["site_file"], {"WEBCRAWL_DEMO_PORT": str(config["port"])})

    class ChangeSpider(spider_class_for(SITE)):
        # The site's own spider on the given pages only: their items, no links, no sitemaps.
        async def start(self):
            for url in config["urls"]:
                self._requested.discard(url)  # a page parsed before may have linked to it
                yield self._page_request(url)

        def parse(self, response, **kwargs):
            for out in super().parse(response, **kwargs):
                if not isinstance(out, scrapy.Request):
                    yield out

        sitemap_request = None  # nor the sitemaps robots.txt names

    settings = get_project_settings()
    settings.setdict({
        "LOG_LEVEL": "INFO", "RETRY_ENABLED": False, "DOWNLOAD_TIMEOUT": 20,
        # No allocator: the test decides which known pages are due (as the allocator would).
        "EXTENSIONS": {}, "WEBCRAWL_BUDGET_ENABLED": False,
        # Every due page ready at once: a run ends when nothing is ready, and host turns one
        # delay apart would leave due pages for the next run.
        "WEBCRAWL_DOMAIN_DELAY_SECONDS": 0,
        "FEEDS": {config["feed"]: {"format": "jsonlines", "overwrite": True}},
        **config["settings"],
    }, priority="cmdline")
    process = CrawlerProcess(settings)
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


def crawl(tmp_path: Path, shop: Shop, redis_url: str, urls: list[str], run: str, *,
          site_file: Path | None = None, **settings: Any) -> Crawl:
    """One run of the demo site's spider (or that of ``site_file``) on ``urls`` (new ones are
    fetched; known ones only when due), with the project's settings and ``settings`` on top.
    The site's allowed hosts are the test shop's (it serves more hosts than the bundled one)."""
    text = (site_file or ROOT / "webcrawl" / "sites" / "demo.toml").read_text()
    hosts = ", ".join(f'"{h}"' for h in shop.server.hosts)
    site_path = tmp_path / f"site-{run}.toml"
    site_path.write_text(re.sub(r"(?m)^allowed_domains = .*$", f"allowed_domains = [{hosts}]", text))
    config = {
        "site_file": str(site_path),
        "port": shop.server.port,
        "urls": urls,
        "feed": str(tmp_path / f"changes-{run}.jsonl"),
        "stats": str(tmp_path / f"stats-{run}.json"),
        "settings": {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DATA_DIR": str(tmp_path / "data"),
                     **settings},
    }
    config_path = tmp_path / f"config-{run}.json"
    config_path.write_text(json.dumps(config))
    script = tmp_path / "crawl_pages.py"  # a file: Scrapy reads its callbacks' source
    script.write_text(CRAWL)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SCRAPY_SETTINGS_MODULE": "webcrawl.settings"}
    done = subprocess.run([sys.executable, str(script), str(config_path)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    for bad in ("Traceback", "DeprecationWarning", "ERROR"):
        assert bad not in done.stderr, done.stderr
    feed_path = Path(config["feed"])
    feed = [json.loads(line) for line in feed_path.read_text().splitlines()] if feed_path.exists() else []
    return Crawl(json.loads(Path(config["stats"]).read_text()), feed, done.stderr)


#: The shop's hostile pages (blog host) as a page type of their own, so the site's spider makes
#: items of them too.
FILES = """
[[page_types]]
name = "file"
url_pattern = '^https?://[^/]+/(files/|legacy/|archive/|empty[.]html)'
tier = "low"
"""


def files_site(folder: Path) -> Path:
    """The demo site file with the hostile pages as page type ``file``."""
    path = folder / "demo-files.toml"
    path.write_text((ROOT / "webcrawl" / "sites" / "demo.toml").read_text() + FILES)
    return path


@pytest.fixture(scope="module")
def state(module_redis) -> Iterator[StateView]:
    """The demo crawl's state as the test sees it (records, the allocator's land operations)."""
    view = StateView(module_redis[0], "demo")
    yield view
    view.close()


@dataclass
class Scenario:
    urls: list[str]
    truly_changed: set[str]
    first: Crawl
    second: Crawl
    third: Crawl
    pages: dict[str, Any]
    truth: dict[str, dict[str, Any]]
    truth_before: dict[str, dict[str, Any]]
    types: dict[int, str]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, module_shop, module_redis, state) -> Scenario:
    """Three crawls of the same product pages, conditional requests off: a first (all new), a
    second with new noise only, a third after the shop's time moved three days (some records
    changed). Before the second and the third the pages are made due; their URLs, yielded again,
    are known to the seen filter."""
    shop, (redis_url, _) = module_shop, module_redis
    tmp = tmp_path_factory.mktemp("recordhash")
    changing, still = shop.on_host(HONEST, 5, changing=True), shop.on_host(HONEST, 2, changing=False)
    urls = [shop.product(i) for i in changing + still]
    off = {"WEBCRAWL_CONDITIONAL_ENABLED": False}
    first = crawl(tmp, shop, redis_url, urls, "first", **off)
    state.make_due(urls)
    second = crawl(tmp, shop, redis_url, urls, "second", **off)
    before = shop.site.now()
    shop.jump(3 * DAY)
    after = shop.site.now()
    truly = {shop.product(i) for i in changing + still
             if shop.site.catalog.version(i, after) != shop.site.catalog.version(i, before)}
    state.make_due(urls)
    third = crawl(tmp, shop, redis_url, urls, "third", **off)
    pages = {u: state.record(u) for u in urls}
    truth = {u: shop.site.catalog.record(shop.site.product_index(u), after) for u in urls}
    truth_before = {u: shop.site.catalog.record(shop.site.product_index(u), before) for u in urls}
    return Scenario(urls, truly, first, second, third, pages, truth, truth_before,
                    state.types.names())


def test_first_fetches_are_new_events_in_the_feed_without_body_or_headers(scenario):
    first, urls = scenario.first, scenario.urls
    assert sorted(r["url"] for r in first.feed) == sorted(urls)
    assert {r["kind"] for r in first.feed} == {"new"}
    assert list(first.feed[0]) == EXPORTED_FIELDS  # the event contract, in order
    assert {r["previous"] is None and r["previous_fetch_at"] is None for r in first.feed} == {True}
    assert first.stats["webcrawl/records/new"] == first.stats["webcrawl/records"] == len(urls)
    assert first.stats["webcrawl/records/new/product"] == len(urls)


def test_known_pages_come_back_as_due_revisits_not_as_new_urls(scenario):
    for later in (scenario.second, scenario.third):
        assert later.stats["scheduler/dequeued/revisit"] == len(scenario.urls)
        assert "scheduler/dequeued/queued" not in later.stats
        assert later.stats["dupefilter/filtered"] == len(scenario.urls)  # yielded again: known
        assert "scheduler/enqueued" not in later.stats


def test_noise_and_volatile_field_churn_are_unchanged(scenario):
    # Every load differs in its HTML noise and in the volatile field "served_at"; no record does.
    assert scenario.second.feed == []
    assert scenario.second.stats["webcrawl/records/unchanged"] == len(scenario.urls)
    # The third crawl's previous records are the second fetch's (its own volatile values).
    old = {r["url"]: r for r in scenario.first.feed}
    for row in scenario.third.feed:
        assert row["previous"]["served_at"] != old[row["url"]]["record"]["served_at"]
        assert "served_at" not in row["changed_fields"]


def test_every_record_change_is_detected_and_only_changes_are_emitted(scenario):
    third, truly, urls = scenario.third, scenario.truly_changed, scenario.urls
    assert truly and len(truly) < len(urls)  # the "still" products never change
    assert {r["url"] for r in third.feed} == truly
    assert {r["kind"] for r in third.feed} == {"changed"}
    assert third.stats["webcrawl/records/changed"] == len(truly)
    assert third.stats["webcrawl/records/unchanged"] == len(urls) - len(truly)
    assert third.stats["webcrawl/records/dropped_unchanged"] == len(urls) - len(truly)
    unchanged = set(urls) - truly
    assert not any(url in third.stderr for url in unchanged)  # counted, not logged page by page
    for row in third.feed:
        truth, before = scenario.truth[row["url"]], scenario.truth_before[row["url"]]
        assert (row["record"]["price"], row["record"]["stock"]) == (truth["price"], str(truth["stock"]))
        assert (row["previous"]["price"], row["previous"]["stock"]) == (before["price"], str(before["stock"]))
        differs = {f for f in ("price", "stock", "description")
                   if str(truth[f]) != str(before[f])}
        assert set(row["changed_fields"]) == differs
        for name, sides in row["changed_fields"].items():
            assert sides == {"previous": row["previous"][name], "current": row["record"][name]}
    assert len({r["event_id"] for r in third.feed}) == len(third.feed)


def test_the_page_record_holds_what_the_revisit_model_needs(scenario):
    row = scenario.third.feed[0]
    changed = scenario.pages[row["url"]]
    assert (changed.visits, changed.changes, changed.last_changed, changed.fetches) == (2, 1, 1, 3)
    assert changed.hash == hash_bytes(record_hash(row["record"], DEMO_FIELDS, {"served_at"}))
    assert changed.first_seen < changed.last_change == changed.last_fetched
    assert (changed.billed, changed.billed_n) == (3.0, 3)  # the demo bills requests: one a fetch
    assert changed.page_history().changes == 1 and scenario.types[changed.type] == "product"
    assert changed.iv == 1e6 and changed.due == pytest.approx(changed.last_fetched + 1e6)
    still = scenario.pages[next(u for u in scenario.urls if u not in scenario.truly_changed)]
    assert (still.visits, still.changes, still.last_changed) == (2, 0, 0)
    assert still.unchanged_seconds == still.seconds > 0


# -- In-process checks of the branches a crawl rarely takes -------------------------------------

URL = "http://a.example/product/1/x"


def load_demo_site():
    return load_site_file(ROOT / "webcrawl" / "sites" / "demo.toml", {"WEBCRAWL_DEMO_PORT": "1"})


@pytest.fixture
def runtime(redis_url):
    runtime = runtime_for(redis_url, {"WEBCRAWL_CONDITIONAL_EARN_AFTER": 1})
    yield runtime
    runtime.close()


def _pipeline(runtime, mode: str = "learn") -> RecordHashPipeline:
    site = SimpleNamespace(page_types=load_demo_site().page_types,
                           trust=Trust(hosts=(("a.example", TrustRule(validators=mode)),)))
    return RecordHashPipeline(runtime, runtime.stats, site=site)


def _item(record: dict[str, Any], **kwargs: Any) -> PageItem:
    return PageItem(url=URL, canonical_url=URL, site="demo", page_type="product", status=200,
                    fetch_time=kwargs.pop("fetch_time", 1000.0), record=record,
                    body=b"<html>" * 10, **kwargs)


def test_other_items_pass_and_the_fetch_cost_goes_into_the_record(runtime):
    pipeline = _pipeline(runtime)
    other = {"not": "a page item"}
    assert run(pipeline.process_item(other)) is other
    item = run(pipeline.process_item(_item({"name": "x"}, fetch={"billed": 360.0})))
    assert item.change == "new" and item.content_hash
    run(pipeline.process_item(_item({"name": "x"}, fetch_time=2000.0)))  # no cost noted: none booked
    record = runtime.pages.get(URL, "a.example")
    assert (record.billed, record.billed_n, record.mean_cost, record.fetches) == (360.0, 1, 360.0, 2)


def test_validators_of_a_whole_answer_replace_the_stored_ones(runtime):
    pipeline = _pipeline(runtime)
    run(pipeline.process_item(_item({"name": "x"}, headers={"ETag": '"v1"', "Last-Modified": "Thu, 01 Jan 2026 00:00:00 GMT"})))
    assert runtime.pages.validators(URL, "a.example") == ('"v1"', "Thu, 01 Jan 2026 00:00:00 GMT")
    run(pipeline.process_item(_item({"name": "x"}, fetch_time=2000.0, headers={"etag": '"v2"'})))
    assert runtime.pages.validators(URL, "a.example") == ('"v2"', None)
    run(pipeline.process_item(_item({"name": "x"}, fetch_time=3000.0)))
    assert runtime.pages.validators(URL, "a.example") == (None, None)  # none sent: none kept


@pytest.mark.parametrize(("fetch", "record", "event", "state"), [
    ({"verify_304": 1500.0}, {"name": "x"}, "confirmed", "trusted"),
    ({"verify_304": 1999.0}, {"name": "y"}, "lied", "distrusted"),
    ({"conditional": True}, {"name": "x"}, "ignored", "learning"),
    ({"conditional": True}, {"name": "y"}, None, "learning"),  # a 200 with a change: no evidence
    ({}, {"name": "x"}, None, "learning"),
])
def test_trust_evidence_from_what_the_downloader_noted(runtime, fetch, record, event, state):
    pipeline = _pipeline(runtime)
    run(pipeline.process_item(_item({"name": "x"})))
    # A page that rarely changes: a change within the second after the 304 is unlikely.
    stats = {"changes": 0, "seconds": 30 * DAY}
    item = run(pipeline.process_item(_item(record, fetch_time=2000.0,
                                           fetch={**fetch, "page_stats": stats})))
    assert item.change == ("unchanged" if record == {"name": "x"} else "changed")
    evidence = {k.rsplit("/", 1)[1] for k in runtime.stats.get_stats() if "/evidence/" in k}
    assert evidence == ({event} if event else set())
    runtime.batch.flush()
    runtime.hosts.forget_validators("a.example")
    assert runtime.hosts.validators("a.example").state == state


def test_a_verification_that_finds_a_later_change_is_no_lie(runtime):
    """The record changed, but after the 304: its Last-Modified is later than the 304, or the
    page changes so often that a change in between was likely. Neither costs the host trust."""
    pipeline = _pipeline(runtime)
    run(pipeline.process_item(_item({"name": "x"})))
    later = {"Last-Modified": "Thu, 01 Jan 2026 00:10:00 GMT"}
    t304 = 1767225600.0  # Thu, 01 Jan 2026 00:00:00 GMT
    item = run(pipeline.process_item(_item({"name": "y"}, fetch_time=t304 + 1, headers=later,
                                           fetch={"verify_304": t304,
                                                  "page_stats": {"changes": 0, "seconds": 1e6}})))
    assert item.change == "changed"
    fast = {"changes": 50, "seconds": 100.0}  # a change every two seconds
    run(pipeline.process_item(_item({"name": "z"}, fetch_time=t304 + 60,
                                    fetch={"verify_304": t304 + 50, "page_stats": fast})))
    assert runtime.stats.get_value("webcrawl/conditional/evidence/inconclusive") == 2
    assert runtime.stats.get_value("webcrawl/conditional/evidence/lied") is None
    runtime.batch.flush()
    assert runtime.hosts.validators("a.example").state == "learning"


@pytest.mark.parametrize(("skew", "stats", "event"), [
    (-3e7, {"changes": 0, "seconds": 1e6}, "lied"),  # server a year behind: still a second apart
    (600.0, {"changes": 50, "seconds": 100.0}, "inconclusive"),  # ahead: still a minute apart
])
def test_the_time_between_a_304_and_its_check_is_read_on_the_servers_clock(runtime, skew, stats, event):
    """The 304's time is its own Date (the server's clock); the check's answer is dated by the
    same clock, so a server clock off ours does not make the two look further apart or closer."""
    pipeline = _pipeline(runtime)
    run(pipeline.process_item(_item({"name": "x"})))
    ours = 1_800_000_000.0  # the crawl's clock when the check's answer came
    t304 = ours + skew - 1.0 if event == "lied" else ours + skew - 60.0
    date = formatdate(t304 + (1.0 if event == "lied" else 60.0), usegmt=True)
    item = run(pipeline.process_item(_item({"name": "y"}, fetch_time=ours, headers={"Date": date},
                                           fetch={"verify_304": t304, "page_stats": stats})))
    assert item.change == "changed"
    assert runtime.stats.get_value(f"webcrawl/conditional/evidence/{event}") == 1


@pytest.mark.parametrize(("changed", "last_modified", "stats", "gap", "event"), [
    (False, None, None, 1e6, "confirmed"),
    (True, 2000.0, {"changes": 0, "seconds": 1e9}, 1.0, "inconclusive"),  # modified after the 304
    (True, 1000.0, {"changes": 0, "seconds": 1e9}, 1.0, "lied"),  # modified before it
    (True, None, {"changes": 0, "seconds": 1e9}, 1.0, "lied"),  # rare changes, a second apart
    (True, None, {"changes": 0, "seconds": 1e9}, 1e9, "inconclusive"),  # ... years apart
    (True, None, {"changes": 99, "seconds": 100.0}, 1.0, "inconclusive"),  # frequent changes
    (True, None, None, 1.0, "inconclusive"),  # no history: any change is possible
])
def test_verification_event(changed, last_modified, stats, gap, event):
    assert verification_event(changed, verify_304=1500.0, fetch_time=1500.0 + gap,
                              last_modified=last_modified, page_stats=stats) == event


def test_a_site_rule_overrides_learning(runtime):
    pipeline = _pipeline(runtime, mode="always")
    run(pipeline.process_item(_item({"name": "x"})))
    run(pipeline.process_item(_item({"name": "y"}, fetch_time=2000.0, fetch={"verify_304": 1999.0})))
    assert not any("/evidence/" in k for k in runtime.stats.get_stats())


def test_exact_change_age_comes_from_the_servers_own_clock(runtime):
    assert change_age({"Date": "Thu, 01 Jan 2026 01:00:00 GMT",
                       "last-modified": "Thu, 01 Jan 2026 00:00:00 GMT"}) == 3600.0
    assert change_age({"Date": "Thu, 01 Jan 2026 00:00:00 GMT",
                       "Last-Modified": "Thu, 01 Jan 2026 01:00:00 GMT"}) is None  # from the future
    assert change_age({"Date": "garbage", "Last-Modified": "Thu, 01 Jan 2026 00:00:00 GMT"}) is None
    assert change_age({}) is None
    pipeline = _pipeline(runtime, mode="always")
    run(pipeline.process_item(_item({"name": "x"})))
    headers = {"Date": "Thu, 01 Jan 2026 01:00:00 GMT", "Last-Modified": "Thu, 01 Jan 2026 00:50:00 GMT"}
    run(pipeline.process_item(_item({"name": "y"}, fetch_time=5000.0, headers=headers)))
    page = runtime.pages.get(URL, "a.example")
    assert (page.exact_changes, page.exact_seconds, page.bins) == (1, 600.0, [])


def test_many_items_in_one_turn_share_one_landing(runtime):
    """Items of one reactor turn wait for one batch: one script call for all of them."""
    import asyncio

    pipeline = _pipeline(runtime)
    items = [PageItem(url=f"http://a.example/product/{i}/x", canonical_url=f"http://a.example/product/{i}/x",
                      site="demo", page_type="product", status=200, fetch_time=1000.0,
                      record={"name": str(i)}) for i in range(20)]

    async def all_items() -> list[Any]:
        return await asyncio.gather(*(pipeline.process_item(i) for i in items))

    flushes = runtime.batch.flushes
    done = run(all_items())
    assert [i.change for i in done] == ["new"] * 20 and runtime.batch.flushes == flushes + 1
    assert runtime.pages.count() == 20


@pytest.mark.parametrize(("settings", "error"), [
    ({"WEBCRAWL_CONDITIONAL_VERIFY_SHARE": 2}, "WEBCRAWL_CONDITIONAL_"),
    ({"WEBCRAWL_CONDITIONAL_ENABLED": False}, "WEBCRAWL_CONDITIONAL_ENABLED"),
])
def test_components_from_crawler(redis_url, settings, error):
    runtime = runtime_for(redis_url, settings)
    with pytest.raises((ValueError, NotConfigured), match=error):
        build_from_crawler(ConditionalRequestMiddleware, runtime.crawler)
    runtime.close()


def test_components_build_from_a_crawler_without_the_projects_settings(redis_url, tmp_path):
    runtime = runtime_for(redis_url, {"WEBCRAWL_DATA_DIR": str(tmp_path)})
    crawler = runtime.crawler
    mw = build_from_crawler(ConditionalRequestMiddleware, crawler)
    record = build_from_crawler(RecordHashPipeline, crawler)
    build_from_crawler(EventFeedPipeline, crawler)
    assert mw.runtime is record.runtime is runtime  # one runtime per crawler
    assert record.bodies is not None and record.bodies.change == "record"
    assert record.bodies.max_bytes == 8 * 1024 * 1024
    assert mw.policy.verify_share == 0.05 and record.exact_changes
    runtime.close()


def test_the_whole_project_stack_from_the_command_line_with_dash_o(tmp_path, module_shop, redis_url):
    """``scrapy runspider ... -O changes.jsonl`` in the project: the Redis scheduler (which carries
    304 verifications as JSON requests), robots.txt and SSRF middlewares, and these components.
    Between the two runs the pages are made due, as the allocator would."""
    shop = module_shop
    spider = tmp_path / "spider.py"
    urls = [shop.product(i) for i in shop.on_host(HONEST, 3, changing=False)]
    head = CRAWL.split("settings = get_project_settings()", 1)[0].replace(
        'with open(sys.argv[1]) as source:\n    config = json.load(source)\n',
        f"config = {json.dumps({'port': shop.server.port, 'urls': urls, 'site_file': str(ROOT / 'webcrawl' / 'sites' / 'demo.toml')})}\n")
    spider.write_text(head)
    settings = {
        "WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DATA_DIR": str(tmp_path / "data"),
        # The change-detection stack alone: the allocator would choose its own revisits of the
        # same pages (tested with it in tests/test_allocator*.py).
        "EXTENSIONS": json.dumps({}), "WEBCRAWL_BUDGET_ENABLED": "False", "LOG_LEVEL": "INFO",
        "WEBCRAWL_DOMAIN_DELAY_SECONDS": 0,
    }
    args = [a for k, v in settings.items() for a in ("-s", f"{k}={v}")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    feeds = []
    view = StateView(redis_url, "demo")
    for number in ("1", "2"):
        out = tmp_path / f"changes-{number}.jsonl"
        done = subprocess.run([sys.executable, "-m", "scrapy", "runspider", str(spider), "-O", str(out), *args],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        feeds.append([json.loads(line) for line in out.read_text().splitlines()])
        view.make_due(urls)
    view.close()
    assert [r["kind"] for r in feeds[0]] == ["new"] * 3
    assert feeds[1] == []  # unchanged: 304s, each verified (a learning host) through the scheduler
    assert "'webcrawl/conditional/verification': 3" in done.stderr
    assert "'webcrawl/conditional/evidence/confirmed': 3" in done.stderr


def test_feeds_get_change_events_only():
    """The last pipeline hands on the change event an observation recorded, as the feed's item,
    and drops everything else: unchanged records, a first 404, listing summaries."""
    from scrapy.exceptions import DropItem
    from scrapy.statscollectors import MemoryStatsCollector
    from scrapy.utils.test import get_crawler

    from webcrawl.items import ChangeEvent, ListingItem

    feed = EventFeedPipeline(MemoryStatsCollector(get_crawler(Spider)))
    page = {"url": "http://a/p", "canonical_url": "http://a/p", "site": "s", "page_type": "product",
            "status": 200, "fetch_time": 1.0}
    event = {name: None for name in EXPORTED_FIELDS} | {"kind": "changed"}
    out = feed.process_item(PageItem(**page, change="changed", event=event))
    assert isinstance(out, ChangeEvent) and out == event and out.verdict == "changed"
    for item in (PageItem(**page, change="unchanged"), PageItem(**page, change="suspect"),
                 ListingItem(url="http://a/list", item_url="http://a/p", summary={"price": "1"},
                             site="s", fetch_time=1.0)):
        with pytest.raises(DropItem):
            feed.process_item(item)
