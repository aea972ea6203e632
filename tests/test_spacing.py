"""HostSpacingMiddleware: unit tests on a ManualClock (the middleware's waits advance it), the
shared delay hash in a real redis-server, and a real crawl whose reactor stalls, read back from
the demo server's own request log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Coroutine, Generator
from pathlib import Path
from typing import Any

import pytest
import redis
from scrapy.http import Request
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

from tests.crawls import REPO, finish, gaps_by_host, pages, stats_of
from webcrawl.clock import ManualClock
from webcrawl.demo.serve import start_server_process
from webcrawl.middlewares.spacing import HostSpacingMiddleware
from webcrawl.state.keys import CrawlKeys

DELAY = 0.5


class Pause:
    """An awaitable that suspends its coroutine once (a timer that has not fired yet)."""

    def __await__(self) -> Generator[None, None, None]:
        yield


async def wait_turn(turn: Deferred[None]) -> None:
    """The middleware's wait for its turn, for coroutines driven by hand."""
    while not turn.called:
        await Pause()


class Sleeper:
    """The middleware's sleep on a ManualClock: records each wait; the wait completes at once
    (the clock advances by it; ``short_by``: the first timer fires a little early)."""

    def __init__(self, clock: ManualClock, *, short_by: float = 0.0) -> None:
        self.clock, self.short_by = clock, short_by
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds - self.short_by)
        self.short_by = 0.0


def build(clock: ManualClock, sleeper: Sleeper, **kwargs: Any) -> HostSpacingMiddleware:
    stats = MemoryStatsCollector(get_crawler())
    return HostSpacingMiddleware(stats, default_delay=DELAY, clock=clock, sleep=sleeper,
                                 wait=wait_turn, **kwargs)


def run(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine whose awaits all complete at once."""
    with pytest.raises(StopIteration):
        coroutine.send(None)


def test_a_request_waits_for_the_previous_one_to_leave_plus_the_delay() -> None:
    clock = ManualClock()
    sleeper = Sleeper(clock)
    mw = build(clock, sleeper)
    first = Request("http://a.example/1")
    run(mw.process_request(first))
    assert sleeper.waits == []
    clock.advance(0.1)
    mw.request_left(first)  # answered 0.1 s after it went
    left = clock.time()
    clock.advance(0.2)
    second = Request("http://a.example/2")
    run(mw.process_request(second))
    assert sleeper.waits == [pytest.approx(0.3)]
    assert clock.time() == pytest.approx(left + DELAY)
    run(mw.process_request(Request("http://b.example/1")))  # another host is not held
    mw.request_left(second)
    clock.advance(DELAY)
    run(mw.process_request(Request("http://a.example/3")))  # the delay has passed: no wait
    assert sleeper.waits == [pytest.approx(0.3)]
    assert mw.stats.get_value("webcrawl/spacing/waited") == 1
    assert mw.stats.get_value("webcrawl/spacing/waited_seconds") == pytest.approx(0.3)


def test_requests_arriving_together_go_one_at_a_time_in_arrival_order() -> None:
    """The stall case: requests to one host reach the middleware in the same instant."""
    clock = ManualClock()
    sleeper = Sleeper(clock)
    mw = build(clock, sleeper)
    requests = [Request(f"http://a.example/{i}") for i in range(3)]
    run(mw.process_request(requests[0]))
    second, third = (mw.process_request(r) for r in requests[1:])
    second.send(None)
    third.send(None)  # both wait for their turn
    second.send(None)
    third.send(None)  # still waiting: the first has not left
    mw.request_left(requests[1])  # not the host's request: changes nothing
    second.send(None)
    clock.advance(0.05)
    mw.request_left(requests[0])
    third.send(None)  # still waiting: the second goes first
    run(second)
    assert sleeper.waits == [pytest.approx(DELAY)]
    mw.request_left(requests[1])
    run(third)
    assert sleeper.waits == [pytest.approx(DELAY), pytest.approx(DELAY)]
    assert mw.stats.get_value("webcrawl/spacing/waited") == 2


def test_a_request_cancelled_while_waiting_hands_the_host_on() -> None:
    clock = ManualClock()
    sleeper = Sleeper(clock)
    mw = build(clock, sleeper)
    first, second, third = (Request(f"http://a.example/{i}") for i in range(3))
    run(mw.process_request(first))
    waiting_second = mw.process_request(second)
    waiting_second.send(None)
    waiting_third = mw.process_request(third)
    waiting_third.send(None)
    with pytest.raises(ValueError):
        waiting_second.throw(ValueError("cancelled"))  # gives up its place in the line
    mw.request_left(first)
    run(waiting_third)
    assert sleeper.waits == [pytest.approx(DELAY)]


def test_robots_fetches_and_requests_ignoring_robots_count_too() -> None:
    clock = ManualClock()
    sleeper = Sleeper(clock)
    mw = build(clock, sleeper)
    robots = Request("http://a.example/robots.txt",
                     meta={"dont_obey_robotstxt": True, "webcrawl_purpose": "robots"})
    page = Request("http://a.example/1", meta={"dont_obey_robotstxt": True})
    run(mw.process_request(robots))
    mw.request_left(robots)
    run(mw.process_request(page))
    mw.request_left(page)
    run(mw.process_request(Request("http://a.example/2")))
    assert sleeper.waits == [pytest.approx(DELAY), pytest.approx(DELAY)]


def test_a_timer_firing_early_does_not_let_the_request_go_early() -> None:
    clock = ManualClock()
    sleeper = Sleeper(clock, short_by=0.001)
    mw = build(clock, sleeper)
    first = Request("http://a.example/1")
    run(mw.process_request(first))
    mw.request_left(first)
    left = clock.time()
    run(mw.process_request(Request("http://a.example/2")))
    assert clock.time() >= left + DELAY
    assert len(sleeper.waits) == 2  # slept again for the millisecond it was short


def test_the_shared_delay_raises_the_default_and_is_read_once_per_cache_period(
        redis_client: redis.Redis) -> None:
    clock = ManualClock()
    sleeper = Sleeper(clock)
    key = CrawlKeys("spaced").delay
    reads: list[str] = []

    def lookup(host: str) -> float | None:
        reads.append(host)
        value = redis_client.hget(key, host)
        return float(value) if value is not None else None

    mw = build(clock, sleeper, lookup=lookup, cache_seconds=5.0)
    redis_client.hset(key, mapping={"slow.example": 2.0, "fast.example": 0.1})
    assert mw.delay_for("slow.example") == 2.0
    assert mw.delay_for("fast.example") == DELAY  # never below the crawl's default
    assert mw.delay_for("other.example") == DELAY
    redis_client.hset(key, "slow.example", 3.0)
    for _ in range(3):
        request = Request("http://slow.example/")
        run(mw.process_request(request))
        mw.request_left(request)
    assert sleeper.waits == [pytest.approx(2.0), pytest.approx(2.0)]  # cached: 2.0, not 3.0
    assert reads == ["slow.example", "fast.example", "other.example"]
    clock.advance(5.0)
    assert mw.delay_for("slow.example") == 3.0
    assert reads.count("slow.example") == 2


def test_a_redis_error_keeps_the_last_known_delay(redis_client: redis.Redis) -> None:
    clock = ManualClock()
    answers: list[float | Exception] = [2.0, redis.ConnectionError("gone")]

    def lookup(host: str) -> float | None:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    mw = build(clock, Sleeper(clock), lookup=lookup, cache_seconds=1.0)
    assert mw.delay_for("a.example") == 2.0
    clock.advance(1.0)
    assert mw.delay_for("a.example") == 2.0


def test_from_crawler_reads_the_crawls_default_and_delay_hash(redis_url: str, redis_client: redis.Redis,
                                                              tmp_path: Path) -> None:
    settings = {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_DATA_DIR": str(tmp_path),
                "WEBCRAWL_CRAWL_NAME": "spaced", "WEBCRAWL_DOMAIN_DELAY_SECONDS": 0.25}
    mw = build_from_crawler(HostSpacingMiddleware, get_crawler(settings_dict=settings))
    redis_client.hset(CrawlKeys("spaced").delay, "slow.example", 1.5)
    assert mw.default_delay == 0.25
    assert mw.delay_for("slow.example") == 1.5
    assert mw.delay_for("fast.example") == 0.25


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
    middlewares = dict(settings.getdict("DOWNLOADER_MIDDLEWARES"))  # the project's stack...
    if config["spacing"]:  # ...with the spacing middleware last
        middlewares["webcrawl.middlewares.spacing.HostSpacingMiddleware"] = 950
    settings.set("DOWNLOADER_MIDDLEWARES", middlewares, priority="cmdline")
    process = CrawlerProcess(settings)
    process.crawl(StallingSpider, seeds=config["seeds"])
    process.start()
    """
)


def stalling_crawl(tmp_path: Path, name: str, seeds: str, delay: float,
                   settings: dict[str, object], *, spacing: bool = True) -> dict[str, object]:
    config = {"seeds": seeds, "stall": 2 * delay, "settings": settings, "spacing": spacing}
    env = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log_path = tmp_path / f"{name}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-c", STALLING_CRAWL, json.dumps(config)],
                                   cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    assert finish(process, 120) == 0, log_path.read_text()[-3000:]
    text = log_path.read_text()
    assert "Traceback" not in text, text[-3000:]
    return stats_of(text)


def test_a_stalled_reactor_does_not_send_two_requests_to_a_host_together(
        redis_url: str, tmp_path: Path) -> None:
    delay = 0.2
    with start_server_process("generated", 3, tmp_path / "server.log", pages=36, min_kb=1,
                              max_kb=2, links=10) as site:
        seeds = ",".join(site.base_url(h) + "/" for h in site.hosts)
        settings = {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_CRAWL_NAME": "stalled",
                    "WEBCRAWL_DOMAIN_DELAY_SECONDS": delay, "LOG_LEVEL": "INFO",
                    "WEBCRAWL_DATA_DIR": str(tmp_path / "data"),
                    "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8"}
        stats = stalling_crawl(tmp_path, "crawl", seeds, delay, settings)
        log = site.read_log()
    assert len(pages(log)) >= 30, "the crawl fetched too little to say anything"
    assert stats.get("downloader/response_count", 0) >= len(pages(log))
    gaps = [g for host_gaps in gaps_by_host(log).values() for g in host_gaps]  # robots.txt too
    short = sorted(g for g in gaps if g < delay)
    assert not short, f"{len(short)} gaps shorter than {delay} s: {short}"


def test_without_a_delay_requests_to_a_host_overlap() -> None:
    """Delay 0 (a throughput crawl): nothing to space, so nothing is held, not even one request
    behind another still in the downloader."""
    clock = ManualClock()
    sleeper = Sleeper(clock)
    mw = HostSpacingMiddleware(MemoryStatsCollector(get_crawler()), default_delay=0.0, clock=clock,
                               sleep=sleeper, wait=wait_turn)
    for i in range(3):
        run(mw.process_request(Request(f"http://a.example/{i}")))  # none left the downloader yet
    assert sleeper.waits == [] and mw.stats.get_value("webcrawl/spacing/waited") is None
