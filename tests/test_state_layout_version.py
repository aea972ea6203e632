"""The crawl state's layout version is checked when a crawl opens: the version before is read as it
is and marked current, any other stops the crawl with one line, and the command line says it
before any request (a real redis-server, a real ``scrapy crawl``)."""

from __future__ import annotations

from pathlib import Path
import pytest
import redis

from tests._cli import scrapy
from tests.runtimes import runtime_for
from webcrawl.state.layout import LAYOUT_VERSION, CrawlLayout


def _meta(client: redis.Redis, crawl: str, layout: str) -> None:
    client.delete(CrawlLayout(crawl).meta)
    client.hset(CrawlLayout(crawl).meta, mapping={"shards": 1, "layout": layout})


def test_the_layout_before_is_read_and_marked_current(redis_client: redis.Redis,
                                                      redis_url: str) -> None:
    _meta(redis_client, "older", str(LAYOUT_VERSION - 1))
    runtime = runtime_for(redis_url, name="older")
    try:
        assert redis_client.hget(CrawlLayout("older").meta, "layout") == str(LAYOUT_VERSION).encode()
    finally:
        runtime.close()


@pytest.mark.parametrize("layout", ["1", str(LAYOUT_VERSION + 1), "x"])
def test_a_layout_this_version_cannot_read_is_refused(redis_client: redis.Redis, redis_url: str,
                                                      layout: str) -> None:
    _meta(redis_client, "foreign", layout)
    with pytest.raises(ValueError, match=rf"^crawl 'foreign' in Redis has state layout '{layout}'; "
                                         r"this webcrawl reads layouts 2 to \d+: .*--clear\)$"):
        runtime_for(redis_url, name="foreign")
    assert redis_client.hget(CrawlLayout("foreign").meta, "layout") == layout.encode()


def test_scrapy_crawl_stops_before_any_request_with_one_line(redis_client: redis.Redis,
                                                              redis_url: str, tmp_path: Path) -> None:
    _meta(redis_client, "follow", str(LAYOUT_VERSION + 1))
    done = scrapy(["crawl", "follow", "-a", "seeds=http://127.0.0.2:9/",
                   "-s", f"WEBCRAWL_REDIS_URL={redis_url}"], tmp_path)
    assert done.returncode != 0
    [line] = [line for line in done.stderr.splitlines() if "state layout" in line]
    assert line.startswith("scrapy: error: crawl 'follow' in Redis has state layout"), line
    assert "Crawled" not in done.stderr and "GET http" not in done.stderr
