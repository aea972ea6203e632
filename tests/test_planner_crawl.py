"""The planner in real crawl processes: two processes of one crawl (one plans, the other joins),
and continuous mode (a new cycle every cycle length), on the demo shop with a real redis-server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.crawls import finish, start_crawl, stats_of
from tests.test_policy_e2e import SITE, crawl_settings
from webcrawl.demo.serve import ServerProcess, start_server_process
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.ledger import LedgerStore


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[ServerProcess]:
    server = start_server_process("shop", 4, tmp_path / "server.log", seed=3, time_scale=600.0,
                                  products=24, categories=2, blog_posts=0)
    (tmp_path / "sites").mkdir()
    (tmp_path / "sites" / "shop-e2e.toml").write_text(SITE)
    yield server
    server.stop()


def ledger_numbers(redis_url: str, crawl: str) -> list[dict[str, float]]:
    ledger = LedgerStore(redis.Redis.from_url(redis_url), CrawlKeys(crawl))
    return [ledger.numbers(i) for i in ledger.cycle_ids()]


def test_two_processes_one_plan(shop: ServerProcess, redis_url: str, tmp_path: Path) -> None:
    settings = crawl_settings(redis_url, tmp_path, "learned", shop.port, 200)
    assert finish(start_crawl("shop-e2e", settings, tmp_path, log_name="discover.log"), 60) == 0
    settings = crawl_settings(redis_url, tmp_path, "learned", shop.port, 60)
    # Started together: one takes the planning lock and plans, the other waits for it and joins.
    first = start_crawl("shop-e2e", settings, tmp_path, log_name="a.log")
    second = start_crawl("shop-e2e", settings, tmp_path, log_name="b.log")
    assert finish(first, 60) == 0 and finish(second, 60) == 0
    a, b = (stats_of((tmp_path / name).read_text()) for name in ("a.log", "b.log"))
    planned = sorted(int(str(s.get("webcrawl/planner/cycles", 0))) for s in (a, b))
    joined = sorted(int(str(s.get("webcrawl/planner/joined", 0))) for s in (a, b))
    assert (planned, joined) == ([0, 1], [0, 1])
    assert all(int(str(s.get("webcrawl/budget/admitted", 0))) > 0 for s in (a, b)), "both fetched"
    assert len(ledger_numbers(redis_url, "learned")) == 2  # discovery, then one shared cycle
    for n in ledger_numbers(redis_url, "learned"):
        assert n["booked"] <= n["budget"] + 1e-9 and abs(n["in_flight"]) < 1e-9


def test_continuous_mode_plans_every_cycle_length(shop: ServerProcess, redis_url: str,
                                                  tmp_path: Path) -> None:
    settings = crawl_settings(redis_url, tmp_path, "learned", shop.port, 20)
    settings.update({"WEBCRAWL_CYCLE_CONTINUOUS": True, "WEBCRAWL_CYCLE_SECONDS": 3,
                     "CLOSESPIDER_TIMEOUT": 10})
    started = time.monotonic()
    assert finish(start_crawl("shop-e2e", settings, tmp_path), 60) == 0
    assert time.monotonic() - started >= 10  # idle between cycles, it stayed open
    stats = stats_of((tmp_path / "crawl.log").read_text())
    assert stats["finish_reason"] == "closespider_timeout"
    cycles_planned = int(str(stats["webcrawl/planner/cycles"]))
    assert cycles_planned >= 3
    cycles = ledger_numbers(redis_url, "learned")
    assert len(cycles) == cycles_planned
    for n in cycles:
        assert n["booked"] <= n["budget"] + 1e-9, n
    assert sum(n["booked"] for n in cycles) > 20  # later cycles spent too
