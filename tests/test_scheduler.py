"""Contract suite of ReadyQueueScheduler, on a real redis-server.

Every test runs twice: straight, and with the scheduler closed and a new one opened on the same
crawl between enqueueing and dequeueing (``cycle``), which must change nothing: the state is Redis's.
Time is a ManualClock, so delays are tested without sleeping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest
import scrapy
from scrapy.utils.test import get_crawler

from webcrawl.clock import ManualClock
from webcrawl.scheduler import ReadyQueueScheduler
from webcrawl.state.connection import connect
from webcrawl.state.frontier import Frontier
from webcrawl.state.keys import CrawlKeys
from webcrawl.state.seen import BloomParams


class ContractSpider(scrapy.Spider):
    name = "contract"

    def parse(self, response: object) -> None:
        pass

    def parse_item(self, response: object) -> None:
        pass

    def on_error(self, failure: object) -> None:
        pass


Factory = Callable[..., ReadyQueueScheduler]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def make(redis_url: str, clock: ManualClock) -> Iterator[Factory]:
    opened: list[ReadyQueueScheduler] = []
    crawler = get_crawler(ContractSpider)
    spider = ContractSpider()

    def factory(*, delay: float = 1.0, cap: int = 0, lease: float = 60.0,
                crawl: str = "contract") -> ReadyQueueScheduler:
        frontier = Frontier(connect(redis_url), CrawlKeys(crawl), BloomParams(10_000, 0.01),
                            cap=cap, default_delay=delay, lease_seconds=lease)
        scheduler = ReadyQueueScheduler(frontier, stats=crawler.stats, clock=clock)
        scheduler.open(spider)
        opened.append(scheduler)
        return scheduler

    factory.stats = crawler.stats  # type: ignore[attr-defined]
    factory.spider = spider  # type: ignore[attr-defined]
    yield factory
    for s in opened:
        s.close("finished")


@pytest.fixture(params=["straight", "reopened"])
def cycle(request: pytest.FixtureRequest, make: Factory) -> Callable[..., ReadyQueueScheduler]:
    """Return the scheduler to dequeue from: the same one, or a new one after close + reopen."""

    def go(scheduler: ReadyQueueScheduler, **kwargs: object) -> ReadyQueueScheduler:
        if request.param == "straight":
            return scheduler
        scheduler._flush_safely()
        scheduler.close("shutdown")
        return make(**kwargs)

    return go


def drain(scheduler: ReadyQueueScheduler, clock: ManualClock, step: float = 1.0,
          limit: int = 1000) -> list[scrapy.Request]:
    """Dequeue everything, advancing the clock when nothing is ready."""
    out: list[scrapy.Request] = []
    for _ in range(limit):
        request = scheduler.next_request()
        if request is not None:
            out.append(request)
        elif scheduler._counts.queued == 0 and not scheduler._pending:
            return out
        else:
            clock.advance(step)
    raise AssertionError("scheduler did not drain")


def test_round_trip_keeps_every_field(make: Factory, cycle: Callable[..., ReadyQueueScheduler]) -> None:
    s = make()
    spider = make.spider  # type: ignore[attr-defined]
    original = scrapy.Request(
        "http://a.test/p?q=1", method="POST", body=b"\xff\x00binary", headers={"X-Y": "z"},
        cookies={"c": "v"}, meta={"depth": 2, "k": [1, "two"]}, priority=7,
        cb_kwargs={"n": 1}, flags=["f"], callback=spider.parse_item, errback=spider.on_error,
    )
    assert s.enqueue_request(original)
    assert s.has_pending_requests()
    s = cycle(s)
    got = s.next_request()
    assert got is not None
    assert (got.url, got.method, got.body, got.priority) == (original.url, "POST", original.body, 7)
    assert got.headers.getlist("X-Y") == [b"z"]
    assert got.cookies == {"c": "v"}
    assert got.meta == {"depth": 2, "k": [1, "two"]}
    assert (got.cb_kwargs, got.flags) == ({"n": 1}, ["f"])
    assert got.callback == spider.parse_item and got.errback == spider.on_error
    assert type(got) is scrapy.Request


def test_subclass_survives(make: Factory, cycle: Callable[..., ReadyQueueScheduler]) -> None:
    s = make()
    s.enqueue_request(scrapy.FormRequest("http://a.test/form", formdata={"a": "b"}))
    s = cycle(s)
    got = s.next_request()
    assert isinstance(got, scrapy.FormRequest) and got.body == b"a=b"


def test_priority_order_then_fifo(make: Factory, clock: ManualClock,
                                  cycle: Callable[..., ReadyQueueScheduler]) -> None:
    s = make(delay=1.0)
    for i, priority in enumerate([0, 5, 0, 5, -3, 0]):
        s.enqueue_request(scrapy.Request(f"http://a.test/{i}", priority=priority))
    s = cycle(s)
    urls = [r.url.rsplit("/", 1)[1] for r in drain(s, clock)]
    assert urls == ["1", "3", "0", "2", "5", "4"]


def test_domain_delay_is_respected(make: Factory, clock: ManualClock,
                                   cycle: Callable[..., ReadyQueueScheduler]) -> None:
    s = make(delay=2.0)
    for i in range(3):
        s.enqueue_request(scrapy.Request(f"http://a.test/{i}"))
    s.enqueue_request(scrapy.Request("http://b.test/0"))
    s = cycle(s, delay=2.0)
    first = [s.next_request(), s.next_request()]
    assert sorted(r.url for r in first) == ["http://a.test/0", "http://b.test/0"]
    assert s.next_request() is None  # a.test is not ready again yet
    clock.advance(1.9)
    assert s.next_request() is None
    assert s.has_pending_requests()
    clock.advance(0.2)
    assert s.next_request().url == "http://a.test/1"
    assert s.next_request() is None


def test_per_domain_delay_overrides_default(make: Factory, clock: ManualClock,
                                            cycle: Callable[..., ReadyQueueScheduler]) -> None:
    s = make(delay=1.0)
    s.frontier.set_delay("slow.test", 10.0)
    for i in range(2):
        s.enqueue_request(scrapy.Request(f"http://slow.test/{i}"))
        s.enqueue_request(scrapy.Request(f"http://fast.test/{i}"))
    s = cycle(s)
    assert {s.next_request().url, s.next_request().url} == {"http://slow.test/0", "http://fast.test/0"}
    clock.advance(1.0)
    assert s.next_request().url == "http://fast.test/1"
    assert s.next_request() is None
    clock.advance(9.0)
    assert s.next_request().url == "http://slow.test/1"


def test_earliest_ready_domain_goes_first(make: Factory, clock: ManualClock,
                                          cycle: Callable[..., ReadyQueueScheduler]) -> None:
    s = make(delay=5.0)
    s.enqueue_request(scrapy.Request("http://a.test/0"))
    assert s.next_request().url == "http://a.test/0"  # a.test next allowed at +5
    clock.advance(1.0)
    s.enqueue_request(scrapy.Request("http://a.test/1"))
    s.enqueue_request(scrapy.Request("http://b.test/0"))
    s = cycle(s, delay=5.0)
    assert s.next_request().url == "http://b.test/0"
    assert s.next_request() is None
    clock.advance(4.0)
    assert s.next_request().url == "http://a.test/1"


def test_duplicates_filtered_canonically(make: Factory, clock: ManualClock,
                                         cycle: Callable[..., ReadyQueueScheduler]) -> None:
    s = make()
    stats = make.stats  # type: ignore[attr-defined]
    assert s.enqueue_request(scrapy.Request("http://a.test/p?b=2&a=1"))
    assert not s.enqueue_request(scrapy.Request("http://a.test/p?b=2&a=1"))
    s = cycle(s)
    # Another process (or this one after a restart) still knows it through the shared filter.
    s.enqueue_request(scrapy.Request("http://a.test/p?a=1&b=2"))
    s.enqueue_request(scrapy.Request("http://a.test/p?a=1&b=2", dont_filter=True))
    got = drain(s, clock)
    assert [r.url for r in got] == ["http://a.test/p?b=2&a=1", "http://a.test/p?a=1&b=2"]
    assert got[1].dont_filter
    assert stats.get_value("dupefilter/filtered") == 2
    assert stats.get_value("dupefilter/filtered/local_cache") + (
        stats.get_value("dupefilter/filtered/bloom") or 0) == 2


def test_frontier_cap_evicts_lowest_priority(make: Factory, clock: ManualClock,
                                             cycle: Callable[..., ReadyQueueScheduler]) -> None:
    s = make(cap=3)
    for i, priority in enumerate([1, 9, 5, 0, 7]):
        s.enqueue_request(scrapy.Request(f"http://a.test/{i}", priority=priority))
    s = cycle(s, cap=3)
    assert [r.priority for r in drain(s, clock)] == [9, 7, 5]
    assert make.stats.get_value("scheduler/evicted") == 2  # type: ignore[attr-defined]
    assert make.stats.get_value("scheduler/enqueued") == 5  # type: ignore[attr-defined]


def test_unserializable_request_is_dropped_and_counted(
        make: Factory, clock: ManualClock, caplog: pytest.LogCaptureFixture,
        cycle: Callable[..., ReadyQueueScheduler]) -> None:
    s = make()
    caplog.set_level(logging.ERROR, "webcrawl.scheduler")
    assert not s.enqueue_request(scrapy.Request("http://a.test/lambda", callback=lambda r: None))
    assert not s.enqueue_request(scrapy.Request("http://a.test/meta", meta={"o": object()}))
    assert s.enqueue_request(scrapy.Request("http://a.test/fine"))
    s = cycle(s)
    assert [r.url for r in drain(s, clock)] == ["http://a.test/fine"]
    assert make.stats.get_value("scheduler/unserializable") == 2  # type: ignore[attr-defined]
    assert len([r for r in caplog.records if "serialize" in r.getMessage()]) == 1


def test_stats_totals_and_breakdowns(make: Factory, clock: ManualClock,
                                     cycle: Callable[..., ReadyQueueScheduler]) -> None:
    s = make()
    for i in range(4):
        s.enqueue_request(scrapy.Request(f"http://h{i % 2}.test/{i}"))
    s = cycle(s)
    assert len(drain(s, clock)) == 4
    stats = make.stats  # type: ignore[attr-defined]
    for total in ("scheduler/enqueued", "scheduler/dequeued"):
        assert stats.get_value(total) == stats.get_value(f"{total}/redis") == 4


def test_pending_until_leases_are_released(make: Factory, clock: ManualClock) -> None:
    s = make()
    s.enqueue_request(scrapy.Request("http://a.test/0"))
    request = s.next_request()
    assert request is not None
    # Without an engine nothing is in progress, so the lease counts as finished here...
    assert not s.has_pending_requests()
    # ...and is released by the next flush.
    s._maintain()
    assert s.frontier.counts().leased == 0


def test_expired_lease_returns_to_its_place(make: Factory, clock: ManualClock,
                                            cycle: Callable[..., ReadyQueueScheduler]) -> None:
    s = make(lease=10.0)
    for i in range(3):
        s.enqueue_request(scrapy.Request(f"http://a.test/{i}"))
    s._flush_safely()
    # A process that pops and dies: the frontier API without a scheduler to release anything.
    dead = s.frontier.pop(clock.time())
    assert [p for _, p in dead.items][0].find("a.test/0") > 0
    assert s.frontier.reclaim_expired(clock.time()) == 0  # still leased
    clock.advance(11.0)
    s = cycle(s, lease=10.0)  # a restart reclaims at open; a live process on its next tick
    s.frontier.reclaim_expired(clock.time())
    assert [r.url for r in drain(s, clock)] == [f"http://a.test/{i}" for i in range(3)]


def test_renewed_lease_is_not_taken(make: Factory, clock: ManualClock) -> None:
    s = make(lease=10.0)
    s.enqueue_request(scrapy.Request("http://a.test/0"))
    s._flush_safely()
    popped = s.frontier.pop(clock.time())
    lease = popped.items[0][0]
    clock.advance(8.0)
    s.frontier.renew([lease], clock.time())
    clock.advance(8.0)
    assert s.frontier.reclaim_expired(clock.time()) == 0
    clock.advance(3.0)
    assert s.frontier.reclaim_expired(clock.time()) == 1


def test_close_never_deletes_shared_state(make: Factory, redis_client: object) -> None:
    s = make()
    s.enqueue_request(scrapy.Request("http://a.test/0"))
    s._flush_safely()
    s.close("finished")
    assert s.frontier.counts().queued == 1
    s.frontier.clear()
    assert s.frontier.counts().queued == 0
    assert not list(s.frontier.client.scan_iter(match=s.frontier.keys.pattern))


def test_crawls_are_separate(make: Factory, clock: ManualClock) -> None:
    a, b = make(crawl="one"), make(crawl="two")
    a.enqueue_request(scrapy.Request("http://a.test/x"))
    assert b.enqueue_request(scrapy.Request("http://a.test/x"))
    assert a.next_request().url == b.next_request().url == "http://a.test/x"


def test_seen_filter_size_mismatch_is_refused(redis_url: str, make: Factory) -> None:
    make()
    other = Frontier(connect(redis_url), CrawlKeys("contract"), BloomParams(99, 0.01), cap=0,
                     default_delay=1, lease_seconds=1)
    with pytest.raises(ValueError, match="WEBCRAWL_BLOOM_CAPACITY"):
        other.check_seen_filter()


def test_hold_pushes_a_domain_back_never_forward(make: Factory, clock: ManualClock) -> None:
    s = make(delay=1.0)
    for i in range(2):
        s.enqueue_request(scrapy.Request(f"http://a.test/{i}"))
    assert s.next_request().url == "http://a.test/0"
    assert s.frontier.hold("a.test", clock.time() + 30)  # a 429 with Retry-After: 30
    assert not s.frontier.hold("a.test", clock.time() + 5)  # never earlier
    clock.advance(29)
    s._not_before = 0.0
    assert s.next_request() is None
    clock.advance(1.5)
    assert s.next_request().url == "http://a.test/1"


def test_ledger_never_admits_past_the_budget(redis_url: str) -> None:
    from webcrawl.state.ledger import LedgerStore

    ledger = LedgerStore(connect(redis_url), CrawlKeys("contract"))
    cycle = ledger.start_cycle(budget=10.0, cycle_seconds=60, now=0.0)
    assert ledger.current() == cycle
    assert ledger.admit(cycle.id, 6.0) and ledger.admit(cycle.id, 4.0)
    assert not ledger.admit(cycle.id, 0.5)  # 10 committed
    ledger.land(cycle.id, expected=6.0, actual=7.0, purpose="revisit", page_type="product")
    ledger.record_outcome(cycle.id, "product", "changed")
    n = ledger.numbers(cycle.id)
    assert (n["booked"], n["in_flight"], n["refused"]) == (7.0, 4.0, 1.0)
    assert (n["spent:revisit"], n["fetches:product"], n["changed:product"]) == (7.0, 1.0, 1.0)
    assert ledger.cycle_ids() == [cycle.id]


def test_excluded_domain_is_refused_and_dropped_at_once(make: Factory, clock: ManualClock,
                                                        redis_client: object) -> None:
    from webcrawl.state.exclusion import exclude, unexclude

    a, b = make(delay=0.0), make(delay=0.0)  # two processes of one crawl
    for i in range(3):
        a.enqueue_request(scrapy.Request(f"http://gone.test/{i}"))
        a.enqueue_request(scrapy.Request(f"http://kept.test/{i}"))
    a._flush_safely()
    assert exclude(a.frontier.client, "GONE.test") == 3
    b.enqueue_request(scrapy.Request("http://gone.test/late"))
    b._flush_safely()
    got = drain(a, clock) + drain(b, clock)
    assert sorted(r.url for r in got) == [f"http://kept.test/{i}" for i in range(3)]
    assert make.stats.get_value("scheduler/excluded") == 1  # type: ignore[attr-defined]
    assert a.frontier.counts().queued == 0
    assert unexclude(a.frontier.client, "gone.test")
    b.enqueue_request(scrapy.Request("http://gone.test/back"))
    assert [r.url for r in drain(b, clock)] == ["http://gone.test/back"]


def test_excluded_while_queued_is_dropped_by_pop(make: Factory, clock: ManualClock) -> None:
    from webcrawl.state.keys import EXCLUDED

    s = make(delay=0.0)
    for i in range(2):
        s.enqueue_request(scrapy.Request(f"http://gone.test/{i}"))
    s._flush_safely()
    s.frontier.client.sadd(EXCLUDED, "gone.test")  # as another tool might, without the drop
    assert s.next_request() is None
    assert s.frontier.counts().queued == 0 and s.frontier.excluded_dropped() == 2


def test_flush_survives_a_lost_script_cache(make: Factory, clock: ManualClock) -> None:
    s = make()
    s.enqueue_request(scrapy.Request("http://a.test/0"))
    s._flush_safely()
    s.frontier.client.script_flush()  # as after a Redis restart
    s.enqueue_request(scrapy.Request("http://a.test/1"))
    s._flush_safely()
    assert [r.url for r in drain(s, clock)] == ["http://a.test/0", "http://a.test/1"]


def test_flush_is_one_round_trip(make: Factory) -> None:
    s = make()
    s.enqueue_request(scrapy.Request("http://a.test/0"))
    s._flush_safely()  # loads the script once
    client = s.frontier.client
    before = {k: v["calls"] for k, v in client.info("commandstats").items()}
    for i in range(5):
        s.enqueue_request(scrapy.Request(f"http://a.test/{i + 1}"))
        s._flush_safely()
    after = {k: v["calls"] for k, v in client.info("commandstats").items()}
    assert "cmdstat_script" not in after or after["cmdstat_script"] == before.get("cmdstat_script")
    assert after["cmdstat_evalsha"] - before.get("cmdstat_evalsha", 0) == 5
