"""The progress line (webcrawl.extensions.progress): the current cycle's figures from the ledger
(booked through the crawl's write batch), the spend rate against the budget rate and the
allocator's freshness estimate; this process's stats without a cycle; and a real continuous crawl
logging it every interval, from one cycle to the next."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from tests import _shopcrawl as shop
from tests._scheduler_harness import settings_for
from tests.crawls import finish, start_crawl, stats_of
from tests.test_priority import PrioSpider
from webcrawl.demo.serve import start_server_process
from webcrawl.extensions.allocator import Allocator
from webcrawl.extensions.progress import ProgressLog, format_cost
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.pagestore import observe_op


@pytest.mark.parametrize(("value", "unit", "text"), [
    (1_210_000, "bytes", "1.21 MB"), (999, "bytes", "999 B"), (12.5, "credits", "12.50 credits"),
    (1234, "requests", "1,234 requests"),
])
def test_format_cost(value: float, unit: str, text: str) -> None:
    assert format_cost(value, unit) == text


def test_without_a_cycle_the_line_gives_this_process(caplog: pytest.LogCaptureFixture) -> None:
    stats = MemoryStatsCollector(get_crawler())
    for key, value in {"webcrawl/cost/total": 3_000_000, "webcrawl/cost/attempts": 30,
                       "webcrawl/records/changed": 4, "webcrawl/records/new": 20}.items():
        stats.set_value(key, value)
    with caplog.at_level(logging.INFO, logger="webcrawl.extensions.progress"):
        ProgressLog(stats, unit="bytes").log()
    assert caplog.messages == [("Progress (this process, no cycle): spent 3.00 MB, 30 fetches, "
                                "4 changes found, cost per change 750.00 KB, 20 new pages")]


def test_the_line_gives_the_cycle_its_spend_rate_and_the_freshness_estimate(
        redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    crawler = get_crawler(PrioSpider, settings_for(redis_url, "progress", tmp_path))
    crawler.spider = crawler._create_spider()
    runtime = CrawlRuntime.of(crawler)
    try:
        allocator = Allocator(runtime, crawler)
        cycle = allocator.begin()  # budget 100 credits over 3600 s
        progress = ProgressLog.from_crawler(crawler)
        assert progress.unit == "credits"
        batch = runtime.batch
        for outcome in ("new", "changed", "changed", "unchanged", "changed"):
            batch.ledger(cycle.id, {"booked": 1.0, "fetches:product": 1.0, "cost:product": 1.0,
                                    f"{outcome}:product": 1.0})
        runtime.flush()
        with caplog.at_level(logging.INFO, logger="webcrawl.extensions.progress"):
            progress.log()
            assert caplog.messages[-1] == (
                f"Progress: cycle {cycle.id}: spent 5 credits of 100 credits (5.0%), 5 fetches, "
                "3 changes found, cost per change 1.67 credits, 1 new pages")
            # An allocation estimates the copy's freshness; more was spent since the last line.
            runtime.batch.land("shop.test", observe_op("http://shop.test/product/1", full=True,
                                                       time=runtime.clock.time(), record_hash="ab" * 8,
                                                       type_id=runtime.types.id("product"), billed=1.0))
            batch.ledger(cycle.id, {"booked": 2.0, "fetches:product": 2.0, "cost:product": 2.0})
            runtime.flush()
            allocator.allocate(force=True)
            progress.log()
        line = caplog.messages[-1]
        assert line.startswith(f"Progress: cycle {cycle.id}: spent 7 credits of 100 credits (7.0%), 7 fetches")
        rate = float(re.search(r"spend rate ([\d.]+) of the budget rate", line).group(1))  # type: ignore[union-attr]
        assert rate > 1, "2 credits in well under a second is far above 100 per hour"
        assert re.search(r"estimated freshness (0\.9\d\d|1\.000)$", line), line
    finally:
        runtime.close()


def test_a_continuous_crawl_logs_progress_every_interval(redis_url: str, tmp_path: Path) -> None:
    with start_server_process("shop", 3, tmp_path / "server.log", seed=3, time_scale=600.0,
                              products=24, categories=2, blog_posts=0) as server:
        shop.write_site(tmp_path, budget=200, cycle_seconds=2,
                        extra="continuous = true\nstop_after_cycles = 2")
        settings = shop.settings(redis_url, tmp_path, server.port, "progressed",
                                 WEBCRAWL_PROGRESS_INTERVAL_SECONDS=0.3,
                                 WEBCRAWL_ALLOCATOR_SECONDS=0.5)  # an estimate before each close
        assert finish(start_crawl(shop.SPIDER, settings, tmp_path), 90) == 0
    log = (tmp_path / "crawl.log").read_text()
    lines = re.findall(r"Progress: cycle (\d): spent (\d+) requests of 200 requests .*?, (\d+) fetches", log)
    assert {c for c, _, _ in lines} == {"1", "2"}, log[-3000:]
    assert len(lines) >= 6, "every 0.3 s of two 2-second cycles"
    ledger = shop.cycles(redis_url, "progressed")
    last = [line for line in lines if line[0] == "2"][-1]
    stats = stats_of(log)
    assert int(last[1]) == ledger[1]["booked"], "the last line gives what cycle 2 booked"
    assert int(last[2]) == ledger[1]["fetches:product"] + ledger[1].get("fetches:category", 0) + (
        ledger[1].get("fetches:-", 0))
    assert sum(c["booked"] for c in ledger) == stats["webcrawl/cost/attempts"]
    # The priority middleware scored what the spider yielded: the shop's pages and sitemaps.
    assert stats["webcrawl/priority/requests/discovery"] >= 26
    assert "freshness" in ledger[0], "cycle 1's freshness is kept at its close for the report"
