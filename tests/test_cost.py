"""The cost and health middleware and its Redis side: measured cost per billing model (failed
transfers included), running averages, the ledger, backoff held in Redis for every process,
recovery. Real redis-server, real HTTP servers on 127.0.0.x, real crawls in subprocesses."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from scrapy import Request
from scrapy.exceptions import (
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from scrapy.http import Response
from scrapy.http.headers import Headers
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.request import request_httprepr
from scrapy.utils.test import get_crawler
from twisted.internet import error as net

from tests.conftest import RedisServer
from tests.crawls import REPO, finish, start_crawl, stats_of
from webcrawl.clock import ManualClock
from webcrawl.demo.serve import start_server_process
from webcrawl.demo.server import MultiHostServer
from webcrawl.demo.shop import ShopSite
from webcrawl.middlewares.cost import CostHealthMiddleware, attempt_cost, retry_after_seconds
from webcrawl.revisit import BillingModel, HealthTracker, RunningCost
from webcrawl.state.costs import CostStore, backoff_seconds
from webcrawl.state.frontier import Frontier
from webcrawl.state.history import HistoryStore
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.ledger import LedgerStore
from webcrawl.state.seen import BloomParams

KEYS = CrawlKeys("costs")


@pytest.fixture(scope="module")
def shop() -> Iterator[MultiHostServer]:
    # Host 0 (www) is throttled: one request per 2 s, 429 with Retry-After: 2 otherwise.
    with MultiHostServer(ShopSite(seed=3, throttle_hosts=(0,), throttle_seconds=2.0), hosts=4) as server:
        yield server


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[Request, Response]:
    """A real HTTP exchange, as a Scrapy request and response (body as sent on the wire)."""
    request = Request(url, headers=headers)
    host, rest = url.split("://", 1)[1].split("/", 1)
    connection = http.client.HTTPConnection(host, timeout=10)
    connection.request("GET", "/" + rest, headers=headers or {})
    answer = connection.getresponse()
    body = answer.read()
    connection.close()
    return request, Response(url, status=answer.status, headers=Headers(answer.getheaders()),
                             body=body, request=request)


def frontier(client: redis.Redis) -> Frontier:
    return Frontier(client, KEYS, BloomParams(1000, 0.01), cap=100, default_delay=0.0,
                    lease_seconds=60)


def middleware(client: redis.Redis, billing: BillingModel, clock: ManualClock, **kw: object
               ) -> CostHealthMiddleware:
    return CostHealthMiddleware(CostStore(client, KEYS, cache_seconds=0), MemoryStatsCollector(get_crawler()),
                                billing=billing, ledger=LedgerStore(client, KEYS),
                                hold=frontier(client).hold, canonical=lambda u: u, clock=clock,
                                **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("billing", "ok", "failed"), [
    (BillingModel.BANDWIDTH, 1234.0, 321.0),
    (BillingModel.CREDITS, 1.0, 0.0),
    (BillingModel.REQUESTS, 1.0, 1.0),
])
def test_attempt_cost_per_billing_model(billing: BillingModel, ok: float, failed: float) -> None:
    assert attempt_cost(billing, 1234, failed=False) == ok
    assert attempt_cost(billing, 321, failed=True) == failed


def test_retry_after_seconds_or_http_date() -> None:
    assert retry_after_seconds(Headers({"Retry-After": "7"}), 0.0) == 7.0
    # An HTTP date is read against the answer's own Date: a skewed or simulated clock is harmless.
    dated = Headers({"Retry-After": "Wed, 21 Oct 2026 07:28:30 GMT", "Date": "Wed, 21 Oct 2026 07:28:00 GMT"})
    assert retry_after_seconds(dated, 0.0) == 30.0
    undated = Headers({"Retry-After": "Wed, 21 Oct 2026 07:28:30 GMT"})
    assert retry_after_seconds(undated, 1792567700.0) == 10.0
    assert retry_after_seconds(Headers({"Retry-After": "soon"}), 0.0) is None
    assert retry_after_seconds(Headers({}), 0.0) is None


def test_backoff_is_exponential_capped_and_retry_after_first() -> None:
    assert [backoff_seconds(n, None, 2.0, 30.0) for n in (1, 2, 3, 4, 5)] == [2, 4, 8, 16, 30]
    assert backoff_seconds(4, 5.0, 2.0, 30.0) == 5.0
    assert backoff_seconds(1, 9999.0, 2.0, 30.0) == 30.0


def test_running_averages_and_health_follow_the_model(redis_client: redis.Redis) -> None:
    store = CostStore(redis_client, KEYS, alpha=0.25, penalty=4.0, half_life_seconds=100.0,
                      cache_seconds=0)
    model = RunningCost(alpha=0.25)
    for outcome, size in [("full", 1000), ("full", 3000), ("failed", 200), ("not_modified", 150),
                          ("full", 2000), ("full", 8000), ("failed", 100), ("full", 1000)]:
        store.record("product", outcome, size, billed=size)
        model.observe(outcome, size)
    assert store.profile("product", 50_000) == pytest.approx(model.profile(50_000))
    assert store.profile("unknown", 50_000).full_bytes == 50_000
    tracker = HealthTracker(penalty=4.0, half_life_seconds=100.0)
    for now, ok in [(0.0, True), (10.0, False), (11.0, False), (50.0, True), (400.0, True)]:
        store.observe_health("a.test", ok, now)
        tracker.observe(ok, now)
        assert store.multiplier("a.test", now) == pytest.approx(tracker.multiplier(now))
    assert store.multiplier("a.test", 5000.0) == pytest.approx(tracker.multiplier(5000.0))
    assert store.multiplier("never-seen.test", 0.0) == 1.0


@pytest.mark.parametrize(("cut", "refused"), [
    (ResponseDataLossError(), DownloadConnectionRefusedError()),  # what Scrapy's handlers raise
    (net.ConnectionLost(), net.ConnectionRefusedError()),  # Twisted's own
])
@pytest.mark.parametrize("billing", list(BillingModel))
def test_each_attempt_costs_its_billing_unit(shop: MultiHostServer, redis_client: redis.Redis,
                                             billing: BillingModel, cut: Exception, refused: Exception) -> None:
    clock = ManualClock()
    mw = middleware(redis_client, billing, clock)
    ledger = LedgerStore(redis_client, KEYS)
    cycle = ledger.start_cycle(budget=1e9, cycle_seconds=3600, now=clock.time())
    history = HistoryStore(redis_client, KEYS)
    request, response = fetch(shop.site.product_url(1))  # type: ignore[attr-defined]
    request.meta.update(webcrawl_purpose="revisit", webcrawl_page_type="product", webcrawl_reserved=5.0)
    history.observe(request.url, now=clock.time(), record_hash="h", page_type="product")
    logged = shop.log()[-1].bytes
    mw.process_response(request, response)
    # A failed transfer: the connection was cut after the request went out.
    mw.process_exception(request, cut)
    # No connection at all: nothing on the wire.
    mw.process_exception(request, refused)
    # Not a network error (a middleware refused the request): not an attempt.
    mw.process_exception(request, IgnoreRequest())
    sent = len(request_httprepr(request))
    expected = {
        BillingModel.BANDWIDTH: [sent + logged, sent, 0],
        BillingModel.CREDITS: [1, 0, 0],
        BillingModel.REQUESTS: [1, 1, 1],
    }[billing]
    numbers = ledger.numbers(cycle.id)
    assert numbers["booked"] == pytest.approx(sum(expected))
    assert numbers["fetches:product"] == 3
    assert numbers["spent:revisit"] == pytest.approx(sum(expected))
    assert numbers["in_flight"] == pytest.approx(-5.0)  # the reservation released once, not thrice
    assert mw.stats.get_value("webcrawl/cost/total") == pytest.approx(sum(expected))
    assert mw.stats.get_value("webcrawl/cost/attempts/failed") == 2
    page = redis_client.hgetall(KEYS.page(request.url))
    assert float(page[b"billed"]) == pytest.approx(sum(expected))
    assert int(page[b"failed"]) == 2 and float(page[b"failed_bytes"]) == sent
    means = CostStore(redis_client, KEYS).means("product")
    assert means["full"] == sent + logged and means["failure"] == pytest.approx(2 / 3)


def test_a_304_is_measured_as_not_modified(shop: MultiHostServer, redis_client: redis.Redis) -> None:
    mw = middleware(redis_client, BillingModel.BANDWIDTH, ManualClock())
    url = shop.site.product_url(2)  # type: ignore[attr-defined]
    etag = (fetch(url)[1].headers.get(b"ETag") or b"").decode()
    request, response = fetch(url, {"If-None-Match": etag})
    assert response.status == 304
    mw.process_response(request, response)
    assert mw.stats.get_value("webcrawl/cost/attempts/not_modified") == 1
    assert mw.stats.get_value("webcrawl/cost/unbooked") == 1  # no cycle started


def test_429_holds_the_domain_for_every_process_and_health_recovers(
        shop: MultiHostServer, redis_client: redis.Redis, redis_server: RedisServer) -> None:
    clock = ManualClock(start=1_800_000_000.0)
    mw = middleware(redis_client, BillingModel.REQUESTS, clock, backoff_base=1.0, backoff_max=60.0)
    www = shop.base_url(0) + "/"
    fetch(www)  # uses the throttle's one request
    request, response = fetch(www)
    assert response.status == 429 and response.headers[b"Retry-After"] == b"2"
    mw.process_response(request, response)
    host = shop.hosts[0]
    held = float(redis_client.hget(KEYS.next, host) or 0)
    assert held == clock.time() + 2.0
    store = CostStore(redis_client, KEYS, cache_seconds=0)
    assert store.multiplier(host, clock.time()) == pytest.approx(5.0)  # 1 + 4 x one bad in one
    # Another process, with its own connection, cannot pop the host before the hold ends.
    script = (
        "import sys, redis\n"
        "from webcrawl.state.frontier import Entry, Frontier\n"
        "from webcrawl.state.keys import CrawlKeys\n"
        "from webcrawl.state.seen import BloomParams\n"
        "f = Frontier(redis.Redis(unix_socket_path=sys.argv[1]), CrawlKeys('costs'),\n"
        "             BloomParams(1000, 0.01), cap=100, default_delay=0.0, lease_seconds=60)\n"
        f"f.flush([Entry({host!r}, 0.0, '{{\"url\": \"x\"}}')], [], {clock.time()})\n"
        "for now in map(float, sys.argv[2:]):\n"
        "    print(len(f.pop(now).items))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(redis_server.socket),
                          str(clock.time() + 1.9), str(clock.time() + 2.0)],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "1"]
    # More bad outcomes without Retry-After: exponential backoff.
    clock.advance(3)
    mw.process_exception(request, DownloadTimeoutError())
    assert float(redis_client.hget(KEYS.next, host) or 0) == clock.time() + 2.0  # 1 x 2 ** (2 - 1)
    # A good answer ends the streak; the multiplier decays back to 1.
    clock.advance(3)
    good = fetch(shop.base_url(1) + "/")[1]
    mw.process_response(request, good)  # as if www had answered it
    assert mw.stats.get_value("webcrawl/health/recovered") == 1
    assert store.health(host).streak == 0
    clock.advance(6 * 3600)
    assert store.multiplier(host, clock.time()) == pytest.approx(1.0, abs=1e-6)
    assert mw.stats.get_value("webcrawl/health/backoff") == 2
    assert mw.stats.get_value("webcrawl/health/bad/429") == 1
    assert mw.stats.get_value("webcrawl/health/bad/timeout") == 1


def test_a_real_crawl_waits_out_retry_after(redis_url: str, tmp_path: Path) -> None:
    """End to end: the follow spider on a shop whose www host throttles; after each 429 the server
    sees no request to that host before Retry-After has passed."""
    with start_server_process("shop", 2, tmp_path / "server.log", seed=1, throttle_hosts="0",
                              throttle_seconds=1.0, products=20, categories=2,
                              blog_posts=2) as site:
        settings = {
            "WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DOMAIN_DELAY_SECONDS": 0.05,
            "WEBCRAWL_CRAWL_NAME": "throttled", "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8",
            "DOWNLOADER_MIDDLEWARES": '{"webcrawl.middlewares.cost.CostHealthMiddleware": 660}',
            "WEBCRAWL_COST_BILLING": "requests", "CLOSESPIDER_PAGECOUNT": 8, "LOG_LEVEL": "INFO",
            "WEBCRAWL_BACKOFF_BASE_SECONDS": 0.5,
        }
        with socket.socket() as probe:  # a port nobody listens on: connections are refused
            probe.bind(("127.0.0.9", 0))
            closed = f"http://127.0.0.9:{probe.getsockname()[1]}/"
        process = start_crawl("follow", settings, tmp_path, {"seeds": site.base_url(0) + "/," + closed})
        assert finish(process, 90) == 0
        log = [e for e in site.read_log() if e.host == site.hosts[0] and e.path != "/robots.txt"]
    stats = stats_of((tmp_path / "crawl.log").read_text())
    throttled = [i for i, e in enumerate(log) if e.status == 429]
    assert throttled, "the crawl never met the throttle"
    for i in throttled:
        if i + 1 < len(log):
            gap = log[i + 1].mono - log[i].mono
            assert gap >= 1.0 - 0.05, f"a request {gap:.2f} s after a 429 with Retry-After: 1"
    assert stats["webcrawl/health/backoff/retry_after"] == len(throttled)
    assert stats["webcrawl/cost/total"] == stats["webcrawl/cost/attempts"]
    # The refused host: every attempt (Scrapy retries twice) a bad outcome, each one held longer.
    assert stats["webcrawl/health/bad/connection"] == 3


def test_verdicts_and_304s_are_counted_in_the_cycle(shop: MultiHostServer, redis_client: redis.Redis) -> None:
    from webcrawl.items import PageItem

    clock = ManualClock()
    mw = middleware(redis_client, BillingModel.CREDITS, clock)
    ledger = LedgerStore(redis_client, KEYS)
    cycle = ledger.start_cycle(budget=100, cycle_seconds=3600, now=clock.time())
    for change in ("new", "changed", "unchanged", None):
        mw.item_verdict(PageItem("u", "u", "shop", "product", 200, 0.0, change=change))  # type: ignore[arg-type]
    mw.item_verdict({"not": "a page"})
    url = shop.site.product_url(3)  # type: ignore[attr-defined]
    etag = (fetch(url)[1].headers.get(b"ETag") or b"").decode()
    request, response = fetch(url, {"If-None-Match": etag})
    request.meta.update(webcrawl_page_type="product", webcrawl_validators_for=url)
    mw.process_response(request, response)
    numbers = ledger.numbers(cycle.id)
    assert (numbers["new:product"], numbers["changed:product"], numbers["unchanged:product"]) == (1, 1, 2)
    assert numbers["fetches:product"] == 1 and numbers["booked"] == 1  # a 304 is a paid answer
