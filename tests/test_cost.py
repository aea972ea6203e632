"""The cost and health middleware and the host health it keeps in Redis (land operation "A",
webcrawl.state.hosts): measured cost per billing model (failed transfers included), settled with
the spend bucket and booked in the cycle's ledger; backoff held in Redis for every process by
the server's clock; health decaying as the model says; recovery. Real redis-server, real HTTP
servers on 127.0.0.x, a real crawl in a subprocess."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.exceptions import (
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from scrapy.http import Response
from scrapy.http.headers import Headers
from scrapy.utils.request import request_httprepr
from twisted.internet import error as net

from tests.conftest import RedisServer
from tests.crawls import REPO, finish, start_crawl, stats_of, wait_for
from tests.runtimes import land, runtime_for
from webcrawl import meta as M
from webcrawl.demo.serve import start_server_process
from webcrawl.demo.server import MultiHostServer
from webcrawl.demo.shop import ShopSite
from webcrawl.items import PageItem
from webcrawl.middlewares.cost import CostHealthMiddleware, attempt_cost, retry_after_seconds
from webcrawl.revisit import BillingModel, HealthTracker
from webcrawl.runtime import CrawlRuntime
from webcrawl.sites import site_from_dict
from webcrawl.spiderloader import spider_class_for
from webcrawl.state.hosts import attempt_op

SITE = site_from_dict({
    "name": "costs", "seeds": ["http://127.0.0.2/"], "allowed_domains": ["127.0.0.2"],
    "politeness": {"user_agent": "bot (ops@example.org)"},
    "budget": {"billing": "requests", "amount_per_cycle": 100, "cycle_seconds": 3600},
    "page_types": [{"name": "product", "url_pattern": "/product/", "fields": {"name": "h1"}}],
})


@pytest.fixture(scope="module")
def shop() -> Iterator[MultiHostServer]:
    # Host 0 (www) is throttled: one request a second, 429 with Retry-After: 1 otherwise.
    with MultiHostServer(ShopSite(seed=3, throttle_hosts=(0,), throttle_seconds=1.0), hosts=4) as server:
        yield server


@pytest.fixture
def runtime(redis_url: str) -> Iterator[CrawlRuntime]:
    """A site's crawl: the spend controller settles with the shared bucket."""
    runtime = runtime_for(redis_url, spider=spider_class_for(SITE), name="costs")
    yield runtime
    runtime.close()


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


def middleware(runtime: CrawlRuntime, billing: BillingModel, **kw: object) -> CostHealthMiddleware:
    return CostHealthMiddleware(runtime, runtime.stats, billing=billing, **kw)  # type: ignore[arg-type]


def start_cycle(runtime: CrawlRuntime, tokens: float = 100.0) -> int:
    """A cycle to book into, and a bucket holding ``tokens`` (no refill)."""
    cycle = runtime.ledger.start_cycle(budget=1e9, cycle_seconds=3600, now=runtime.clock.time())
    runtime.cycle = cycle.id
    runtime.bucket.configure(0.0, 1e9, cycle.id, tokens=tokens)
    return cycle.id


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


def test_backoff_is_exponential_capped_and_retry_after_first(runtime: CrawlRuntime) -> None:
    def bad(retry_after: float | None = None) -> tuple[int, float]:
        streak, _, hold, *_ = land(runtime, "a.test", attempt_op(
            False, retry_after=retry_after, base=2.0, maximum=30.0, half_life=600.0, time=1.8e9))
        return int(streak), float(hold)

    assert [bad() for _ in range(5)] == [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0), (5, 30.0)]
    assert bad(5.0) == (6, 5.0) and bad(9999.0) == (7, 30.0)
    good = land(runtime, "a.test", attempt_op(True, retry_after=None, base=2.0, maximum=30.0,
                                              half_life=600.0, time=1.8e9))
    assert [int(good[0]), int(good[1]), float(good[2])] == [0, 7, 0.0]  # streak over, was 7
    assert bad() == (1, 2.0)


def test_health_follows_the_health_model_and_holds_by_the_server_clock(runtime: CrawlRuntime) -> None:
    tracker = HealthTracker(penalty=4.0, half_life_seconds=100.0)
    t0 = 1.8e9
    for at, ok in [(0.0, True), (10.0, False), (11.0, False), (50.0, True), (400.0, True), (405.0, False)]:
        before = runtime.clock.time()
        land(runtime, "a.test", attempt_op(ok, retry_after=None, base=1.0, maximum=60.0,
                                           half_life=100.0, time=t0 + at))
        after = runtime.clock.time()
        tracker.observe(ok, t0 + at)
        runtime.hosts._health.drop("a.test")
        health = runtime.hosts.health("a.test")
        assert health.bad_rate(t0 + at, 100.0) == pytest.approx(tracker.bad_rate(t0 + at))
        if not ok:  # the hold is from now by the server's clock, not the attempt's time
            assert before + 1.0 - 0.05 <= health.until <= after + 2.0 + 0.05
    for later in (500.0, 5000.0):
        assert runtime.hosts.health("a.test").bad_rate(t0 + later, 100.0) == pytest.approx(
            tracker.bad_rate(t0 + later))
    assert runtime.hosts.health("never-seen.test").bad_rate(t0, 100.0) == 0.0


@pytest.mark.parametrize(("cut", "refused"), [
    (ResponseDataLossError(), DownloadConnectionRefusedError()),  # what Scrapy's handlers raise
    (net.ConnectionLost(), net.ConnectionRefusedError()),  # Twisted's own
])
@pytest.mark.parametrize("billing", list(BillingModel))
def test_each_attempt_costs_its_billing_unit(shop: MultiHostServer, runtime: CrawlRuntime,
                                             billing: BillingModel, cut: Exception, refused: Exception) -> None:
    mw = middleware(runtime, billing)
    cycle = start_cycle(runtime)
    request, response = fetch(shop.site.product_url(1))  # type: ignore[attr-defined]
    request.meta.update({M.PURPOSE: "revisit", M.PAGE_TYPE: "product", M.CHARGED: 5.0})
    logged = shop.log()[-1].bytes
    mw.process_response(request, response)
    answered = request.meta[M.BILLED]
    # A failed transfer: the connection was cut after the request went out.
    mw.process_exception(request, cut)
    # No connection at all: nothing on the wire.
    mw.process_exception(request, refused)
    # Not a network error (a middleware refused the request): not an attempt.
    mw.process_exception(request, IgnoreRequest())
    runtime.batch.flush()
    sent = len(request_httprepr(request))
    expected = {
        BillingModel.BANDWIDTH: [sent + logged, sent, 0],
        BillingModel.CREDITS: [1, 0, 0],
        BillingModel.REQUESTS: [1, 1, 1],
    }[billing]
    numbers = runtime.ledger.numbers(cycle)
    assert numbers["booked"] == pytest.approx(sum(expected))
    assert numbers["fetches:product"] == 3 and numbers["cost:product"] == pytest.approx(sum(expected))
    assert numbers["spent:revisit"] == pytest.approx(sum(expected))
    assert runtime.stats.get_value("webcrawl/cost/total") == pytest.approx(sum(expected))
    assert runtime.stats.get_value("webcrawl/cost/attempts/failed") == 2
    # The page's own cost is its answer's (failed attempts price the host, not the page) ...
    assert answered == request.meta[M.BILLED] == expected[0]
    assert request.meta[M.WIRE_BYTES] == sent + logged
    # ... and the bucket got back what the wallet paid beyond what the attempts cost.
    assert runtime.bucket.read().tokens == pytest.approx(100.0 + 5.0 - sum(expected))
    assert request.meta[M.CHARGED] == 0.0  # settled once, not thrice


def test_a_304_is_measured_as_not_modified_and_unbooked_without_a_cycle(
        shop: MultiHostServer, runtime: CrawlRuntime) -> None:
    mw = middleware(runtime, BillingModel.BANDWIDTH)
    url = shop.site.product_url(2)  # type: ignore[attr-defined]
    etag = (fetch(url)[1].headers.get(b"ETag") or b"").decode()
    request, response = fetch(url, {"If-None-Match": etag})
    assert response.status == 304
    mw.process_response(request, response)
    assert runtime.stats.get_value("webcrawl/cost/attempts/not_modified") == 1
    assert runtime.stats.get_value("webcrawl/cost/unbooked") == 1  # no cycle started
    assert request.meta[M.BILLED] == len(request_httprepr(request)) + shop.log()[-1].bytes


def test_429_holds_the_host_for_every_process_and_health_recovers(
        shop: MultiHostServer, runtime: CrawlRuntime, redis_server: RedisServer) -> None:
    mw = middleware(runtime, BillingModel.REQUESTS, backoff_base=1.0, backoff_max=60.0)
    host, www = shop.hosts[0], shop.base_url(0) + "/"
    # Work waits for the host in the crawl's queue (pushed by another process).
    script = (
        "import sys, time\n"
        "from webcrawl.state.client import connect\n"
        "from webcrawl.state.layout import CrawlLayout\n"
        "from webcrawl.state.queue import CrawlQueue, Entry\n"
        "from webcrawl.state.scripts import ScriptSet\n"
        "client, _, _ = connect(sys.argv[1])\n"
        "layout = CrawlLayout('costs', 1)\n"
        "queue = CrawlQueue(client, ScriptSet(client), layout, cap=0, default_delay=0.0, lease_seconds=60)\n"
        "if sys.argv[2] == 'push':\n"
        f"    queue.push(layout.shard({host!r}), [Entry({host!r}, 0, '{{\"url\": \"x\"}}')], 1)\n"
        "else:\n"
        "    popped = queue.pop(0, 'other', 0, 1, 'nd')\n"
        "    print(len(popped.items), repr(popped.now))\n"
    )

    def other_process(action: str) -> str:
        return subprocess.run([sys.executable, "-c", script, redis_server.url, action], cwd=REPO,
                              capture_output=True, text=True, check=True).stdout

    other_process("push")
    fetch(www)  # uses the throttle's one request a second
    request, response = fetch(www)
    assert response.status == 429 and response.headers[b"Retry-After"] == b"1"
    before = runtime.clock.time()
    mw.process_response(request, response)
    # Held in this process at once, before the queue has it: requests already popped wait.
    assert runtime.hosts.held_until(host) >= time.monotonic() + 0.5
    runtime.batch.flush()
    held = float(runtime.client.hget(runtime.layout.shard(host).next, host))
    assert before + 1.0 - 0.05 <= held <= runtime.clock.time() + 1.0 + 0.05
    assert other_process("pop").split()[0] == "0", "the host is held"
    popped: list[str] = []
    wait_for(lambda: popped.append(other_process("pop")) or popped[-1].split()[0] == "1", 10,
             "the host's turn after the hold")
    assert float(popped[-1].split()[1]) >= held  # not one moment before, by the server's clock
    assert runtime.hosts.health(host).bad_rate(runtime.clock.time(), 600.0) == pytest.approx(1.0, abs=0.01)
    # More bad outcomes without Retry-After: exponential backoff.
    mw.process_exception(request, DownloadTimeoutError())
    before = runtime.clock.time()
    runtime.batch.flush()
    held = float(runtime.client.hget(runtime.layout.shard(host).next, host))
    assert before + 2.0 - 0.05 <= held <= runtime.clock.time() + 2.0 + 0.05  # 1 x 2 ** (2 - 1)
    # A good answer ends the streak; the bad rate decays back to 0.
    good = fetch(shop.base_url(1) + "/")[1]
    mw.process_response(request, good)  # as if www had answered it
    runtime.batch.flush()
    assert runtime.stats.get_value("webcrawl/health/recovered") == 1
    runtime.hosts._health.drop(host)
    assert runtime.hosts.health(host).streak == 0
    assert runtime.hosts.health(host).bad_rate(runtime.clock.time() + 6 * 3600, 600.0) == pytest.approx(0.0, abs=1e-6)
    stats = runtime.stats
    assert (stats.get_value("webcrawl/health/backoff"), stats.get_value("webcrawl/health/backoff/retry_after"),
            stats.get_value("webcrawl/health/bad/429"), stats.get_value("webcrawl/health/bad/timeout")) == (2, 1, 1, 1)


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


def test_verdicts_and_304s_are_counted_in_the_cycle(shop: MultiHostServer, runtime: CrawlRuntime) -> None:
    mw = middleware(runtime, BillingModel.CREDITS)
    cycle = start_cycle(runtime)
    for change in ("new", "changed", "unchanged", None):
        mw.item_verdict(PageItem("u", "u", "shop", "product", 200, 0.0, change=change))  # type: ignore[arg-type]
    mw.item_verdict({"not": "a page"})
    url = shop.site.product_url(3)  # type: ignore[attr-defined]
    etag = (fetch(url)[1].headers.get(b"ETag") or b"").decode()
    request, response = fetch(url, {"If-None-Match": etag})
    request.meta.update({M.PAGE_TYPE: "product", M.VALIDATORS_FOR: url})
    mw.process_response(request, response)
    runtime.batch.flush()
    numbers = runtime.ledger.numbers(cycle)
    assert (numbers["new:product"], numbers["changed:product"], numbers["unchanged:product"]) == (1, 1, 2)
    assert numbers["fetches:product"] == 1 and numbers["booked"] == 1  # a 304 is a paid answer


def test_bad_backoff_settings_are_refused(redis_url: str) -> None:
    runtime = runtime_for(redis_url, {"WEBCRAWL_BACKOFF_BASE_SECONDS": 10, "WEBCRAWL_BACKOFF_MAX_SECONDS": 5})
    with pytest.raises(ValueError, match="expected 0 < base <= max"):
        CostHealthMiddleware.from_crawler(runtime.crawler)
    runtime.close()
