"""One run of the bundled demo site file (``scrapy crawl demo -O out.jsonl``) against the demo
shop: every page is fetched once (sitemaps, sitemap indexes and footer links to them included),
and the feed holds one record per URL. Read from the server's own request log."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crawls import finish, start_crawl, stats_of
from webcrawl.demo.serve import ServerProcess, start_server_process


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[ServerProcess]:
    server = start_server_process("shop", 4, tmp_path / "server.log")
    yield server
    server.stop()


def test_one_run_fetches_each_page_once_and_feeds_one_record_per_url(
        shop: ServerProcess, redis_url: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    crawl = start_crawl("demo", {"WEBCRAWL_DEMO_PORT": shop.port, "WEBCRAWL_REDIS_URL": redis_url,
                                 "WEBCRAWL_DATA_DIR": tmp_path / "data",
                                 "FEEDS": json.dumps({str(out): {"format": "jsonlines"}})}, tmp_path)
    assert finish(crawl, 180) == 0, (tmp_path / "crawl.log").read_text()[-3000:]
    stats = stats_of((tmp_path / "crawl.log").read_text())
    assert stats["finish_reason"] in ("finished", "cycle_budget_spent"), stats["finish_reason"]
    fetched = Counter((e.host, e.path) for e in shop.read_log())
    twice = {page: n for page, n in fetched.items() if n > 1}
    assert not twice, f"fetched more than once in one run: {sorted(twice.items())[:10]}"
    assert sum(1 for host, path in fetched if path.endswith("sitemap.xml")) >= 4
    records = [json.loads(line) for line in out.read_text().splitlines()]
    urls = Counter(r["url"] for r in records)
    assert records and max(urls.values()) == 1, [u for u, n in urls.items() if n > 1][:10]
