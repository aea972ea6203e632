"""Completeness: ``scrapy crawl <site>`` with the generic spider fetches every page reachable by
links from the seeds, and nothing else, once each: checked against an independent breadth-first
walk of the generated site's link graph (``GeneratedSite.reachable()``), read from the server's
own request log."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crawls import finish, start_crawl, stats_of
from webcrawl.demo.generated import site_file
from webcrawl.demo.serve import ServerProcess, start_server_process

HOSTS = 3
PAGES = 240

@pytest.fixture
def site(tmp_path: Path) -> Iterator[ServerProcess]:
    server = start_server_process("generated", HOSTS, tmp_path / "server.log", pages=PAGES,
                                  min_kb=12, max_kb=40, links=60, seed=3)
    yield server
    server.stop()


@pytest.mark.parametrize("seed_hosts", [HOSTS, 1], ids=["every-host", "one-host"])
def test_crawl_finds_every_reachable_page(site: ServerProcess, redis_url: str, tmp_path: Path,
                                          seed_hosts: int) -> None:
    sites = tmp_path / "sites"
    sites.mkdir()
    seeds = [site.base_url(h) + "/" for h in range(seed_hosts)]
    (sites / "completeness.toml").write_text(site_file("completeness", seeds, site.hosts))
    crawl = start_crawl("completeness", {
        "WEBCRAWL_SITES_DIR": sites, "WEBCRAWL_REDIS_URL": redis_url,
        # Loopback is allowed by the site file alone (allowed_private_networks): no setting here.
        "WEBCRAWL_DATA_DIR": tmp_path / "data",
    }, tmp_path)
    assert finish(crawl) == 0, (tmp_path / "crawl.log").read_text()[-3000:]

    # The truth, independent of the crawler: a breadth-first walk of the site's own link graph.
    reachable = site.site.reachable(seeds)
    assert len(reachable) == PAGES + HOSTS  # every page is reachable from any host's seed
    fetched = Counter(f"http://{e.host}:{site.port}{e.path}" for e in site.read_log()
                      if e.path != "/robots.txt")
    missing, extra = reachable - set(fetched), set(fetched) - reachable
    assert not missing, f"{len(missing)} reachable pages not fetched, e.g. {sorted(missing)[:5]}"
    assert not extra, f"fetched pages that no link leads to: {sorted(extra)[:5]}"
    assert max(fetched.values()) == 1, "a page was fetched twice"
    stats = stats_of((tmp_path / "crawl.log").read_text())
    assert stats["webcrawl/parse/pages/html"] == len(reachable)
    assert stats["webcrawl/spider/items/page/doc"] == PAGES
