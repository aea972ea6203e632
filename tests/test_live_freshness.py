"""The live loop, deterministically: one continuous ``scrapy crawl`` of the demo shop while its
products change and new ones are born, judged from the shop's own request log and its truth
(the shop's model, :attr:`ServerProcess.site`).

The crawl must spend all along (every window of the run has fetches) and within its budget
rate, never come closer to a host than its delay, never fetch a page in a loop, and find the
products that only a sitemap leads to (not linked from the seed, with ``max_depth = 1``) and
those born during the run. Each check holds or fails whatever the machine's load: a slower
machine fetches less, never sooner, and the checks are bounds sized for it.

How well the learned revisit policy does against a uniform one is a measurement, not a
behaviour: ``./run bench liveweb --policies learned,uniform`` (bench/bench_liveweb.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.crawls import finish, gaps_by_host, pages, start_crawl, stats_of
from webcrawl.demo.lifecycle import Lifecycle
from webcrawl.demo.serve import start_server_process
from webcrawl.demo.server import LogEntry
from webcrawl.extensions.allocator import BUCKET_SECONDS

SPIDER = "liveshop"
HOSTS = 4  # www, two catalog shards, blog
PRODUCTS = 60
SCALE = 600.0  # simulated seconds per real second: products change every few seconds
RUN = 30.0  # seconds of crawl (the site file's stop_after_seconds)
CYCLE = 10.0
RATE = 6.0  # requests per second the budget pays for
DELAY = 0.25  # the site's politeness delay per host
BIRTHS = (6.0, 12.0)  # real seconds after the shop starts between which new products are born
WINDOW = 5.0  # every window of the run this long has fetches
FOUND_WITHIN = 12.0  # a product born (or listed) this long before the end must have been fetched

SITE = r"""
name = "%(name)s"
objective = "freshness"
seeds = ["http://127.0.0.2:${WEBCRAWL_DEMO_PORT}/"]
sitemaps = ["http://127.0.0.2:${WEBCRAWL_DEMO_PORT}/sitemap.xml",
            "http://127.0.0.3:${WEBCRAWL_DEMO_PORT}/sitemap.xml",
            "http://127.0.0.4:${WEBCRAWL_DEMO_PORT}/sitemap.xml"]
allowed_domains = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
allowed_private_networks = ["127.0.0.0/8"]

[politeness]
user_agent = "webcrawl-test/0.1 (+https://example.org/webcrawl-test; test@example.org)"
min_delay_seconds = %(delay)s

[budget]
billing = "requests"
amount_per_cycle = %(budget)s
cycle_seconds = %(cycle)s
continuous = true
stop_after_seconds = %(run)s

[limits]
max_depth = 1   # the seed's links only: what the seed does not link, a sitemap must lead to
denied_url_patterns = ['/(cart|search)(\?|$)', '/calendar/', '/archive/', '/files/', '/legacy/', '/blog/']

[[page_types]]
name = "product"
url_pattern = '^https?://[^/]+/product/\d+/[a-z0-9-]+'
tier = "high"
volatile = ["served_at"]

[page_types.fields]
name = "article.product h1.name"
price = "article.product span.price"
stock = "article.product span.stock"
served_at = "p.generated"

[[page_types]]
name = "category"
url_pattern = '^https?://[^/]+/category/[a-z0-9-]+/'
tier = "normal"

[page_types.fields]
title = "h1.category"

[[page_types]]
name = "hub"
url_pattern = '^https?://[^/]+/$'
tier = "low"
"""


@dataclass
class LiveRun:
    """What the crawl did (the shop's request log while it ran) and what the shop held."""

    log: list[LogEntry]  # requests between the crawl's start and its end, in arrival order
    start: float  # wall time of the crawl's first request
    end: float  # wall time of its last one
    stats: dict[str, Any]
    crawl_log: str
    exit_status: int
    born: dict[int, float]  # product -> wall time of its birth
    linked_from_seed: set[int]  # products the seed page links, at the start or at the end
    listed: set[int]  # products listed at the end
    product_paths: dict[str, int]  # product page path -> product


def linked_products(html: bytes) -> set[int]:
    return {int(i) for i in re.findall(rb"/product/(\d+)/", html)}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, redis_server: Any) -> Iterator[LiveRun]:
    folder = tmp_path_factory.mktemp("live")
    redis_server.client().flushall()
    lifecycle = Lifecycle(start=BIRTHS[0] * SCALE, span=(BIRTHS[1] - BIRTHS[0]) * SCALE,
                          birth_share=0.15, death_share=0.0, move_share=0.0, temp_share=0.0)
    (folder / "sites").mkdir()
    (folder / "sites" / f"{SPIDER}.toml").write_text(SITE % {
        "name": SPIDER, "delay": DELAY, "budget": RATE * CYCLE, "cycle": CYCLE, "run": RUN})
    with start_server_process("shop", HOSTS, folder / "server.log", seed=7, products=PRODUCTS,
                              categories=3, blog_posts=0, time_scale=SCALE,
                              min_change_interval=600.0, max_change_interval=36_000.0,
                              lifecycle=lifecycle) as server:
        site = server.site  # the shop's truth, on the same clock
        www = server.hosts[0]
        linked = linked_products(site.respond(www, "/", {})[2])
        settings = {"WEBCRAWL_REDIS_URL": redis_server.url, "WEBCRAWL_CRAWL_NAME": "live",
                    "WEBCRAWL_SITES_DIR": str(folder / "sites"), "WEBCRAWL_DEMO_PORT": server.port,
                    "WEBCRAWL_DATA_DIR": str(folder / "data"), "WEBCRAWL_PLANNER_SEED": 1,
                    "LOG_LEVEL": "INFO"}
        process = start_crawl(SPIDER, settings, folder)
        status = finish(process, RUN + 90)
        linked |= linked_products(site.respond(www, "/", {})[2])
        log = sorted(server.read_log(), key=lambda e: e.mono)
        now = site.now()
        catalog = site.catalog
        born = {i: site.clock.wall(fate.start) for i in range(len(catalog))
                if (fate := catalog.fate(i)) is not None and fate.kind == "birth"}
        listed = {i for i in range(len(catalog)) if catalog.listed(i, now)}
        product_paths = {"/" + site.product_url(i).split("/", 3)[3]: i for i in range(len(catalog))}
    text = (folder / "crawl.log").read_text()
    yield LiveRun(log, log[0].wall, log[-1].wall, stats_of(text), text, status, born, linked,
                  listed, product_paths)


def test_the_crawl_runs_its_time_and_ends_cleanly(run: LiveRun) -> None:
    assert run.exit_status == 0, run.crawl_log[-3000:]
    assert "Traceback" not in run.crawl_log, run.crawl_log[-3000:]
    assert run.stats.get("finish_reason") == "stop_after_seconds", run.stats
    assert run.stats.get("log_count/ERROR", 0) == 0, run.crawl_log[-3000:]
    assert run.stats.get("webcrawl/cycles/started", 0) >= RUN // CYCLE - 1, "a cycle per CYCLE s"


def test_it_spends_all_along_and_within_its_budget_rate(run: LiveRun) -> None:
    """No idle stall: every window of the run has fetches. And never more than the budget rate
    over the run, plus what the spend bucket holds and what can be in flight (two connections
    per host): a bound a slow machine only stays further under."""
    fetches = [e.wall for e in pages(run.log)]
    empty = []
    t = run.start
    while t + WINDOW <= run.end:
        if not any(t <= w < t + WINDOW for w in fetches):
            empty.append(round(t - run.start, 1))
        t += WINDOW
    assert not empty, f"windows of {WINDOW:g} s with no fetch, starting at {empty} s"
    billed = len([e for e in run.log if e.status < 500 and e.status != 429])
    bound = RATE * (run.end - run.start) + RATE * BUCKET_SECONDS + 2 * HOSTS
    assert billed <= bound, f"{billed} requests in {run.end - run.start:.1f} s at {RATE:g}/s"


def test_no_host_is_approached_closer_than_its_delay(run: LiveRun) -> None:
    short = {host: sorted(g for g in gaps if g < DELAY)
             for host, gaps in gaps_by_host(run.log).items()}
    assert not any(short.values()), f"gaps under {DELAY} s: {short}"


def test_no_page_is_fetched_in_a_loop(run: LiveRun) -> None:
    """A fetch that lands no observation (a 304 sent on to its verification, an error) must not
    bring its page back at every turn of its host: within any 1.5 s, at most three requests for
    a page (its fetch, the verification of a 304, a retry)."""
    span, most = 1.5, 3
    times: dict[tuple[str, str], list[float]] = {}
    for e in pages(run.log):
        times.setdefault((e.host, e.path), []).append(e.mono)
    loops = {page: [round(t - ts[0], 2) for t in ts] for page, ts in times.items()
             if any(ts[i + most] - ts[i] < span for i in range(len(ts) - most))}
    assert not loops, f"pages requested more than {most} times within {span} s: {loops}"


def test_pages_only_a_sitemap_leads_to_and_pages_born_during_the_run_are_found(
        run: LiveRun) -> None:
    fetched = {run.product_paths[e.path]: e.wall for e in reversed(pages(run.log))
               if e.status == 200 and e.path in run.product_paths}  # product -> first fetch
    sitemap_only = run.listed - run.linked_from_seed - set(run.born)
    assert len(sitemap_only) >= 10, "the shop's seed page links most products: nothing to test"
    missing = sorted(sitemap_only - set(fetched))
    assert not missing, f"products only a sitemap leads to, never fetched: {missing}"
    due = {i: t for i, t in run.born.items() if t <= run.end - FOUND_WITHIN}
    assert len(due) >= 3, f"too few births in the run to say anything: {run.born}"
    late = {i: round(t - run.start, 1) for i, t in due.items()
            if i not in fetched or fetched[i] < t}
    assert not late, f"products born during the run (s into it) never fetched after: {late}"
