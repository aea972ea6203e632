"""The crawl's shared spend bucket (webcrawl.state.bucket.SpendBucket, lua2/bucket.lua) in a real
redis-server: refill at the budget rate by the server's clock, the cap, budget that overflowed
counted as idle, grants never above what is there, configuration per cycle."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.crawls import wait_for
from webcrawl.state.bucket import SpendBucket
from webcrawl.state.client import connect
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.scripts import ScriptSet


@pytest.fixture
def bucket(redis_url: str) -> Iterator[SpendBucket]:
    client, _, _ = connect(redis_url)
    yield SpendBucket(ScriptSet(client), CrawlLayout("bucket"))
    client.close()


def server_time(bucket: SpendBucket) -> float:
    seconds, micros = bucket.scripts.client.time()
    return seconds + micros / 1e6


def test_a_one_run_cycle_gets_its_budget_at_once_and_no_refill(bucket: SpendBucket) -> None:
    bucket.configure(0.0, 10.0, 1, tokens=10.0)
    assert bucket.take(4.0) == (4.0, 6.0, 0.0)
    assert bucket.take(100.0) == (6.0, 0.0, 0.0), "a grant is never more than what is there"
    assert bucket.take(1.0)[0] == 0.0
    bucket.give(2.5)  # a fetch cost less than its charge
    state = bucket.read()
    assert (state.tokens, state.granted, state.wasted, state.cycle) == (2.5, 10.0, 0.0, "1")
    bucket.give(-3.0)  # one cost more: the overspend is owed
    assert bucket.take(1.0)[:2] == (0.0, -0.5)


def test_tokens_refill_at_the_rate_by_the_servers_clock(bucket: SpendBucket) -> None:
    before = server_time(bucket)
    bucket.configure(100.0, 1000.0, 7, tokens=0.0)
    after = server_time(bucket)
    wait_for(lambda: bucket.read().tokens >= 20.0, 5, "the bucket to refill")
    start = server_time(bucket)
    granted, left, rate = bucket.take(1000.0)
    end = server_time(bucket)
    assert rate == 100.0 and left == 0.0
    assert 100.0 * (start - after) <= granted <= 100.0 * (end - before)


def test_the_cap_holds_and_what_overflows_is_idle_budget(bucket: SpendBucket) -> None:
    before = server_time(bucket)
    bucket.configure(1000.0, 5.0, 2, tokens=0.0)
    after = server_time(bucket)
    wait_for(lambda: bucket.read().wasted >= 50.0, 5, "budget to overflow the cap")
    start = server_time(bucket)
    state = bucket.read()
    end = server_time(bucket)
    assert state.tokens == 5.0
    assert 1000.0 * (start - after) - 5.0 <= state.wasted <= 1000.0 * (end - before) - 5.0
    bucket.give(3.0)  # given back to a full bucket: idle too
    assert bucket.read().wasted >= state.wasted + 3.0


def test_configure_keeps_or_resets_the_tokens(bucket: SpendBucket) -> None:
    bucket.configure(0.0, 10.0, 1, tokens=10.0)
    bucket.take(3.0)
    bucket.configure(0.0, 20.0, 2)  # the same crawl, new settings: the tokens stay
    state = bucket.read()
    assert (state.tokens, state.cap, state.cycle, state.granted) == (7.0, 20.0, "2", 3.0)
    bucket.configure(0.5, 4.0, 3, tokens=2.0)  # a new cycle's budget: start over
    state = bucket.read()
    assert (state.tokens, state.rate, state.cap, state.cycle) == (pytest.approx(2.0, abs=0.1), 0.5, 4.0, "3")
    assert (state.granted, state.wasted) == (0.0, 0.0)


def test_on_a_cluster_the_bucket_lives_in_the_crawls_own_slot(redis_cluster_url: str) -> None:
    client, _, cluster = connect(redis_cluster_url)
    assert cluster
    try:
        bucket = SpendBucket(ScriptSet(client), CrawlLayout("bucket", 16))
        bucket.configure(0.0, 3.0, 1, tokens=3.0)
        assert bucket.take(2.0)[0] == 2.0 and bucket.read().tokens == 1.0
    finally:
        client.close()
