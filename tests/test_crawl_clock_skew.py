"""Two crawl processes sharing a crawl from machines whose clocks differ by a minute, with leases
of a few seconds: the crawl keeps time by the Redis server's clock, so every host's delay holds at
the server (robots.txt included), no live lease is taken back, and every page is fetched once.

The clocks are put off two ways: by WEBCRAWL_CLOCK_SKEW_SECONDS (-30 and +30: the crawl's own
reading of the local clock), and by shifting the whole process's wall clock (``time.time`` from
the first instruction on: every wall-clock reading in webcrawl, Scrapy and redis-py), which also
catches a reading that bypasses the crawl's clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._crawlsite import Crawls, all_pages, bad_lines, fetched, serve_site, settings, short_gaps

HOSTS = 5
PAGES = 100
DELAY = 0.25
LEASE = 4  # seconds: a skew of 30 s either way is far beyond it
SKEWS = {"behind": -30.0, "ahead": 30.0}


@pytest.fixture
def crawls(tmp_path: Path) -> Iterator[Crawls]:
    site = serve_site(tmp_path, HOSTS, PAGES)
    crawls = Crawls(tmp_path, site)
    yield crawls
    crawls.stop_all()
    site.stop()


@pytest.mark.parametrize("how", ["setting", "wall-clock"])
def test_processes_with_skewed_clocks_keep_delays_and_leases(crawls: Crawls, redis_url: str,
                                                             how: str) -> None:
    for name, skew in SKEWS.items():
        config = settings(redis_url, DELAY, WEBCRAWL_LEASE_SECONDS=LEASE)
        if how == "setting":
            crawls.start(name, {**config, "WEBCRAWL_CLOCK_SKEW_SECONDS": skew})
        else:
            crawls.start(name, config, wall_skew=skew)
    for name in SKEWS:
        assert crawls.finish(name, 60) == 0, crawls.tail(name)

    short = short_gaps(crawls.site.read_log(), DELAY)
    assert not short, f"{len(short)} gaps under {DELAY} s at the server: {short[:5]}"
    counts = fetched(crawls.site)
    missing = all_pages(crawls.site) - set(counts)
    assert not missing, f"{len(missing)} pages never fetched: {sorted(missing)[:10]}"
    assert max(counts.values()) == 1, sorted(p for p, n in counts.items() if n > 1)
    for name in SKEWS:
        stats = crawls.stats(name)
        assert stats.get("finish_reason") == "finished", (name, stats)
        assert stats.get("downloader/response_count", 0) > 0, f"{name} fetched nothing"
        assert "scheduler/leases/reclaimed" not in stats, (name, stats)
        assert not bad_lines(crawls.text(name)), (name, bad_lines(crawls.text(name))[:5])
