"""The allocator (webcrawl.extensions.allocator) in real ``scrapy crawl`` processes over the demo
shop, with a real redis-server: one run is one cycle (ending when its budget is spent, and
fetching the revisits due within its window), processes started together share one cycle, and a
continuous crawl rolls cycles every cycle length until the site file's stop condition."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scrapy.utils.test import get_crawler

from tests import _shopcrawl as shop
from tests._scheduler_harness import settings_for
from tests.crawls import finish, pages, start_crawl, stats_of
from tests.test_priority import PrioSpider
from webcrawl.demo.serve import ServerProcess, start_server_process
from webcrawl.extensions.allocator import Allocator
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.client import connect
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.ledger import LedgerStore
from webcrawl.state.pagestore import observe_op


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = start_server_process("shop", 3, tmp_path / "server.log", seed=3, time_scale=600.0,
                                   products=24, categories=2, blog_posts=0)
    yield process
    process.stop()


def test_one_run_is_one_cycle_ending_when_its_budget_is_spent(
        server: ServerProcess, redis_url: str, tmp_path: Path) -> None:
    settings = shop.settings(redis_url, tmp_path, server.port, "runs")
    shop.write_site(tmp_path, budget=6)
    first = shop.run(tmp_path, settings, "run1.log")
    assert first["finish_reason"] == "cycle_budget_spent", "new URLs waited, the budget was spent"
    assert first["webcrawl/cycles/started"] == 1
    [one] = shop.cycles(redis_url, "runs")
    assert 6 <= one["booked"] <= 6 + 3, "more than the budget and what was in flight on 3 hosts"
    assert one["waiting"] > 0, "what the budget could not pay for waits for the next run"

    shop.write_site(tmp_path, budget=300)
    second = shop.run(tmp_path, settings, "run2.log")
    assert second["finish_reason"] == "finished"
    assert len({(e.host, e.path) for e in pages(server.read_log())}) >= 26  # index, categories, products
    ledger = shop.cycles(redis_url, "runs")
    assert len(ledger) == 2, "one cycle per run"
    assert [c["budget"] for c in ledger] == [6, 300] and ledger[0]["started"] < ledger[1]["started"]
    assert ledger[1]["booked"] <= 300 and ledger[1]["waiting"] == 0


def test_a_one_run_cycle_fetches_the_revisits_due_within_its_window(
        server: ServerProcess, redis_url: str, tmp_path: Path) -> None:
    settings = shop.settings(redis_url, tmp_path, server.port, "window")
    shop.write_site(tmp_path, budget=300)
    assert shop.run(tmp_path, settings, "discover.log")["finish_reason"] == "finished"
    known = {(e.host, e.path) for e in pages(server.read_log())}
    # A one-run cycle stands for an hour: the revisits due within it are fetched in this run.
    shop.write_site(tmp_path, budget=40)
    seen = len(server.read_log())
    stats = shop.run(tmp_path, settings, "revisit.log")
    assert int(stats.get("scheduler/dequeued/revisit", 0)) >= 10, stats
    fetched = {(e.host, e.path) for e in pages(server.read_log()[seen:])}
    assert len(fetched & known) >= 10, "the run fetched no known page again"
    assert shop.cycles(redis_url, "window")[1]["booked"] <= 40 + 3


def test_processes_started_together_share_one_cycle(server: ServerProcess, redis_url: str,
                                                    tmp_path: Path) -> None:
    shop.write_site(tmp_path, budget=300, delay=0.25)  # long enough for both to overlap
    settings = shop.settings(redis_url, tmp_path, server.port, "shared")
    one = start_crawl(shop.SPIDER, settings, tmp_path, log_name="a.log")
    two = start_crawl(shop.SPIDER, settings, tmp_path, log_name="b.log")
    assert finish(one, 90) == 0 and finish(two, 90) == 0
    a, b = (stats_of((tmp_path / name).read_text()) for name in ("a.log", "b.log"))
    started = sorted(int(s.get("webcrawl/cycles/started", 0)) for s in (a, b))
    joined = sorted(int(s.get("webcrawl/cycles/joined", 0)) for s in (a, b))
    assert (started, joined) == ([0, 1], [0, 1]), "one starts the cycle, the other joins it"
    # The joiner waits while the other holds the seed, then takes its share of what it found.
    counts = [int(s.get("downloader/request_count", 0)) for s in (a, b)]
    assert min(counts) >= 1 and sum(counts) >= 26, counts
    [cycle] = shop.cycles(redis_url, "shared")
    assert cycle["booked"] <= cycle["budget"]
    assert cycle["fetched"] >= 26 and cycle["known"] >= cycle["fetched"]


def test_a_continuous_crawl_rolls_cycles_until_its_stop_condition(
        server: ServerProcess, redis_url: str, tmp_path: Path) -> None:
    """Two crawls at once: one stops after three cycles, the other after five seconds."""
    runs = {"by-cycles": "stop_after_cycles = 3", "by-seconds": "stop_after_seconds = 5"}
    processes = {}
    for crawl, stop in runs.items():
        folder = tmp_path / crawl
        folder.mkdir()
        shop.write_site(folder, budget=20, cycle_seconds=2, extra=f"continuous = true\n{stop}")
        processes[crawl] = (time.monotonic(), start_crawl(
            shop.SPIDER, shop.settings(redis_url, folder, server.port, crawl), folder))
    for crawl, (began, process) in processes.items():
        assert finish(process, 90) == 0
        elapsed = time.monotonic() - began
        stats = stats_of((tmp_path / crawl / "crawl.log").read_text())
        ledger = shop.cycles(redis_url, crawl)
        starts = [c["started"] for c in ledger]
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        assert all(2.0 <= g <= 3.5 for g in gaps), f"{crawl}: cycles started {gaps} s apart"
        if crawl == "by-cycles":
            assert stats["finish_reason"] == "stop_after_cycles"
            assert len(ledger) == 3 and stats["webcrawl/cycles/started"] == 3
        else:
            assert stats["finish_reason"] == "stop_after_seconds"
            assert elapsed >= 5 and len(ledger) >= 2
        assert sum(c.get("booked", 0) for c in ledger[1:]) > 0, f"{crawl}: later cycles spent nothing"
        for c in ledger:
            assert c["rate"] == pytest.approx(20 / 2)
            assert "idle" in c and "fetched" in c, f"{crawl}: a cycle closed without its figures"


def test_stop_after_cycles_lets_the_last_cycle_run_its_length(server: ServerProcess, redis_url: str,
                                                               tmp_path: Path) -> None:
    shop.write_site(tmp_path, budget=20, cycle_seconds=3, extra="continuous = true\nstop_after_cycles = 1")
    stats = shop.run(tmp_path, shop.settings(redis_url, tmp_path, server.port, "one-cycle"), "crawl.log")
    assert stats["finish_reason"] == "stop_after_cycles"
    assert stats["elapsed_time_seconds"] >= 3, "the cycle was cut short"


def test_the_planning_lock_and_a_cycles_workers(redis_url: str) -> None:
    """What starting or joining a cycle stands on (webcrawl.state.ledger)."""
    client, _, _ = connect(redis_url)
    try:
        ledger = LedgerStore(client, CrawlLayout("locks"))
        assert ledger.lock("a", 10) and not ledger.lock("b", 10)
        assert not ledger.unlock("b") and ledger.unlock("a"), "released only by its holder"
        assert ledger.lock("b", 0.001)
        cycle = ledger.start_cycle(budget=1.0, cycle_seconds=60, now=0.0)
        assert ledger.current() == cycle and ledger.cycle_ids() == [cycle.id]
        ledger.heartbeat(cycle.id, "w1", expires=30.0)
        ledger.heartbeat(cycle.id, "w2", expires=10.0)
        assert ledger.live_workers(cycle.id, now=20.0) == 1  # w2's heartbeat expired
        ledger.leave(cycle.id, "w1")
        assert ledger.live_workers(cycle.id, now=20.0) == 0
    finally:
        client.close()


def test_the_uniform_policy_gives_every_page_one_interval(redis_url: str, tmp_path: Path) -> None:
    crawler = get_crawler(PrioSpider, settings_for(redis_url, "uniform", tmp_path,
                                                   WEBCRAWL_PLANNER_POLICY="uniform"))
    crawler.spider = crawler._create_spider()
    runtime = CrawlRuntime.of(crawler)
    try:
        now, product = runtime.clock.time(), runtime.types.id("product")
        urls = [f"http://shop.test/product/{i}" for i in range(6)]
        for i, url in enumerate(urls):  # some change at every visit, some never
            for k in range(5):
                runtime.batch.land("shop.test", observe_op(
                    url, full=True, time=now - (5 - k) * 600, record_hash=f"{k * (i % 2):016x}",
                    type_id=product, billed=1.0))
        runtime.flush()
        Allocator(runtime, crawler).allocate(force=True)
        intervals = {runtime.pages.get(url, "shop.test").iv for url in urls}  # type: ignore[union-attr]
        assert len(intervals) == 1 and 0 < intervals.pop() < float("inf")
        bad = get_crawler(PrioSpider, settings_for(redis_url, "uniform", tmp_path,
                                                   WEBCRAWL_PLANNER_POLICY="random"))
        bad.spider = bad._create_spider()
        with pytest.raises(ValueError, match="WEBCRAWL_PLANNER_POLICY='random'"):
            Allocator(CrawlRuntime.of(bad), bad)
        CrawlRuntime.of(bad).close()
    finally:
        runtime.close()
