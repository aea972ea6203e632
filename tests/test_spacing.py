"""HostSpacingMiddleware (webcrawl.middlewares.spacing): requests held on the reactor's real loop
and timers (tenths of a second), the host's turn claimed in a real redis-server for requests
that did not come out of the crawl's queue, and a real crawl whose reactor stalls, read back from
the demo server's own request log.

Nothing here depends on how fast a loaded machine is. Times are checked as lower bounds (a
request went no sooner than its delay allowed); a request that should go is waited for with
:data:`DEADLINE`; one that must not go is shown held past that deadline (nothing else would
release it within it: :func:`build`'s slow-response time is longer), or for a short pump, which
a slow machine only makes longer."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from tests._scheduler_harness import ContractSpider, pump, settings_for, wait
from tests.crawls import REPO, finish, gaps_by_host, pages, stats_of
from webcrawl import meta as M
from webcrawl.demo.serve import start_server_process
from webcrawl.middlewares.spacing import HostSpacingMiddleware, reactor_sleep
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.hosts import delay_op

DELAY = 0.2
#: How long a request that should go out may take to get there on a loaded machine.
DEADLINE = 10.0
#: The slow-response time of :func:`build`: longer than any wait of these tests, so a request
#: held by mistake is never let go as the neighbour of a slow one within them.
NEVER_SLOW = 600.0


def queued(url: str) -> Request:
    """A request as the scheduler hands it out (leased from the crawl's queue)."""
    return Request(url, meta={M.LEASE: "me:1"})


class Wire:
    """Requests sent through the middleware as the downloader would: ``send`` starts one (it
    goes on the wire when the middleware lets it), ``answer`` finishes it."""

    def __init__(self, mw: HostSpacingMiddleware) -> None:
        self.mw = mw
        self.started: dict[str, float] = {}
        self.left: dict[str, float] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def send(self, request: Request) -> None:
        async def go() -> None:
            await self.mw.process_request(request)
            self.started[request.url] = time.monotonic()

        self.tasks[request.url] = asyncio.get_event_loop().create_task(go())

    def answer(self, request: Request) -> None:
        self.left[request.url] = time.monotonic()
        self.mw.request_left(request)

    def wait_started(self, url: str, timeout: float = DEADLINE) -> float:
        wait(lambda: url in self.started, timeout, f"{url} to go out")
        return self.started[url]


def build(delay: float = DELAY, *, slow: float = NEVER_SLOW, connections: int = 2,
          claim: Callable[[str], float] | None = None,
          held_until: Callable[[str], float] | None = None,
          sleep: Callable[[float], Awaitable[None]] = reactor_sleep,
          host_limit: int = 10_000) -> HostSpacingMiddleware:
    return HostSpacingMiddleware(MemoryStatsCollector(get_crawler()), delay_for=lambda host: delay,
                                 claim=claim, held_until=held_until, slow_seconds=slow,
                                 max_connections=connections, sleep=sleep, host_limit=host_limit)


def test_a_request_waits_for_the_previous_one_to_leave_plus_the_delay() -> None:
    mw = build()
    wire = Wire(mw)
    first, second, other = queued("http://a.test/1"), queued("http://a.test/2"), queued("http://b.test/1")
    wire.send(first)
    wire.wait_started(first.url)
    wire.send(second)
    wire.send(other)
    wire.wait_started(other.url)  # another host is not held
    pump(0.1)
    assert second.url not in wire.started
    wire.answer(first)  # answered 0.1 s after it went: the next goes a delay after that
    went = wire.wait_started(second.url)
    assert went - wire.left[first.url] >= DELAY
    assert mw.stats.get_value("webcrawl/spacing/waited") == 1
    assert mw.stats.get_value("webcrawl/spacing/waited_seconds") >= DELAY
    wire.answer(second)
    pump(DELAY)
    third = queued("http://a.test/3")
    wire.send(third)  # the delay has passed: no wait
    wire.wait_started(third.url)
    assert mw.stats.get_value("webcrawl/spacing/waited") == 1, "the third waited"


def test_a_request_popped_before_its_host_was_backed_off_waits_for_the_hold() -> None:
    """A bad answer (a 429) arrives while the next request to its host is already in line: that
    one waits until the process's hold of the host ends, not just the delay (the hold, 1 s, is
    five delays: the two differ even if the machine stalls between the 429 and the answer)."""
    holds: dict[str, float] = {}
    mw = build(held_until=lambda host: holds.get(host, float("-inf")))
    wire = Wire(mw)
    first, second = queued("http://a.test/1"), queued("http://a.test/2")
    other = queued("http://b.test/1")
    wire.send(first)
    wire.wait_started(first.url)
    wire.send(second)
    holds["a.test"] = time.monotonic() + 5 * DELAY  # the cost middleware saw a 429
    wire.answer(first)
    wire.send(other)
    wire.wait_started(other.url)  # another host is not held
    went = wire.wait_started(second.url)
    assert went >= holds["a.test"]
    assert mw.stats.get_value("webcrawl/spacing/backed_off") == 1
    # A host with no delay is held too.
    free = build(delay=0.0, held_until=lambda host: holds.get(host, float("-inf")))
    free_wire = Wire(free)
    holds["c.test"] = time.monotonic() + 2 * DELAY
    late = queued("http://c.test/1")
    free_wire.send(late)
    assert free_wire.wait_started(late.url) >= holds["c.test"]


def test_requests_arriving_together_go_one_at_a_time_in_arrival_order() -> None:
    """The stall case: requests to one host reach the middleware in the same instant."""
    mw = build()
    wire = Wire(mw)
    requests = [queued(f"http://a.test/{i}") for i in range(3)]
    for request in requests:
        wire.send(request)
    for request in requests:
        wire.wait_started(request.url)
        pump(0.02)
        wire.answer(request)
    starts = [wire.started[r.url] for r in requests]
    assert starts == sorted(starts)
    assert all(b - a >= DELAY for a, b in zip(starts, starts[1:]))
    assert mw.stats.get_value("webcrawl/spacing/waited") == 2


def test_a_request_cancelled_while_waiting_hands_the_host_on() -> None:
    mw = build()
    wire = Wire(mw)
    first, second, third = (queued(f"http://a.test/{i}") for i in range(3))
    wire.send(first)
    wire.wait_started(first.url)
    wire.send(second)
    wire.send(third)
    pump(0.02)
    wire.tasks[second.url].cancel()  # the engine dropped it
    wire.answer(first)
    went = wire.wait_started(third.url)
    assert went - wire.left[first.url] >= DELAY and second.url not in wire.started


def test_a_slow_response_stops_holding_its_host() -> None:
    mw = build(slow=0.4)
    wire = Wire(mw)
    slow, next_one = queued("http://a.test/slow"), queued("http://a.test/next")
    wire.send(slow)
    started = wire.wait_started(slow.url)
    wire.send(next_one)  # the slow one never answers in this test
    went = wire.wait_started(next_one.url)
    assert went - started >= 0.4
    assert mw.stats.get_value("webcrawl/spacing/slow_overlap") == 1


def test_at_most_the_connection_limit_is_in_flight() -> None:
    mw = build(slow=0.1, connections=2)
    wire = Wire(mw)
    requests = [queued(f"http://a.test/{i}") for i in range(3)]
    for request in requests:
        wire.send(request)
    wire.wait_started(requests[1].url)  # the second went beside the slow first
    pump(0.3)
    assert requests[2].url not in wire.started, "a third connection to the host"
    wire.answer(requests[0])
    went = wire.wait_started(requests[2].url)
    assert went - wire.left[requests[0].url] >= 0  # only once one of the two left
    with pytest.raises(ValueError, match="WEBCRAWL_MAX_CONNECTIONS_PER_HOST"):
        build(connections=0)
    with pytest.raises(ValueError, match="WEBCRAWL_SLOW_RESPONSE_SECONDS"):
        build(slow=0)


def test_a_timer_firing_early_does_not_let_the_request_go_early() -> None:
    naps: list[float] = []

    async def short(seconds: float) -> None:  # the first timer fires 50 ms early
        naps.append(seconds)
        await reactor_sleep(seconds - 0.05 if len(naps) == 1 else seconds)

    mw = build(sleep=short)
    wire = Wire(mw)
    first, second = queued("http://a.test/1"), queued("http://a.test/2")
    wire.send(first)
    wire.wait_started(first.url)
    wire.answer(first)
    wire.send(second)
    assert wire.wait_started(second.url) - wire.left[first.url] >= DELAY
    assert len(naps) == 2, "it slept again for what the timer was short"


def test_requests_from_outside_the_queue_claim_the_hosts_turn() -> None:
    claims: list[str] = []
    answers = iter([0.15, 0.0, 0.0])  # the first claim: another process's turn, 0.15 s left

    def claim(host: str) -> float:
        claims.append(host)
        return next(answers)

    mw = build(claim=claim)
    wire = Wire(mw)
    robots = Request("http://a.test/robots.txt", meta={M.PURPOSE: "robots"})
    began = time.monotonic()
    wire.send(robots)
    assert wire.wait_started(robots.url) - began >= 0.15
    wire.answer(robots)
    page = queued("http://a.test/1")  # from the queue, but it waits here: it claims a turn too
    wire.send(page)
    assert wire.wait_started(page.url) - wire.left[robots.url] >= DELAY
    assert claims == ["a.test"] * 3 and mw.stats.get_value("webcrawl/spacing/claimed") == 2
    wire.answer(page)
    pump(DELAY + 0.05)
    now = queued("http://a.test/2")  # the host is ready: it goes in its pop's turn, no claim
    wire.send(now)
    wire.wait_started(now.url)
    assert claims == ["a.test"] * 3


def test_a_robots_fetch_in_a_popped_requests_turn_claims_nothing_and_the_request_waits() -> None:
    """The robots.txt fetch made for a popped request goes at once, in that pop's turn (no claim
    in Redis); the popped request goes the delay after it left, and then past its pop's turn, so
    it takes a turn of its own: here another process holds the host's turn 0.3 s more."""
    claims: list[str] = []
    answers = iter([0.3, 0.0])

    def claim(host: str) -> float:
        claims.append(host)
        return next(answers)

    mw = build(claim=claim)
    wire = Wire(mw)
    robots = Request("http://a.test/robots.txt", meta={M.PURPOSE: "robots", M.TURN_TAKEN: True})
    page = queued("http://a.test/1")
    wire.send(robots)
    wire.wait_started(robots.url)  # at once: it claims nothing, nor waits (the page's turn)
    assert claims == [] and mw.stats.get_value("webcrawl/spacing/waited") is None
    wire.send(page)
    pump(0.05)
    wire.answer(robots)
    assert wire.wait_started(page.url) - wire.left[robots.url] >= DELAY + 0.25
    assert claims == ["a.test", "a.test"]


def test_without_a_delay_queued_requests_to_a_host_overlap() -> None:
    """Delay 0 (a throughput crawl): nothing to space, so nothing is held."""
    mw = build(delay=0.0)
    wire = Wire(mw)
    for i in range(3):
        wire.send(queued(f"http://a.test/{i}"))
    for i in range(3):  # none answered: held, they would not go within the deadline
        wire.wait_started(f"http://a.test/{i}")
    assert mw.stats.get_value("webcrawl/spacing/waited") is None


def test_without_a_delay_a_host_stays_unspaced_after_its_robots_fetch() -> None:
    """The robots.txt fetch (from outside the queue) leaves the host a state; the queued
    requests that follow still overlap, up to Scrapy's own per-domain limit, not this one's."""
    mw = build(delay=0.0, connections=2, claim=lambda host: 0.0)
    wire = Wire(mw)
    robots = Request("http://a.test/robots.txt", meta={M.PURPOSE: "robots"})
    wire.send(robots)
    wire.wait_started(robots.url)
    wire.answer(robots)
    for i in range(5):
        wire.send(queued(f"http://a.test/{i}"))
    for i in range(5):  # none answered: five in flight, more than the connection limit
        wire.wait_started(f"http://a.test/{i}")
    assert mw.stats.get_value("webcrawl/spacing/waited") is None


def test_without_a_delay_requests_in_flight_to_a_host_stay_within_the_domain_limit() -> None:
    """Scrapy's downloader starts every request queued for a host at once, so the per-domain
    limit is kept here: the fourth of four waits until one of the three in flight leaves."""
    mw = HostSpacingMiddleware(MemoryStatsCollector(get_crawler()), delay_for=lambda host: 0.0,
                               unspaced_connections=3, slow_seconds=NEVER_SLOW)
    wire = Wire(mw)
    requests = [queued(f"http://a.test/{i}") for i in range(4)]
    for request in requests:
        wire.send(request)
    for request in requests[:3]:
        wire.wait_started(request.url)
    pump(0.1)
    assert requests[3].url not in wire.started, "a fourth request in flight"
    wire.answer(requests[1])
    assert wire.wait_started(requests[3].url) >= wire.left[requests[1].url]
    assert mw.stats.get_value("webcrawl/spacing/slow_overlap") is None


def test_a_long_line_wakes_each_waiting_request_about_once() -> None:
    """Forty requests to one host in line: each change wakes the first in line only, so the
    waits grow with the line, not with its square."""
    mw = build(delay=0.005, connections=1)
    waits: list[float | None] = []
    turns: list[object] = []
    wait_for, wait_turn = mw._wait, mw._wait_turn

    async def counted_wait(state: Any, seconds: float | None) -> None:
        waits.append(seconds)
        await wait_for(state, seconds)

    async def counted_turn(state: Any, ticket: object) -> None:
        turns.append(ticket)
        await wait_turn(state, ticket)

    mw._wait, mw._wait_turn = counted_wait, counted_turn  # type: ignore[method-assign]
    wire = Wire(mw)
    requests = [queued(f"http://a.test/{i}") for i in range(40)]
    for request in requests:
        wire.send(request)
    for request in requests:
        wire.wait_started(request.url)
        wire.answer(request)
    starts = [wire.started[r.url] for r in requests]
    assert starts == sorted(starts), "arrival order"
    assert len(turns) <= 2 * len(requests), f"{len(turns)} turn waits for 40 requests"
    assert len(waits) <= 4 * len(requests), f"{len(waits)} change waits for 40 requests"


def test_from_a_crawl_two_processes_share_each_hosts_turn_and_delay(redis_url: str, tmp_path: Path) -> None:
    settings = settings_for(redis_url, "spaced", tmp_path, WEBCRAWL_DOMAIN_DELAY_SECONDS=0.1,
                            WEBCRAWL_SLOW_RESPONSE_SECONDS=3)
    runtimes, wires = [], []
    try:
        for _ in range(2):
            crawler = get_crawler(ContractSpider, settings)
            crawler.spider = crawler._create_spider()
            mw = HostSpacingMiddleware.from_crawler(crawler)
            runtimes.append(CrawlRuntime.of(crawler))
            wires.append(Wire(mw))
        assert mw.slow_seconds == 3 and mw.delay_for("a.test") == 0.1
        runtimes[0].batch.land("slow.test", delay_op(0.4))  # slow.test's robots.txt: Crawl-delay 0.4
        runtimes[0].batch.land("fast.test", delay_op(0.01))
        runtimes[0].flush()
        assert mw.delay_for("slow.test") == 0.4
        assert mw.delay_for("fast.test") == 0.1, "never below the crawl's own delay"
        # Each process fetches robots.txt: outside the queue, so they take turns through Redis.
        one, two = (Request("http://slow.test/robots.txt") for _ in range(2))
        wires[0].send(one)
        wires[0].wait_started(one.url)
        wires[0].answer(one)
        wires[1].send(two)
        went = wires[1].wait_started(two.url)
        assert went - wires[0].started[one.url] >= 0.4
        assert wires[1].mw.stats.get_value("webcrawl/spacing/waited") == 1
    finally:
        for runtime in runtimes:
            runtime.close()


# -- a real crawl whose reactor stalls ------------------------------------------------------------

STALLING_CRAWL = textwrap.dedent(
    """
    import json, sys, time, zlib
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.project import get_project_settings
    from webcrawl.spiders.follow import FollowSpider

    config = json.loads(sys.argv[1])

    class StallingSpider(FollowSpider):
        name = "stalling"

        def parse(self, response, **kwargs):
            # Every third page keeps the reactor busy for twice the delay, as a CPU-heavy parse
            # would: requests popped before the stall reach the wire together after it.
            if zlib.crc32(response.url.encode()) % 3 == 0:
                until = time.monotonic() + config["stall"]
                while time.monotonic() < until:
                    pass
            yield from super().parse(response, **kwargs)

    settings = get_project_settings()
    settings.setdict(config["settings"], priority="cmdline")
    process = CrawlerProcess(settings)
    process.crawl(StallingSpider, seeds=config["seeds"])
    process.start()
    """
)


def crawl_in_a_process(config: dict[str, Any], tmp_path: Path) -> str:
    """Run :data:`STALLING_CRAWL` with ``config`` (``stall`` 0: no stall) to its end; its log. It
    must exit cleanly, with no traceback."""
    env = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log_path = tmp_path / "crawl.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-c", STALLING_CRAWL, json.dumps(config)],
                                   cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    assert finish(process, 120) == 0, log_path.read_text()[-3000:]
    text = log_path.read_text()
    assert "Traceback" not in text, text[-3000:]
    return text


def test_a_stalled_reactor_does_not_send_two_requests_to_a_host_together(
        redis_url: str, tmp_path: Path) -> None:
    delay = 0.2
    with start_server_process("generated", 3, tmp_path / "server.log", pages=36, min_kb=1,
                              max_kb=2, links=10) as site:
        seeds = ",".join(site.base_url(h) + "/" for h in site.hosts)
        settings: dict[str, Any] = {
            "WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_CRAWL_NAME": "stalled",
            "WEBCRAWL_DOMAIN_DELAY_SECONDS": delay, "LOG_LEVEL": "INFO",
            "WEBCRAWL_DATA_DIR": str(tmp_path / "data"),
            "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8"}
        text = crawl_in_a_process({"seeds": seeds, "stall": 2 * delay, "settings": settings},
                                  tmp_path)
        server_log = site.read_log()
    stats = stats_of(text)
    assert len(pages(server_log)) >= 30, "the crawl fetched too little to say anything"
    assert stats.get("downloader/response_count", 0) >= len(pages(server_log))
    gaps = [g for host_gaps in gaps_by_host(server_log).values() for g in host_gaps]  # robots.txt too
    short = sorted(g for g in gaps if g < delay)
    assert not short, f"{len(short)} gaps shorter than {delay} s: {short}"


DELAY_SLOTS = 1.5


def test_pages_waiting_after_robots_leave_their_slots_to_other_hosts(
        redis_url: str, tmp_path: Path) -> None:
    """Two slots (CONCURRENT_REQUESTS = 2) and six new hosts at a 1.5 s delay: each host's first
    page waits the delay after its robots.txt. Held in a slot, the first two pages would keep
    every other host's robots.txt back until they went; given up, all six hosts start at once
    (six robots.txt answers over two slots take far less than the delay, even on a loaded
    machine)."""
    with start_server_process("generated", 6, tmp_path / "server.log", pages=12, min_kb=1,
                              max_kb=2, links=10) as site:
        seeds = ",".join(site.base_url(h) + "/" for h in site.hosts)
        settings: dict[str, Any] = {
            "WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_CRAWL_NAME": "slots",
            "WEBCRAWL_DOMAIN_DELAY_SECONDS": DELAY_SLOTS, "CONCURRENT_REQUESTS": 2,
            "LOG_LEVEL": "INFO",
            "WEBCRAWL_DATA_DIR": str(tmp_path / "data"),
            "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8"}
        text = crawl_in_a_process({"seeds": seeds, "stall": 0, "settings": settings}, tmp_path)
        server_log = sorted(site.read_log(), key=lambda e: e.mono)
    robots = [e for e in server_log if e.path == "/robots.txt"]
    assert len(robots) == 6 and len(pages(server_log)) >= 12
    first_page = min(e.mono for e in pages(server_log))
    late = [e.host for e in robots if e.mono > first_page]
    assert not late, f"robots.txt of {late} waited for a page to go out first"
    stats = stats_of(text)
    assert stats.get("webcrawl/spacing/slot_given_up", 0) >= 6
    short = [g for gaps in gaps_by_host(server_log).values() for g in gaps if g < DELAY_SLOTS]
    assert not short, f"gaps under the delay: {short}"


def test_idle_hosts_are_forgotten_without_a_scan_per_answer() -> None:
    """The host table is bounded: past its limit, idle hosts whose delay has passed are dropped;
    while most hosts stay busy, the next scan waits for the table to double, so answers do not
    each pay a scan of every host."""
    mw = build(delay=0.01, host_limit=4)  # PRUNE_AT hosts in a crawl; a few here
    wire = Wire(mw)
    busy = [queued(f"http://busy{i}.test/") for i in range(6)]
    for request in busy:
        wire.send(request)
    for request in busy:
        wire.wait_started(request.url)
    scans = []
    prune = mw._prune
    mw._prune = lambda now: (scans.append(len(mw._hosts)), prune(now))  # type: ignore[method-assign]
    for i in range(12):
        request = queued(f"http://idle{i}.test/")
        wire.send(request)
        wire.wait_started(request.url)
        pump(0.02)  # past its delay
        wire.answer(request)
    assert len(mw._hosts) <= 2 * 7, "idle hosts are forgotten"
    assert all(f"busy{i}.test" in mw._hosts for i in range(6)), "busy hosts are kept"
    assert len(scans) <= 3, f"a scan per answer: {scans}"
