"""End to end: the learned revisit policy against a uniform one, on the demo shop with time sped up.

Two crawls of the same shop, each against its own server process; both servers share one
simulated clock and seed, so both crawls see the same products change in the same way (the two
runs of a cycle follow each other, a few simulated minutes apart). Each ``scrapy crawl`` run is one cycle; every cycle of both crawls has the same budget
(requests billing). After a first cycle that discovers the shop, the learned policy
(``WEBCRAWL_PLANNER_POLICY=learned``: value x gain / cost, "events" objective) must find more
changed records per unit of cost than the uniform one (oldest first), no cycle may book more than
its budget (the ledger's numbers), and no host may see two requests closer than its delay (the
servers' own logs). Real redis-server, real HTTP, real crawl processes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.crawls import finish, gaps_by_host, start_crawl, stats_of
from webcrawl.demo.serve import ServerProcess, start_server_process
from webcrawl.demo.server import LogEntry
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.ledger import LedgerStore

POLICIES = ("learned", "uniform")
DELAY = 0.1
DISCOVERY_BUDGET = 300
BUDGET = 16
CYCLES = 9  # after discovery
SITE = r"""
name = "shop-e2e"
objective = "events"
seeds = ["http://127.0.0.2:${WEBCRAWL_DEMO_PORT}/"]
allowed_domains = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
allowed_private_networks = ["127.0.0.0/8"]

[politeness]
user_agent = "webcrawl-test/0.1 (+https://example.org/webcrawl-test; test@example.org)"
min_delay_seconds = %(delay)s

[budget]
billing = "requests"
amount_per_cycle = %(budget)s
cycle_seconds = 3600
reserve = { discovery = 0.1, reestimation = 0.05, verification = 0.0 }

[limits]
max_depth = 2
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
description = "article.product div.desc"
served_at = "p.generated"

[[page_types]]
name = "category"
url_pattern = '^https?://[^/]+/category/[a-z0-9-]+/'
tier = "low"

[page_types.fields]
title = "h1.category"
""" % {"delay": DELAY, "budget": BUDGET}



@pytest.fixture
def shops(tmp_path: Path) -> Iterator[dict[str, ServerProcess]]:
    origin = time.time()
    servers: dict[str, ServerProcess] = {}
    try:
        for policy in POLICIES:
            servers[policy] = start_server_process(
                "shop", 4, tmp_path / f"{policy}-server.log", seed=5, time_scale=600.0,
                clock_origin=origin, products=48, categories=3, blog_posts=0,
                min_change_interval=600.0, max_change_interval=30 * 86_400.0, never_change_share=0.2)
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def polite_gaps(log: list[LogEntry]) -> list[float]:
    """Gaps between consecutive requests to each host, over every cycle, discovery included."""
    return [g for gaps in gaps_by_host(log).values() for g in gaps]


def crawl_settings(redis_url: str, tmp_path: Path, policy: str, port: int, budget: int) -> dict[str, object]:
    return {
        "WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_SITES_DIR": str(tmp_path / "sites"),
        "WEBCRAWL_DEMO_PORT": port, "WEBCRAWL_CRAWL_NAME": policy, "WEBCRAWL_PLANNER_POLICY": policy,
        "WEBCRAWL_BUDGET_PER_CYCLE": budget, "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8",
        "WEBCRAWL_DATA_DIR": str(tmp_path / f"data-{policy}"), "WEBCRAWL_PLANNER_SEED": 1,
        "WEBCRAWL_PLANNER_SETTLE_SECONDS": 0.2, "LOG_LEVEL": "INFO",
    }


def test_learned_policy_finds_more_changes_per_cost_than_uniform(
        shops: dict[str, ServerProcess], redis_url: str, tmp_path: Path) -> None:
    (tmp_path / "sites").mkdir()
    (tmp_path / "sites" / "shop-e2e.toml").write_text(SITE)
    changed: dict[str, int] = dict.fromkeys(POLICIES, 0)
    for cycle in range(CYCLES + 1):
        budget = DISCOVERY_BUDGET if cycle == 0 else BUDGET
        for policy in POLICIES:  # one after the other: a starved reactor would bunch requests
            process = start_crawl("shop-e2e", crawl_settings(redis_url, tmp_path, policy, shops[policy].port,
                                                             budget), tmp_path, log_name=f"{policy}-{cycle}.log")
            assert finish(process, 60) == 0, (tmp_path / f"{policy}-{cycle}.log").read_text()[-3000:]
            stats = stats_of((tmp_path / f"{policy}-{cycle}.log").read_text())
            assert stats.get("log_count/ERROR", 0) == 0, f"{policy} cycle {cycle} logged errors"
            if cycle > 0:
                changed[policy] += int(str(stats.get("webcrawl/records/changed", 0)))

    client = redis.Redis.from_url(redis_url)
    spent: dict[str, float] = {}
    for policy in POLICIES:
        ledger = LedgerStore(client, CrawlKeys(policy))
        ids = ledger.cycle_ids()
        assert len(ids) == CYCLES + 1, f"{policy}: every run is one cycle"
        for cycle_id in ids:
            n = ledger.numbers(cycle_id)
            assert n["booked"] <= n["budget"] + 1e-9, f"{policy} cycle {cycle_id} overspent: {n}"
            assert abs(n["in_flight"]) < 1e-9, f"{policy} cycle {cycle_id} left reservations: {n}"
        spent[policy] = sum(ledger.numbers(i)["booked"] for i in ids[1:])
        gaps = polite_gaps(shops[policy].read_log())
        assert min(gaps) >= DELAY, f"{policy}: {sum(g < DELAY for g in gaps)} gaps under {DELAY} s"
    rate = {p: changed[p] / spent[p] for p in POLICIES}
    print(f"changes found per unit of cost: {rate} (changes {changed}, cost {spent})")
    assert spent["learned"] >= 0.8 * spent["uniform"], "the learned crawl left its budget unspent"
    assert rate["learned"] > rate["uniform"], f"learned {rate['learned']:.3f} <= uniform {rate['uniform']:.3f}"
