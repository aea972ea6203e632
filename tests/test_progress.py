"""The progress line: the current cycle's figures from the ledger in Redis, this process's stats
without a cycle, and a real crawl logging it every interval and keeping the freshness snapshot."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import redis
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from tests.crawls import finish, start_crawl, stats_of
from webcrawl.clock import ManualClock
from webcrawl.demo.serve import start_server_process
from webcrawl.extensions.progress import ProgressLog, format_cost
from webcrawl.state.freshness import read_snapshot
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.ledger import LedgerStore

KEYS = CrawlKeys("progress")


@pytest.mark.parametrize(("value", "unit", "text"), [
    (1_210_000, "bytes", "1.21 MB"), (999, "bytes", "999 B"), (12.5, "credits", "12.50 credits"),
    (1234, "requests", "1,234 requests"),
])
def test_format_cost(value: float, unit: str, text: str) -> None:
    assert format_cost(value, unit) == text


def test_the_line_gives_the_cycle_figures(redis_client: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    ledger = LedgerStore(redis_client, KEYS)
    clock = ManualClock()
    progress = ProgressLog(MemoryStatsCollector(get_crawler()), unit="requests", ledger=ledger,
                           client=redis_client, keys=KEYS, clock=clock)
    cycle = ledger.start_cycle(budget=200, cycle_seconds=3600, now=clock.time())
    for outcome in ("new", "changed", "changed", "unchanged", "changed"):
        ledger.land(cycle.id, expected=0, actual=1, purpose="revisit", page_type="product")
        ledger.record_outcome(cycle.id, "product", outcome)
    HistoryStore(redis_client, KEYS).observe("http://a.test/p", now=clock.time(), record_hash="x",
                                             page_type="product")
    with caplog.at_level(logging.INFO, logger="webcrawl.extensions.progress"):
        progress.log()
    assert caplog.messages == [("Progress: cycle 1: spent 5 requests of 200 requests (2.5%), 5 fetches, "
                                "3 changes found, cost per change 1.67 requests, 1 new pages")]
    # A continuous crawl moves to cycle 2: cycle 1's freshness is kept for the report.
    ledger.start_cycle(budget=200, cycle_seconds=3600, now=clock.time() + 3600)
    progress.log()
    snapshot = read_snapshot(redis_client, KEYS, 1)
    assert snapshot is not None and snapshot.pages == {"product": 1, "*": 1}


def test_without_a_cycle_the_line_gives_this_process(caplog: pytest.LogCaptureFixture) -> None:
    stats = MemoryStatsCollector(get_crawler())
    for key, value in {"webcrawl/cost/total": 3_000_000, "webcrawl/cost/attempts": 30,
                       "webcrawl/records/changed": 4, "webcrawl/records/new": 20}.items():
        stats.set_value(key, value)
    with caplog.at_level(logging.INFO, logger="webcrawl.extensions.progress"):
        ProgressLog(stats, unit="bytes").log()
    assert caplog.messages == [("Progress (this process, no cycle): spent 3.00 MB, 30 fetches, "
                                "4 changes found, cost per change 750.00 KB, 20 new pages")]


def test_a_crawl_logs_progress_every_interval(redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    with start_server_process("generated", 1, tmp_path / "server.log", pages=12, min_kb=1, max_kb=2,
                              links=10) as site:
        ledger = LedgerStore(redis_client, CrawlKeys("progressed"))
        ledger.start_cycle(budget=1e9, cycle_seconds=3600, now=0.0)
        settings = {
            "WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DOMAIN_DELAY_SECONDS": 0.1,
            "WEBCRAWL_CRAWL_NAME": "progressed", "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8",
            "DOWNLOADER_MIDDLEWARES": '{"webcrawl.middlewares.cost.CostHealthMiddleware": 660}',
            "EXTENSIONS": '{"webcrawl.extensions.progress.ProgressLog": 500}',
            "SPIDER_MIDDLEWARES": '{"webcrawl.middlewares.priority.PriorityMiddleware": 40}',
            "WEBCRAWL_PROGRESS_INTERVAL_SECONDS": 0.3, "LOG_LEVEL": "INFO",
        }
        process = start_crawl("follow", settings, tmp_path, {"seeds": site.base_url(0) + "/"})
        assert finish(process, 60) == 0
    log = (tmp_path / "crawl.log").read_text()
    lines = re.findall(r"Progress: cycle 1: spent ([\d.]+) KB of 1\.00 GB .*, (\d+) fetches", log)
    assert len(lines) >= 3, log[-3000:]  # every 0.3 s of a crawl of 13 pages at 0.1 s, and at close
    spent, fetches = float(lines[-1][0]) * 1000, int(lines[-1][1])
    stats = stats_of(log)
    assert fetches == stats["webcrawl/cost/attempts"]
    # The priority middleware scored every request the spider made (the seed and the links).
    assert stats["webcrawl/priority/requests"] == stats["webcrawl/priority/requests/discovery"] >= 12
    assert spent == pytest.approx(stats["webcrawl/cost/total"], abs=10)
    assert read_snapshot(redis_client, CrawlKeys("progressed"), 1) is None  # no page histories: nothing to keep
