"""A real crawl whose PostgreSQL stops for a minute and comes back: the crawl goes on (the crawl
state keeps what the writer cannot write), and once the database is back every event and check
arrives, each once. The demo shop in a subprocess, a real ``scrapy crawl`` in continuous mode, a
real PostgreSQL killed with SIGKILL and started again on its data folder."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg

from tests.crawls import finish, start_crawl, stats_of, wait_for
from webcrawl.demo.serve import start_server_process
from webcrawl.state.client import connect
from webcrawl.state.eventlog import EventLog
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.streams import ShardStream

OUTAGE_SECONDS = 60.0


def _count(url: str, table: str) -> int:
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    except psycopg.Error:
        return -1


def test_a_database_down_for_a_minute_delays_the_tables_never_the_crawl(
        tmp_path: Path, redis_url: str, postgres_server: Any, postgres_url: str) -> None:
    shop = start_server_process("shop", 4, tmp_path / "requests.jsonl", seed=9, products=40,
                                time_scale=30.0, min_change_interval=300, max_change_interval=3000,
                                large_page_kb=16)
    client, _, _ = connect(redis_url)
    log = EventLog(client, CrawlLayout("demo"))
    try:
        settings = {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DATA_DIR": str(tmp_path / "data"),
                    "WEBCRAWL_DEMO_PORT": shop.port, "WEBCRAWL_DATABASE_URL": postgres_url,
                    "WEBCRAWL_CYCLE_CONTINUOUS": True, "WEBCRAWL_CYCLE_SECONDS": 10,
                    "WEBCRAWL_BUDGET_PER_CYCLE": 100,
                    "WEBCRAWL_STOP_AFTER_SECONDS": OUTAGE_SECONDS + 45, "LOG_LEVEL": "INFO"}
        crawl = start_crawl("demo", settings, tmp_path)
        wait_for(lambda: _count(postgres_url, "versions") > 20 or crawl.poll() is not None, 90,
                 "the first versions in the database")
        assert crawl.poll() is None, (tmp_path / "crawl.log").read_text()[-3000:]
        postgres_server.kill()
        down_at, events_before = time.monotonic(), log.count()
        wait_for(lambda: time.monotonic() - down_at >= OUTAGE_SECONDS or crawl.poll() is not None,
                 OUTAGE_SECONDS + 30, "the outage to last its minute")
        assert crawl.poll() is None, "the crawl stopped while the database was down"
        assert log.count() > events_before, "the crawl went on finding changes"
        postgres_server.restart()
        assert finish(crawl, 120) == 0
        text = (tmp_path / "crawl.log").read_text()
    finally:
        shop.stop()
    stats = stats_of(text)
    assert "The database writer cannot write" in text and "writes again after" in text
    assert stats["webcrawl/database/failures"] >= 1
    with psycopg.connect(postgres_url) as conn:
        versions = sorted(r[0] for r in conn.execute("SELECT event_id FROM versions"))
        checks = int(conn.execute("SELECT COUNT(*) FROM checks").fetchone()[0])
    assert versions == sorted(e["event_id"] for e in log.events())
    checks_stream = ShardStream(client, CrawlLayout("demo"), "checks")
    assert checks_stream.lag() == {"db": 0.0} and log.lag() == {"db": 0.0}
    assert checks > len(versions)  # unchanged checks and 304s too
    client.close()
