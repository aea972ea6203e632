"""Slow hosts cannot stall a crawl: real ``scrapy crawl <site>`` runs against a server on
127.0.0.x whose answers drip a byte every 0.2 s forever, or stop half way and hang, read back from
the server's own log of requests and connections.

- the download deadline (the site's ``limits.timeout_seconds``) ends drips and stalled bodies;
- meanwhile the host's other pages go beside the slow one (``WEBCRAWL_SLOW_RESPONSE_SECONDS``),
  never more than two connections to a host at once, request starts a delay apart;
- a stop (SIGTERM, ``CLOSESPIDER_TIMEOUT``) ends the crawl within the stop's grace period, the
  dripping download cancelled, not awaited.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests._hostile_server import HostileServer, iter_gaps, page, text
from tests.crawls import finish, start_crawl, stats_of, wait_for

DRIP, STALL = "127.0.0.91", "127.0.0.92"
PAGES = [f"/p/{i}" for i in range(1, 6)]
DELAY = 0.3

SITE_FILE = """\
name = "{name}"
seeds = [{seeds}]
allowed_domains = ["{drip}", "{stall}"]
allowed_private_networks = ["127.0.0.0/8"]
[politeness]
user_agent = "webcrawl-tests/0.1 (+https://example.org/tests; tests@example.org)"
min_delay_seconds = {delay}
[budget]
billing = "requests"
amount_per_cycle = 1000
cycle_seconds = 3600
[limits]
timeout_seconds = {timeout}
[[page_types]]
name = "page"
url_pattern = '/(p/|drip|stall)'
"""


@pytest.fixture
def server() -> Iterator[HostileServer]:
    routes = {"/robots.txt": text("User-agent: *\nAllow: /\n"),
              "/drip": lambda x: x.drip(every=0.2), "/stall": lambda x: x.stall()}
    routes.update({p: page([]) for p in PAGES})
    with HostileServer([DRIP, STALL], routes) as running:
        yield running


def site(server: HostileServer, tmp_path: Path, name: str, timeout: float,
         slow_paths: dict[str, str]) -> Path:
    """A site file whose seeds are each host's slow URL first, then its pages: one page type,
    so they are equal in priority and popped in that order."""
    seeds = [server.url(host, path) for host, path in slow_paths.items()]
    seeds += [server.url(host, p) for host in slow_paths for p in PAGES]
    folder = tmp_path / "sites"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.toml").write_text(SITE_FILE.format(
        name=name, seeds=", ".join(f'"{s}"' for s in seeds), drip=DRIP, stall=STALL,
        delay=DELAY, timeout=timeout))
    return folder


def settings(folder: Path, tmp_path: Path, redis_url: str, **extra: object) -> dict[str, object]:
    return {"WEBCRAWL_SITES_DIR": folder, "WEBCRAWL_REDIS_URL": redis_url,
            "WEBCRAWL_DATA_DIR": tmp_path / "data", "RETRY_ENABLED": False,
            "WEBCRAWL_SLOW_RESPONSE_SECONDS": 1, **extra}


def test_drips_and_stalled_bodies_end_at_the_deadline_while_other_pages_go_on(
        server, tmp_path, redis_url):
    timeout = 4.0
    folder = site(server, tmp_path, "slowhosts", timeout, {DRIP: "/drip", STALL: "/stall"})
    crawl = start_crawl("slowhosts", settings(folder, tmp_path, redis_url), tmp_path)
    assert finish(crawl, 90) == 0
    log = (tmp_path / "crawl.log").read_text()
    stats = stats_of(log)
    assert "Traceback" not in log and "] ERROR:" not in log, log[-3000:]
    for host, slow in ((DRIP, "/drip"), (STALL, "/stall")):
        hits = server.log(host)
        (slow_hit,) = [h for h in hits if h.path == slow]
        slow_conn = server.connection_of(slow_hit)
        # The server notices the cut at its next byte (a drip writes every 0.2 s): when the crawl
        # closes at once after the deadline, that may be just after the exit.
        wait_for(lambda: slow_conn.closed is not None, 5, f"the server to see {slow} close")
        # Cut by the client at the deadline, not held for Scrapy's three minutes.
        assert timeout - 0.5 < slow_conn.closed - slow_hit.mono < timeout + 5, host
        # The host's other pages were fetched while the slow answer was still coming.
        pages = [h for h in hits if h.path in PAGES]
        assert sorted(h.path for h in pages) == PAGES, host
        assert all(h.mono < slow_conn.closed for h in pages), host
        # Politeness counts request starts; a host never had more than two connections.
        gaps = [(a.path, b.path, round(gap, 3)) for a, b, gap in iter_gaps(hits)]
        assert all(gap >= DELAY for _, _, gap in gaps), gaps
        assert server.most_open(host) <= 2, host
    assert stats["webcrawl/hostile/timeout"] == 2
    warnings = [line for line in log.splitlines() if "Hostile answer (timeout)" in line]
    assert len(warnings) == 2 and all("WARNING" in line for line in warnings)
    assert stats["webcrawl/spacing/slow_overlap"] >= 2


@pytest.mark.parametrize("how", ["sigterm", "closespider_timeout"])
def test_a_stop_during_a_drip_ends_within_the_grace_period(server, tmp_path, redis_url, how):
    """The download timeout is a minute: only the stop's cancellation can end the crawl early.
    The dripping seed is given back: its lease goes back to the queue for the next run."""
    grace = 1.0
    folder = site(server, tmp_path, "stopping", 60, {DRIP: "/drip"})
    extra = {"WEBCRAWL_STOP_GRACE_SECONDS": grace}
    if how == "closespider_timeout":
        extra["CLOSESPIDER_TIMEOUT"] = 3
    crawl = start_crawl("stopping", settings(folder, tmp_path, redis_url, **extra), tmp_path)
    wait_for(lambda: "/drip" in server.paths(DRIP), 30, "the drip to start")
    (drip,) = [h for h in server.log(DRIP) if h.path == "/drip"]
    if how == "sigterm":
        wait_for(lambda: len(server.paths(DRIP)) >= 1 + len(PAGES), 30, "the other pages")
        crawl.send_signal(signal.SIGTERM)
    stop_sent = time.monotonic()
    assert finish(crawl, 40) == 0
    ended = time.monotonic()
    log = (tmp_path / "crawl.log").read_text()
    stats = stats_of(log)
    assert "Traceback" not in log and "] ERROR:" not in log, log[-3000:]
    assert stats["finish_reason"] == ("shutdown" if how == "sigterm" else "closespider_timeout")
    # Far inside the minute the drip would have taken: the grace, then the close.
    closing_began = stop_sent if how == "sigterm" else drip.mono + 3
    assert ended - closing_began < grace + 10
    # The server notices the cut at its next byte (every 0.2 s): it may be just after the exit.
    conn = server.connection_of(drip)
    wait_for(lambda: conn.closed is not None, 5, "the server to see the drip's connection close")
    assert conn.closed - closing_began < grace + 10, "the dripping download was cut, not awaited"
    assert stats["webcrawl/stop/cancelled"] == 1 and stats["webcrawl/stop/grace_over"] == 1
    assert stats.get("webcrawl/hostile") is None  # a stop is not the host's fault
    # The dripping URL was not fetched: it waits in the crawl's queue for the next run.
    client = redis.Redis.from_url(redis_url)
    assert sum(client.zcard(k) for k in client.keys("webcrawl:{stopping:*}:leases")) == 0
    queued = [m for k in client.keys("webcrawl:{stopping:*}:frontier")
              for m in client.zrange(k, 0, -1)]
    assert any(b"/drip" in m for m in queued), queued
