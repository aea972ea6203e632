"""Real ``scrapy crawl`` runs of a site file over the demo shop (webcrawl/demo/serve.py), for the
allocator, progress and report tests: the site file, its settings, and reading back what a run
did (its stats from the log, its cycles from the ledger)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.crawls import finish, start_crawl, stats_of
from webcrawl.commands._reportdata import ledger_for
from webcrawl.state.client import connect

#: A site file over the demo shop's www host (index, categories) and catalog hosts (products).
SITE = r"""
name = "shop-alloc"
objective = "freshness"
seeds = ["http://127.0.0.2:${WEBCRAWL_DEMO_PORT}/"]
allowed_domains = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
allowed_private_networks = ["127.0.0.0/8"]

[politeness]
user_agent = "webcrawl-test/0.1 (+https://example.org/webcrawl-test; test@example.org)"
min_delay_seconds = %(delay)s

[budget]
billing = "requests"
amount_per_cycle = %(budget)s
cycle_seconds = %(cycle_seconds)s
reserve = { discovery = 0.1, reestimation = 0.05, verification = 0.0 }
%(extra)s

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
served_at = "p.generated"

[[page_types]]
name = "category"
url_pattern = '^https?://[^/]+/category/[a-z0-9-]+/'
tier = "low"

[page_types.fields]
title = "h1.category"
"""

SPIDER = "shop-alloc"


def write_site(folder: Path, *, budget: float, cycle_seconds: float = 3600, delay: float = 0.05,
               extra: str = "") -> Path:
    """The site file in ``folder/sites``; ``extra``: more lines of its [budget] table."""
    sites = folder / "sites"
    sites.mkdir(exist_ok=True)
    path = sites / f"{SPIDER}.toml"
    path.write_text(SITE % {"budget": budget, "cycle_seconds": cycle_seconds, "delay": delay,
                            "extra": extra})
    return path


def settings(redis_url: str, folder: Path, port: int, crawl: str, **more: Any) -> dict[str, Any]:
    return {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_SITES_DIR": str(folder / "sites"),
            "WEBCRAWL_DEMO_PORT": port, "WEBCRAWL_CRAWL_NAME": crawl,
            "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8",
            "WEBCRAWL_DATA_DIR": str(folder / f"data-{crawl}"), "WEBCRAWL_PLANNER_SEED": 1,
            "LOG_LEVEL": "INFO", **more}


def run(folder: Path, crawl_settings: dict[str, Any], log_name: str, timeout: float = 90) -> dict[str, Any]:
    """One ``scrapy crawl`` run to its end; its stats (it must exit cleanly, logging no error)."""
    process = start_crawl(SPIDER, crawl_settings, folder, log_name=log_name)
    code = finish(process, timeout)
    text = (folder / log_name).read_text()
    assert code == 0, text[-3000:]
    stats = stats_of(text)
    assert stats.get("log_count/ERROR", 0) == 0, text[-3000:]
    return stats


def cycles(redis_url: str, crawl: str) -> list[dict[str, float]]:
    """Every cycle's ledger figures, in order."""
    client, _, _ = connect(redis_url)
    try:
        ledger = ledger_for(client, crawl)
        return [ledger.numbers(i) for i in ledger.cycle_ids()]
    finally:
        client.close()
