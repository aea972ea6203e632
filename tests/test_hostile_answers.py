"""Hostile answers read as what they are: a real ``scrapy crawl <site>`` against a server on
127.0.0.x answering with a body over the size limit, a gzip bomb, a gzip body that does not
decode, a Content-Length it does not keep and a chunked body that stops. Each gives exactly one
WARNING line naming its URL and a stat; no traceback, no ERROR; the good page is fetched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._hostile_server import (
    HostileServer,
    bad_gzip,
    cut_body,
    cut_chunked,
    gzip_bomb,
    oversized,
    page,
    text,
)
from tests.crawls import finish, start_crawl, stats_of

HOST = "127.0.0.95"
KINDS = {"/big": "oversized", "/bomb": "bomb", "/badgz": "undecodable", "/cut": "truncated",
         "/chunk": "truncated"}

SITE_FILE = """\
name = "hostile-answers"
seeds = ["{base}/"]
allowed_domains = ["{host}"]
allowed_private_networks = ["127.0.0.0/8"]
[politeness]
user_agent = "webcrawl-tests/0.1 (+https://example.org/tests; tests@example.org)"
min_delay_seconds = 0
[budget]
billing = "requests"
amount_per_cycle = 1000
cycle_seconds = 3600
[limits]
max_download_bytes = 65536
[[page_types]]
name = "page"
url_pattern = '/'
"""


@pytest.fixture
def server() -> Iterator[HostileServer]:
    routes = {"/robots.txt": text("User-agent: *\nAllow: /\n"),
              "/": page([*KINDS, "/ok"]), "/ok": page([]),
              "/big": oversized(200_000), "/bomb": gzip_bomb(32), "/badgz": bad_gzip(),
              "/cut": cut_body(), "/chunk": cut_chunked()}
    with HostileServer([HOST], routes) as running:
        yield running


def test_each_hostile_answer_is_one_warning_and_a_stat(server, tmp_path: Path, redis_url):
    sites = tmp_path / "sites"
    sites.mkdir()
    base = server.url(HOST).rstrip("/")
    (sites / "hostile-answers.toml").write_text(SITE_FILE.format(base=base, host=HOST))
    # One retry: cut-short bodies are retried, and only their last failure is reported.
    crawl = start_crawl("hostile-answers", {
        "WEBCRAWL_SITES_DIR": sites, "WEBCRAWL_REDIS_URL": redis_url,
        "WEBCRAWL_DATA_DIR": tmp_path / "data", "RETRY_TIMES": 1,
        "WEBCRAWL_BACKOFF_BASE_SECONDS": 0.1}, tmp_path)
    assert finish(crawl, 90) == 0
    log = (tmp_path / "crawl.log").read_text()
    stats = stats_of(log)
    assert "Traceback" not in log, log[-4000:]
    assert "] ERROR:" not in log and "log_count/ERROR" not in stats, log[-4000:]
    assert "/ok" in server.paths(HOST)
    warnings = [line for line in log.splitlines() if "] WARNING:" in line]
    for path in KINDS:
        about = [line for line in warnings if f"{base}{path}" in line]
        assert len(about) == 1, (path, about)
    assert len(warnings) == len(KINDS), warnings
    assert server.paths(HOST).count("/cut") == 2  # the retry happened, quietly
    for kind in set(KINDS.values()):
        assert stats[f"webcrawl/hostile/{kind}"] == list(KINDS.values()).count(kind), kind
    assert stats["webcrawl/hostile"] == len(KINDS)
