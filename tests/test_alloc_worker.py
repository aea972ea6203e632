"""Planning never blocks the crawl (webcrawl.extensions.allocator, _alloc_worker): an allocation
over a large table runs on the allocator's worker thread while the reactor's timers keep firing
and the crawl's own writes go and are answered; waiting for another process's planning lock is a
timer on the reactor, never a sleep. An in-process crawler on a real redis-server, the reactor's
event loop driven by the test; every wait is on a condition, with a deadline."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.utils.asyncio import create_looping_call
from scrapy.utils.test import get_crawler

from tests._scheduler_harness import settings_for
from tests.runtimes import run, until
from tests.test_alloc_lock import LockSpider
from webcrawl.extensions.allocator import Allocator
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.pagestore import observe_op

PAGES = 30_000
HOSTS = 300


@pytest.fixture
def crawl(redis_url: str, tmp_path: Path) -> Iterator[tuple[Allocator, CrawlRuntime]]:
    crawler = get_crawler(LockSpider, settings_for(redis_url, "unblocked", tmp_path))
    crawler.spider = crawler._create_spider()
    runtime = CrawlRuntime.of(crawler)
    allocator = Allocator(runtime, crawler)
    yield allocator, runtime
    allocator.jobs.close()
    runtime.close()


class Ticks:
    """A 10 ms timer on the reactor noting, at each tick, whether ``busy()`` held."""

    def __init__(self, busy: Callable[[], bool]) -> None:
        self.busy = busy
        self.seen: list[bool] = []
        self.loop = create_looping_call(lambda: self.seen.append(self.busy()))

    def __enter__(self) -> Ticks:
        self.loop.start(0.01, now=False)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.loop.stop()

    @property
    def while_busy(self) -> int:
        return sum(self.seen)


def _fill(runtime: CrawlRuntime) -> None:
    now, product = runtime.clock.time(), runtime.types.id("product")
    for i in range(PAGES):
        runtime.batch.land(f"h{i % HOSTS}.shop.test", observe_op(
            f"http://h{i % HOSTS}.shop.test/product/{i}", full=True, time=now - i % 977,
            record_hash=f"{i:016x}", type_id=product, billed=1.0))
        if i % 2000 == 1999:
            runtime.flush()
    runtime.flush()


def test_a_plan_under_way_leaves_the_reactor_free(crawl: tuple[Allocator, CrawlRuntime]) -> None:
    """A one-run crawl opens: its first allocation (a takeover: every record loaded, planned,
    intervals written) runs while the reactor's timer fires and the crawl's writes are answered;
    the crawl may not end before it is done, and may after."""
    allocator, runtime = crawl
    _fill(runtime)
    answered: list[bool] = []  # per write of the crawl's own: whether the plan was under way
    opened: list[Any] = []
    closed: list[Any] = []

    def planned() -> bool:
        return runtime.stats.get_value("webcrawl/allocator/runs") == 1

    async def scenario() -> Ticks:
        with Ticks(lambda: allocator.jobs.busy) as ticks:
            allocator.spider_opened().addBoth(opened.append)
            await until(lambda: bool(opened), 30)
            assert opened == [None] and allocator.jobs.busy and not planned(), \
                "the first allocation ran before the spider opened"
            with pytest.raises(DontCloseSpider):
                allocator.spider_idle()  # it pulls the cycle's revisits forward: wait for it
            for k in range(3):  # the crawl goes on writing (a fetch landing) while it plans
                runtime.batch.land("h0.shop.test", observe_op(
                    f"http://h0.shop.test/extra/{k}", full=True, time=runtime.clock.time(),
                    record_hash="ab" * 8, type_id=0, billed=1.0),
                    lambda reply: answered.append(allocator.jobs.busy))
                await until(lambda: len(answered) > k, 60)
            await until(planned, 120)
            assert allocator.spider_idle() is None, "its first allocation done, a one-run crawl may end"
            allocator.spider_closed_soon().addBoth(closed.append)  # type: ignore[union-attr]
            await until(lambda: bool(closed), 120)
        return ticks

    ticks = run(scenario())
    print(f"{ticks.while_busy} ticks during the plan, {len(ticks.seen)} in all; "
          f"{runtime.stats.get_value('webcrawl/allocator/seconds'):.2f} s planning")
    assert ticks.while_busy >= 3, f"the reactor's timer fired {ticks.while_busy} times during the plan"
    assert answered[0], "the crawl's first write waited for the plan"
    # The pages landed while it planned may be in its table already (its load reads them).
    assert PAGES <= runtime.stats.get_value("webcrawl/allocator/pages") <= PAGES + 3
    assert runtime.stats.get_value("webcrawl/allocator/intervals") > PAGES / 2
    assert runtime.pages.get("http://h7.shop.test/product/7", "h7.shop.test").iv > 0  # type: ignore[union-attr]


def test_waiting_for_the_planning_lock_is_a_timer_not_a_sleep(
        crawl: tuple[Allocator, CrawlRuntime]) -> None:
    """Another process holds the planning lock (it is starting a cycle): opening waits, the
    reactor turning meanwhile, and starts its cycle once the lock is free."""
    allocator, runtime = crawl
    ledger = runtime.ledger
    assert ledger.lock("another process", 60)
    opened: list[Any] = []

    async def scenario() -> Ticks:
        with Ticks(lambda: not opened) as ticks:
            allocator.spider_opened().addBoth(opened.append)
            await until(lambda: ticks.while_busy >= 10, 30)
            assert not opened and allocator.cycle is None, "opened under another's lock"
            assert ledger.unlock("another process")
            await until(lambda: bool(opened), 30)
        closed: list[Any] = []
        allocator.spider_closed_soon().addBoth(closed.append)  # type: ignore[union-attr]
        await until(lambda: bool(closed), 60)
        return ticks

    ticks = run(scenario())
    assert ticks.while_busy >= 10 and opened == [None]
    assert allocator.cycle is not None and runtime.cycle == allocator.cycle.id
    assert runtime.stats.get_value("webcrawl/cycles/started") == 1
    assert ledger.workers(allocator.cycle.id) == {}, "the close did not leave the cycle"
    assert allocator.planner.lock.holder() is None and ledger.planning_lock.holder() is None


def test_a_planning_lock_never_freed_closes_the_spider_after_its_wait(
        crawl: tuple[Allocator, CrawlRuntime]) -> None:
    allocator, runtime = crawl
    assert runtime.ledger.lock("a stuck process", 60)
    allocator.lock_wait_seconds = 0.3
    opened: list[Any] = []

    async def scenario() -> Ticks:
        with Ticks(lambda: not opened) as ticks:
            allocator.spider_opened().addBoth(opened.append)
            await until(lambda: bool(opened), 30)
        return ticks

    ticks = run(scenario())
    [failure] = opened
    assert failure.check(CloseSpider) and failure.value.reason == "planning_lock_timeout"
    assert ticks.while_busy >= 3 and allocator.cycle is None
