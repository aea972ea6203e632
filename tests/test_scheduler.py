"""Contract suite of ReadyQueueScheduler through Scrapy's scheduler interface (open, close,
enqueue_request, next_request, has_pending_requests), driven as Scrapy's engine drives it
(tests/_scheduler_harness.py).

Every contract test runs on a single redis-server and on a real 3-master Redis Cluster (where
the crawl is split into 16 shards), and twice on each: straight, and with the scheduler closed
and a new one opened on the same crawl between enqueueing and dequeueing (``cycle``), which must
change nothing: the state is Redis's. Delays are real (tenths of a second), measured on the
server's clock.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import scrapy
from scrapy.core.engine import _Slot
from scrapy.utils.reactor import CallLaterOnce
from scrapy.utils.test import get_crawler

from tests._scheduler_harness import ContractSpider, Harness, settings_for, wait
from tests.crawls import REPO, stats_of
from webcrawl import meta as M
from webcrawl.runtime import CrawlRuntime
from webcrawl.scheduler import EngineInternalsMissing, ReadyQueueScheduler
from webcrawl.state.exclusion import exclude, unexclude
from webcrawl.state.hosts import attempt_op, delay_op
from webcrawl.state.pagestore import interval_op, observe_op
from webcrawl.state.seen import seen_state

Make = Callable[..., Harness]
Cycle = Callable[..., Harness]


@pytest.fixture(params=["single", "cluster"])
def backend(request: pytest.FixtureRequest, redis_url: str) -> str:
    return redis_url if request.param == "single" else request.getfixturevalue("redis_cluster_url")


@pytest.fixture
def make(backend: str, tmp_path: Path) -> Iterator[Make]:
    opened: list[Harness] = []

    def factory(crawl: str = "contract", **overrides: Any) -> Harness:
        return Harness(settings_for(backend, crawl, tmp_path, **overrides), opened=opened)

    yield factory
    for harness in opened:
        harness.close()


@pytest.fixture(params=["straight", "reopened"])
def cycle(request: pytest.FixtureRequest) -> Cycle:
    """The scheduler to dequeue from: the same one, or a new one after close + reopen."""

    def go(harness: Harness, **overrides: Any) -> Harness:
        return harness if request.param == "straight" else harness.reopen(**overrides)

    return go


def server_time(h: Harness) -> float:
    return h.runtime.clock.time()


def tails(requests: list[scrapy.Request]) -> list[str]:
    return [r.url.rsplit("/", 1)[1] for r in requests]


def test_round_trip_keeps_every_field(make: Make, cycle: Cycle) -> None:
    h = make()
    spider = h.spider
    original = scrapy.Request(
        "http://a.test/p?q=1", method="POST", body=b"\xff\x00binary", headers={"X-Y": "z"},
        cookies={"c": "v"}, meta={"depth": 2, "k": [1, "two"]}, priority=7,
        cb_kwargs={"n": 1}, flags=["f"], callback=spider.parse_item, errback=spider.on_error)
    assert h.enqueue(original, scrapy.FormRequest("http://b.test/form", formdata={"a": "b"}))
    assert h.scheduler.has_pending_requests()
    h = cycle(h)
    got = {r.url: r for r in h.drain()}
    request, form = got["http://a.test/p?q=1"], got["http://b.test/form"]
    assert (request.method, request.body, request.priority) == ("POST", original.body, 7)
    assert request.headers.getlist("X-Y") == [b"z"] and request.cookies == {"c": "v"}
    assert {k: v for k, v in request.meta.items() if k != M.LEASE} == {"depth": 2, "k": [1, "two"]}
    assert (request.cb_kwargs, request.flags) == ({"n": 1}, ["f"])
    assert request.callback == h.spider.parse_item and request.errback == h.spider.on_error
    assert type(request) is scrapy.Request
    assert isinstance(form, scrapy.FormRequest) and form.body == b"a=b"


def test_a_pop_of_this_processs_own_push_hands_back_the_same_request(make: Make) -> None:
    h = make()
    original = scrapy.Request("http://a.test/kept", meta={"k": (1, 2)}, priority=3)
    assert h.enqueue(original) == [True]
    h.runtime.flush()
    other = make()  # another process of the crawl pops it: read from the JSON
    popped = other.take_when_ready()
    assert popped is not original and popped.url == "http://a.test/kept"
    assert popped.meta["k"] == [1, 2] and popped.priority == 3
    own = scrapy.Request("http://b.test/own")
    h.enqueue(own)
    got = h.take_when_ready()
    assert got is own and got.meta[M.LEASE]
    # Handed back, no longer kept; the one the other process took stays until pushed out.
    assert [json.loads(p)["url"] for p in h.scheduler._kept] == ["http://a.test/kept"]


def test_only_the_last_pushed_requests_are_kept_and_never_refused_ones(
        make: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    import webcrawl.scheduler as scheduler_module

    monkeypatch.setattr(scheduler_module, "KEPT_REQUESTS", 2)
    first, second = make(), make()
    requests = [scrapy.Request(f"http://a.test/{i}") for i in range(4)]
    first.enqueue(*requests)
    assert [r.url for r in first.scheduler._kept.values()] == ["http://a.test/2", "http://a.test/3"]
    first.runtime.flush()
    # The shared filter refuses what the other process pushed already: nothing will pop it.
    second.enqueue(scrapy.Request("http://a.test/0"), scrapy.Request("http://a.test/new"))
    second.runtime.flush()
    wait(lambda: len(second.scheduler._kept) == 1, 5, "the refused push to be forgotten")
    got = {r.url: r for r in first.drain()}
    assert sorted(got) == ["http://a.test/0", "http://a.test/1", "http://a.test/2",
                           "http://a.test/3", "http://a.test/new"]
    assert got["http://a.test/3"] is requests[3] and got["http://a.test/0"] is not requests[0]


def test_priority_order_then_fifo(make: Make, cycle: Cycle) -> None:
    h = make()
    for i, priority in enumerate([0, 5, 0, 5, -3, 0]):
        h.enqueue(scrapy.Request(f"http://a.test/{i}", priority=priority))
    h = cycle(h)
    assert tails(h.drain()) == ["1", "3", "0", "2", "5", "4"]


def test_a_host_waits_for_its_delay_and_the_engine_is_woken_then(make: Make, cycle: Cycle) -> None:
    delay = 0.3
    h = make(WEBCRAWL_DOMAIN_DELAY_SECONDS=delay)
    h.enqueue(*(scrapy.Request(f"http://a.test/{i}") for i in range(2)), scrapy.Request("http://b.test/0"))
    h = cycle(h, WEBCRAWL_DOMAIN_DELAY_SECONDS=delay)
    started = server_time(h)
    first = [h.take_when_ready(), h.take_answered()]
    assert sorted(r.url for r in first if r) == ["http://a.test/0", "http://b.test/0"]
    assert h.take_answered() is None, "a.test's turn came again at once"
    assert h.scheduler.has_pending_requests()
    pokes = h.pokes
    wait(lambda: h.pokes > pokes, 2 * delay + 1, "the scheduler to wake the engine")
    second = h.take_when_ready()
    assert second.url == "http://a.test/1"
    assert server_time(h) - started >= delay


def test_a_hosts_own_delay_overrides_the_default(make: Make, cycle: Cycle) -> None:
    h = make(WEBCRAWL_DOMAIN_DELAY_SECONDS=0.1)
    h.runtime.batch.land("slow.test", delay_op(0.8))  # its robots.txt asked for a Crawl-delay
    for i in range(2):
        h.enqueue(scrapy.Request(f"http://slow.test/{i}"), scrapy.Request(f"http://fast.test/{i}"))
    h = cycle(h, WEBCRAWL_DOMAIN_DELAY_SECONDS=0.1)
    started = server_time(h)
    assert {h.take_when_ready().url, h.take_answered().url} == {"http://slow.test/0", "http://fast.test/0"}  # type: ignore[union-attr]
    assert h.take_when_ready().url == "http://fast.test/1"
    assert h.take_answered() is None
    assert h.take_when_ready().url == "http://slow.test/1"
    assert server_time(h) - started >= 0.8


def test_the_host_whose_turn_comes_first_goes_first(make: Make, cycle: Cycle) -> None:
    h = make(WEBCRAWL_DOMAIN_DELAY_SECONDS=0.4)
    h.enqueue(scrapy.Request("http://a.test/0"))
    first = h.take_when_ready()  # a.test's next turn in 0.4 s
    h.finish(first)
    h.enqueue(scrapy.Request("http://a.test/1"), scrapy.Request("http://b.test/0"))
    h = cycle(h, WEBCRAWL_DOMAIN_DELAY_SECONDS=0.4)
    assert [r.url for r in h.drain()] == ["http://b.test/0", "http://a.test/1"]


def test_a_backoff_holds_a_host_back_never_forward(make: Make) -> None:
    h = make(WEBCRAWL_DOMAIN_DELAY_SECONDS=0.2)
    h.enqueue(*(scrapy.Request(f"http://a.test/{i}") for i in range(2)))
    h.finish(h.take_when_ready())
    held_at = server_time(h)

    def bad_answer(retry_after: float) -> Any:
        return attempt_op(False, retry_after=retry_after, base=1.0, maximum=60.0, half_life=600.0,
                          time=server_time(h))

    h.runtime.batch.land("a.test", bad_answer(0.6))  # a 429 with Retry-After: 0.6
    h.runtime.batch.land("a.test", bad_answer(0.1))  # a shorter one later: never earlier
    assert [r.url for r in h.drain()] == ["http://a.test/1"]
    assert server_time(h) - held_at >= 0.6


def test_duplicates_are_filtered_canonically(make: Make, cycle: Cycle) -> None:
    first = h = make()
    assert h.enqueue(scrapy.Request("http://a.test/p?b=2&a=1")) == [True]
    assert h.enqueue(scrapy.Request("http://a.test/p?b=2&a=1")) == [False]  # this process knows it
    h = cycle(h)
    # Another process (or this one after a restart) knows it through the shared filter.
    h.enqueue(scrapy.Request("http://a.test/p?a=1&b=2"),
              scrapy.Request("http://a.test/p?a=1&b=2", dont_filter=True))
    got = h.drain()
    assert [r.url for r in got] == ["http://a.test/p?b=2&a=1", "http://a.test/p?a=1&b=2"]
    assert got[1].dont_filter
    h.close()  # counts kept in the process are published at the latest then
    stats = list({id(s): s for s in (first.stats, h.stats)}.values())
    total = sum(s.get_value("dupefilter/filtered", 0) for s in stats)
    assert total == 2 == sum(s.get_value("dupefilter/filtered/local_cache", 0)
                             + s.get_value("dupefilter/filtered/bloom", 0) for s in stats)


def test_links_to_one_page_under_other_fragments_are_duplicates(make: Make) -> None:
    h = make()
    assert h.enqueue(scrapy.Request("http://a.test/p#intro"), scrapy.Request("http://a.test/p#use"),
                     scrapy.Request("http://a.test/p"), scrapy.Request("http://a.test/p#intro"),
                     scrapy.Request("http://a.test/q#intro")) == [True, False, False, False, True]
    assert [r.url for r in h.drain()] == ["http://a.test/p#intro", "http://a.test/q#intro"]
    h.close()
    assert h.stats.get_value("dupefilter/filtered/local_cache") == 3


def test_a_request_the_shared_filter_drops_fires_request_dropped_and_is_not_enqueued(
        make: Make) -> None:
    """``enqueue_request`` says yes before Redis answers; when the shared filter then drops the
    request (another process queued the URL, or its host is excluded), Scrapy hears of it as of
    any dropped request: ``request_dropped`` with that very request, and it is not counted in
    ``scheduler/enqueued``."""
    first, second = make(), make()  # two processes of one crawl
    first.enqueue(scrapy.Request("http://a.test/seen"))
    first.runtime.flush()
    exclude(first.runtime.client, "gone.test")
    second.scheduler._sync_exclusions()  # as its next look would
    dropped: list[scrapy.Request] = []
    second.crawler.signals.connect(lambda request, spider: dropped.append(request),
                                   signal=scrapy.signals.request_dropped, weak=False)
    seen, gone = scrapy.Request("http://a.test/seen"), scrapy.Request("http://gone.test/x")
    new = scrapy.Request("http://a.test/new")
    assert second.enqueue(seen, gone, new) == [True, True, True]
    assert dropped == []  # Redis has not answered yet
    second.runtime.flush()
    assert len(dropped) == 2 and {id(r) for r in dropped} == {id(seen), id(gone)}
    stats = second.stats
    assert stats.get_value("scheduler/enqueued") == stats.get_value("scheduler/enqueued/redis") == 1
    assert stats.get_value("dupefilter/filtered/bloom") == 1
    assert stats.get_value("scheduler/excluded") == 1
    # Queued once each: the first process's push and the new one.
    assert sorted(r.url for r in second.drain()) == ["http://a.test/new", "http://a.test/seen"]
    unexclude(first.runtime.client, "gone.test")


def test_the_frontier_cap_evicts_the_lowest_priorities(make: Make, cycle: Cycle) -> None:
    h = make(WEBCRAWL_FRONTIER_MAX_PER_DOMAIN=3)
    for i, priority in enumerate([1, 9, 5, 0, 7]):
        h.enqueue(scrapy.Request(f"http://a.test/{i}", priority=priority))
    first_stats = h.stats
    h = cycle(h, WEBCRAWL_FRONTIER_MAX_PER_DOMAIN=3)
    assert [r.priority for r in h.drain()] == [9, 7, 5]
    assert first_stats.get_value("scheduler/evicted") == 2
    assert first_stats.get_value("scheduler/enqueued") == first_stats.get_value("scheduler/enqueued/redis") == 5


def test_an_unserializable_request_is_dropped_counted_and_logged_once(
        make: Make, cycle: Cycle, caplog: pytest.LogCaptureFixture) -> None:
    h = make()
    caplog.set_level(logging.ERROR, "webcrawl.scheduler")
    assert h.enqueue(scrapy.Request("http://a.test/lambda", callback=lambda r: None),
                     scrapy.Request("http://a.test/meta", meta={"o": object()}),
                     scrapy.Request("http://a.test/fine")) == [False, False, True]
    assert h.stats.get_value("scheduler/unserializable") == 2
    assert len([r for r in caplog.records if "serialize" in r.getMessage()]) == 1
    h = cycle(h)
    assert [r.url for r in h.drain()] == ["http://a.test/fine"]


def test_dequeued_totals(make: Make, cycle: Cycle) -> None:
    h = make()
    h.enqueue(*(scrapy.Request(f"http://h{i % 2}.test/{i}") for i in range(4)))
    h = cycle(h)
    assert len(h.drain()) == 4
    assert h.stats.get_value("scheduler/dequeued") == h.stats.get_value("scheduler/dequeued/queued") == 4


def test_work_in_progress_stays_pending_until_it_is_finished(make: Make) -> None:
    h = make()
    h.enqueue(scrapy.Request("http://a.test/0"))
    request = h.take_when_ready()
    other = make()  # another process of the crawl sees the lease
    assert h.scheduler.has_pending_requests() and other.scheduler.has_pending_requests()
    h.finish(request)
    assert not h.scheduler.has_pending_requests()  # finished here: its lease is going
    wait(lambda: h.runtime.queue.counts()[2] == 0, 3, "the lease to be released")
    wait(lambda: not other.scheduler.has_pending_requests(), 3, "the other process to see it")


def test_a_closed_schedulers_leases_come_back_at_once(make: Make) -> None:
    h = make()
    h.enqueue(*(scrapy.Request(f"http://a.test/{i}") for i in range(2)))
    in_progress = h.take_when_ready()  # never finished: the process is shutting down
    h = h.reopen()  # default lease: 120 s; this must not wait for it
    assert sorted(r.url for r in h.drain(timeout=3)) == ["http://a.test/0", "http://a.test/1"]
    assert in_progress.url == "http://a.test/0"


def test_a_dead_processes_leases_come_back_when_they_expire(make: Make) -> None:
    before = make(WEBCRAWL_LEASE_SECONDS=0.5)
    before.enqueue(*(scrapy.Request(f"http://a.test/{i}") for i in range(3)))
    before.runtime.flush()
    # A process that pops and dies: the queue's own API, with nobody to release or renew.
    queue = before.runtime.queue
    dead = [item for shard in range(before.runtime.layout.shards)
            for item in queue.pop(shard, "dead-process", 0, 1, "nd").items]
    assert len(dead) == 1
    before.close()
    h = make(WEBCRAWL_LEASE_SECONDS=0.5)
    assert h.scheduler.has_pending_requests()
    got = h.drain(timeout=5)
    assert sorted(tails(got)) == ["0", "1", "2"]
    assert h.stats.get_value("scheduler/leases/reclaimed") == 1


def test_pending_sees_a_lease_taken_elsewhere_at_once(make: Make) -> None:
    h = make()
    opened = time.monotonic()
    h.enqueue(scrapy.Request("http://a.test/0"), scrapy.Request("http://a.test/1"))
    h.runtime.flush()
    # Another process takes one request (the queue's own API).
    assert len(h.runtime.queue.pop(h.runtime.layout.shard_index("a.test"), "other", 0, 1, "nd").items) == 1
    mine = h.take_when_ready()
    h.finish(mine)  # this process is done with all it had; the other still works
    pending = h.scheduler.has_pending_requests()
    if time.monotonic() - opened > 0.2:
        pytest.skip("too slow to stay inside the scheduler's refresh window")
    assert pending


def test_a_held_lease_is_renewed_not_taken(make: Make) -> None:
    h = make(WEBCRAWL_LEASE_SECONDS=0.6)
    other = make(WEBCRAWL_LEASE_SECONDS=0.6)
    h.enqueue(scrapy.Request("http://a.test/0"))
    request = h.take_when_ready()  # a slow download: in progress past its lease's length
    deadline = server_time(h) + 1.5
    wait(lambda: server_time(h) > deadline, 3, "three lease lengths")
    assert other.take() is None and other.stats.get_value("scheduler/leases/reclaimed") is None
    h.finish(request)
    wait(lambda: not other.scheduler.has_pending_requests(), 3, "the lease to be released")


def test_due_revisits_come_out_with_what_is_known_of_the_page(make: Make, cycle: Cycle) -> None:
    h = make()
    url = "http://a.test/known"
    now = server_time(h)
    batch = h.runtime.batch
    batch.land("a.test", observe_op(url, full=True, time=now - 60, record_hash="ab" * 8,
                                    validators=('"v1"', "Mon, 01 Jan 2024 00:00:00 GMT"), billed=2.0))
    batch.land("a.test", interval_op(url, 3600.0, due_at=now - 1))  # due
    h = cycle(h)
    assert h.scheduler.has_pending_requests()
    request = h.take_when_ready()
    assert request.url == url and request.dont_filter
    meta = request.meta
    assert (meta[M.PURPOSE], meta[M.KNOWN], meta[M.CANONICAL_URL]) == ("revisit", True, url)
    assert meta[M.VALIDATORS] == ['"v1"', "Mon, 01 Jan 2024 00:00:00 GMT"]
    assert meta[M.PAGE_STATS]["mean_cost"] == 2.0
    assert meta[M.PAGE_STATS]["last_fetched"] == pytest.approx(now - 60)
    assert h.stats.get_value("scheduler/dequeued/revisit") == 1
    h.finish(request)  # it landed no observation (an error answer, say): scheduled again
    wait(lambda: h.runtime.queue.counts()[1] == 1 and not h.runtime.queue.counts()[2], 3,
         "the revisit to be scheduled again")


def test_close_never_deletes_shared_state_and_reset_does(make: Make) -> None:
    h = make()
    h.enqueue(scrapy.Request("http://a.test/0"))
    h.close()
    again = make()
    assert again.runtime.queue.counts()[0] == 1
    again.close()
    reset = make(WEBCRAWL_RESET=True)
    assert reset.runtime.queue.counts() == (0, 0, 0)
    assert reset.enqueue(scrapy.Request("http://a.test/0")) == [True], "the seen filter too"
    assert [r.url for r in reset.drain()] == ["http://a.test/0"]


def test_crawls_are_separate(make: Make) -> None:
    one, two = make(crawl="one"), make(crawl="two")
    one.enqueue(scrapy.Request("http://a.test/x"))
    assert two.enqueue(scrapy.Request("http://a.test/x")) == [True]
    assert [r.url for r in one.drain()] == [r.url for r in two.drain()] == ["http://a.test/x"]


def test_a_process_with_other_seen_filter_sizes_uses_the_crawls(make: Make) -> None:
    """The sizes the crawl's filter recorded when it was first opened win over a later process's
    settings: both processes' URLs land in the same generations and filter each other."""
    first = make()
    first.enqueue(scrapy.Request("http://a.test/first"))
    first.runtime.flush()
    other = make(WEBCRAWL_BLOOM_CAPACITY=99, WEBCRAWL_BLOOM_ERROR_RATE=0.2)
    assert other.runtime.bloom == first.runtime.bloom
    runtime = first.runtime
    assert other.runtime.bloom.capacity == runtime.config.bloom_capacity_per_shard(runtime.layout.shards)
    requests = (scrapy.Request("http://a.test/first"), scrapy.Request("http://a.test/other"))
    assert other.enqueue(*requests) == [True, True]
    other.runtime.flush()
    assert other.stats.get_value("dupefilter/filtered/bloom") == 1
    first.enqueue(scrapy.Request("http://a.test/other"))
    first.runtime.flush()
    assert first.stats.get_value("dupefilter/filtered/bloom") == 1


def test_an_excluded_host_is_dropped_from_every_process_at_once(make: Make) -> None:
    a, b = make(), make()  # two processes of one crawl
    for i in range(3):
        a.enqueue(scrapy.Request(f"http://gone.test/{i}"), scrapy.Request(f"http://kept.test/{i}"))
    a.runtime.flush()
    exclude(a.runtime.client, "GONE.test")  # scrapy exclude, from anywhere

    def excluded() -> int:
        return sum(h.stats.get_value("scheduler/excluded", 0) for h in (a, b))

    wait(lambda: excluded() == 3, 3, "the processes to drop the queued requests")
    b.enqueue(scrapy.Request("http://gone.test/late"))
    got = a.drain() + b.drain()
    assert sorted(r.url for r in got) == [f"http://kept.test/{i}" for i in range(3)]
    assert excluded() == 4 and a.runtime.queue.counts()[0] == 0
    unexclude(a.runtime.client, "gone.test")
    attempts = iter(range(1000))

    def crawled_again() -> bool:  # refused until b mirrors the new list; a new URL each time
        b.enqueue(scrapy.Request(f"http://gone.test/back/{next(attempts)}"))
        return bool(b.drain())

    wait(crawled_again, 3, "gone.test to be crawled again")


def test_the_seen_filter_grows_past_its_first_generation_without_a_warning(
        make: Make, caplog: pytest.LogCaptureFixture) -> None:
    """Past the first generation's capacity the filter grows a larger one; the stat of its false
    positives stays under the configured rate, and nothing is worth a warning."""
    h = make(WEBCRAWL_BLOOM_CAPACITY=16)
    caplog.set_level(logging.WARNING, "webcrawl.scheduler")
    per_shard = h.runtime.bloom.capacity
    assert h.enqueue(*(scrapy.Request(f"http://a.test/{i}") for i in range(per_shard))) == [True] * per_shard
    h.runtime.flush()
    h.enqueue(*(scrapy.Request(f"http://a.test/more/{i}") for i in range(200)))
    h.runtime.flush()
    shard = h.runtime.layout.shard("a.test")
    (state,) = seen_state(h.runtime.client, [shard.seen_meta])
    assert state.count > 200 and state.generations == h.runtime.bloom.generations_at(state.count) >= 4
    rate = h.stats.get_value("dupefilter/seen/false_positive_rate")
    assert rate is not None and 0 <= rate < h.runtime.bloom.error_rate
    assert h.stats.get_value("dupefilter/seen/over_capacity") is None
    assert not [r for r in caplog.records if "seen-URL filter" in r.getMessage()]


def test_on_a_cluster_the_crawl_is_spread_over_shards_and_masters(
        redis_cluster_url: str, redis_cluster: Any, tmp_path: Path) -> None:
    opened: list[Harness] = []
    h = Harness(settings_for(redis_cluster_url, "spread", tmp_path), opened=opened)
    try:
        hosts = [f"h{i}.test" for i in range(12)]
        h.enqueue(*(scrapy.Request(f"http://{host}/") for host in hosts))
        h.runtime.flush()
        layout = h.runtime.layout
        assert layout.shards > 1
        used = {layout.shard_index(host) for host in hosts}
        assert len(used) > 4
        masters = {redis_cluster.master_for_key(layout.all_shards[k].frontier).port for k in used}
        assert len(masters) == 3, "the crawl's work sits on every master"
        assert sorted(r.url for r in h.drain()) == sorted(f"http://{host}/" for host in hosts)
    finally:
        h.close()


def test_a_turns_pushes_are_one_script_call(redis_url: str, redis_client: Any, tmp_path: Path) -> None:
    h = Harness(settings_for(redis_url, "calls", tmp_path))
    try:
        h.enqueue(scrapy.Request("http://a.test/0"))
        h.runtime.flush()
        before = redis_client.info("commandstats")
        for i in range(5):
            h.enqueue(scrapy.Request(f"http://a.test/{i + 1}/x"), scrapy.Request(f"http://a.test/{i + 1}/y"))
            h.runtime.flush()
        after = redis_client.info("commandstats")
        calls = {k: after[k]["calls"] - before.get(k, {"calls": 0})["calls"] for k in after}
        assert calls.get("cmdstat_evalsha") == 5 and not calls.get("cmdstat_script")
        assert len(h.drain()) == 11
    finally:
        h.close()


def test_a_lost_script_cache_is_reloaded(make: Make) -> None:
    h = make()
    h.enqueue(scrapy.Request("http://a.test/0"))
    h.runtime.flush()
    h.runtime.client.script_flush()  # as after a Redis restart
    h.enqueue(scrapy.Request("http://a.test/1"))
    h.runtime.flush()
    assert not h.runtime.failed
    assert [r.url for r in h.drain()] == ["http://a.test/0", "http://a.test/1"]


def test_missing_engine_internals_stop_the_scheduler_at_open(redis_url: str, tmp_path: Path) -> None:
    crawler = get_crawler(ContractSpider, settings_for(redis_url, "internals", tmp_path))
    crawler.spider = crawler._create_spider()
    crawler.engine = crawler._create_engine()
    scheduler = ReadyQueueScheduler.from_crawler(crawler)
    renamed = _Slot(True, CallLaterOnce(lambda: None), scheduler)
    del renamed.inprogress
    no_wakeup = _Slot(True, CallLaterOnce(lambda: None), scheduler)
    no_wakeup.nextcall = None  # type: ignore[assignment]
    try:
        for slot in (None, renamed, no_wakeup):
            crawler.engine._slot = slot
            with pytest.raises(EngineInternalsMissing, match=f"Scrapy {re.escape(scrapy.__version__)} "):
                scheduler.open(crawler.spider)
    finally:
        CrawlRuntime.of(crawler).close()


# A crawl process whose Scrapy renamed the engine slot's requests in progress.
RENAMED_SLOT_CRAWL = """
import sys
import scrapy.core.engine as engine

class RenamedSlot(engine._Slot):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests_in_progress = self.__dict__.pop("inprogress")

engine._Slot = RenamedSlot
from scrapy.cmdline import execute
execute(["scrapy", "crawl", "follow", *sys.argv[1:]])
"""


def test_a_crawl_on_a_scrapy_without_those_internals_stops_at_start(redis_url: str, tmp_path: Path) -> None:
    env = dict(os.environ, SCRAPY_SETTINGS_MODULE="webcrawl.settings",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = ["-a", "seeds=http://127.0.0.2:9/", "-s", f"WEBCRAWL_REDIS_URL={redis_url}",
            "-s", f"WEBCRAWL_DATA_DIR={tmp_path}", "-s", "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=127.0.0.0/8"]
    done = subprocess.run([sys.executable, "-c", RENAMED_SLOT_CRAWL, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    log = done.stdout + done.stderr
    assert done.returncode != 0
    assert f"which Scrapy {scrapy.__version__} does not have" in log
    assert "downloader/request_count" not in stats_of(log), "it fetched before stopping"
