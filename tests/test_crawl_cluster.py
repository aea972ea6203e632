"""Real crawl processes sharing one crawl on a real 3-master Redis Cluster: every page fetched,
every host's delay kept between any two requests at the server (robots.txt included), the
crawl's shards spread over every master, no script refused by a node (CROSSSLOT, non-local key)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._crawlsite import (
    CRAWL, Crawls, all_pages, bad_lines, fetched, serve_site, settings, short_gaps,
)
from webcrawl.state.layout import CrawlLayout

HOSTS = 5
PAGES = 100
DELAY = 0.25


@pytest.fixture
def crawls(tmp_path: Path) -> Iterator[Crawls]:
    site = serve_site(tmp_path, HOSTS, PAGES)
    crawls = Crawls(tmp_path, site)
    yield crawls
    crawls.stop_all()
    site.stop()


def crawl_keys_by_master(cluster: Any) -> dict[int, list[bytes]]:
    """The crawl's keys on each master (by port), scanned on each master itself."""
    patterns = CrawlLayout(CRAWL).patterns
    return {master.port: [key for pattern in patterns
                          for key in master.client().scan_iter(match=pattern, count=1000)]
            for master in cluster.masters()}


def test_two_processes_share_a_polite_crawl_over_every_master(
        crawls: Crawls, redis_cluster_url: str, redis_cluster: Any) -> None:
    config = settings(redis_cluster_url, DELAY)
    crawls.start("a", config)
    crawls.wait_pages(3, 30)
    crawls.start("b", config)
    assert crawls.finish("a", 60) == 0, crawls.tail("a")
    assert crawls.finish("b", 60) == 0, crawls.tail("b")

    counts = fetched(crawls.site)
    missing = all_pages(crawls.site) - set(counts)
    assert not missing, f"{len(missing)} pages never fetched: {sorted(missing)[:10]}"
    assert max(counts.values()) == 1, [p for p, n in counts.items() if n > 1]
    log = crawls.site.read_log()
    robots = [e for e in log if e.path == "/robots.txt"]
    assert {e.host for e in robots} == set(crawls.site.hosts)
    short = short_gaps(log, DELAY)
    assert not short, f"{len(short)} gaps under {DELAY} s at the server: {short[:5]}"
    for name in ("a", "b"):
        stats = crawls.stats(name)
        assert stats.get("finish_reason") == "finished", (name, stats)
        assert stats.get("downloader/response_count", 0) > 0, f"{name} fetched nothing"
        assert not bad_lines(crawls.text(name)), (name, bad_lines(crawls.text(name))[:5])

    # Each host's politeness state (its next-allowed time) is in its own shard, and those
    # shards sit on every master.
    client = redis_cluster.client()
    try:
        shards = int(client.hget(CrawlLayout(CRAWL).meta, "shards"))
    finally:
        client.close()
    assert shards == 16  # a cluster's default
    layout = CrawlLayout(CRAWL, shards)
    holders = {}
    for host in crawls.site.hosts:
        key = layout.shard(host).next
        holder = redis_cluster.master_for_key(key)
        assert holder.client().hexists(key, host), f"{host} has no next-allowed time in {key}"
        holders[host] = holder.port
    masters = {master.port for master in redis_cluster.masters()}
    assert set(holders.values()) == masters, holders
    by_master = crawl_keys_by_master(redis_cluster)
    assert all(by_master.values()), {port: len(keys) for port, keys in by_master.items()}
