"""The seen filter counts what it holds and grows past its capacity (webcrawl.state.seen, the bloom
part of lua2/push.lua, BloomDupeFilter), in real Redis bitmaps on a single server and on a real
3-master cluster: a full slice starts a new generation, nothing once seen is ever taken for new,
false positives stay near the generations' sum where one bitmap would saturate, and the
scheduler's push and the dupefilter count into the same slice."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

import pytest
from scrapy import Request

from tests.runtimes import runtime_for
from webcrawl.dupefilter import BloomDupeFilter
from webcrawl.state.batch import LandSettings, WriteBatch
from webcrawl.state.client import connect
from webcrawl.state.inspect import shard_figures
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.queue import FILTERED, PUSHED, CrawlQueue, Entry
from webcrawl.state.scripts import ScriptSet
from webcrawl.state.seen import BloomParams, SeenFilter, seen_state

CAPACITY = 200
BLOOM = BloomParams(CAPACITY, 0.01)
HOST = "grow.test"


class Slice:
    """One shard's seen-filter slice, written through the scheduler's push."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.layout = CrawlLayout("growth", 3)
        scripts = ScriptSet(client)
        self.queue = CrawlQueue(client, scripts, self.layout, cap=0, default_delay=0.0,
                                lease_seconds=30)
        self.queue.check_seen_filter(BLOOM)
        self.batch = WriteBatch(client, scripts, self.layout, self.queue, LandSettings(0.0),
                                bloom_slices=BLOOM.num_slices)
        self.shard = self.layout.shard(HOST)
        self.offsets = BLOOM.offsets_function()

    def push(self, urls: list[str]) -> list[int]:
        statuses: list[int] = []
        for url in urls:
            self.batch.push(Entry(HOST, 0, '{"url": "%s"}' % url, self.offsets(url)), statuses.append)
        self.batch.flush()
        return statuses

    def state(self) -> Any:
        (state,) = seen_state(self.client, [self.shard.seen_meta])
        return state


@pytest.fixture(params=["single", "cluster"])
def grown(request: pytest.FixtureRequest, redis_url: str) -> Iterator[Slice]:
    url = redis_url if request.param == "single" else request.getfixturevalue("redis_cluster_url")
    client, _, _ = connect(url)
    yield Slice(client)
    client.close()


def urls(n: int, tag: str) -> list[str]:
    return [f"http://{HOST}/{tag}/{i}" for i in range(n)]


def test_a_full_slice_grows_a_generation_and_forgets_nothing(grown: Slice) -> None:
    known = urls(5 * CAPACITY, "in")
    statuses = []
    for start in range(0, len(known), 150):  # batches, as a crawl's turns push them
        statuses += grown.push(known[start:start + 150])
    new = statuses.count(PUSHED)
    state = grown.state()
    assert state.count == new >= 0.97 * len(known)
    assert state.capacity == CAPACITY and state.generations == new // CAPACITY + 1 == 5
    stride = int(grown.client.hget(grown.shard.seen_meta, "stride"))
    assert stride >= BLOOM.num_bits
    # Each generation is allocated at once, when the previous one fills.
    assert grown.client.strlen(grown.shard.seen) * 8 == state.generations * stride
    assert set(grown.push(known)) == {FILTERED}, "a URL once seen is never new again"
    assert grown.state().count == new
    (figures,) = [f for f in shard_figures(grown.client, grown.layout, 0.0)
                  if f.index == grown.shard.index]
    assert (figures.seen, figures.seen_capacity, figures.seen_generations) == (new, CAPACITY, 5)


def test_false_positives_stay_near_the_generations_sum(grown: Slice) -> None:
    """At five times its capacity, the grown slice takes under 5 % of new URLs for seen ones (its
    five generations at most 1 % each, give or take three standard errors of the sample); one
    bitmap of the same size holding the same URLs takes most of them."""
    known = urls(5 * CAPACITY, "in")
    for start in range(0, len(known), 200):
        grown.push(known[start:start + 200])
    probes, samples = urls(6000, "out"), 6000
    shard = grown.shard
    view = SeenFilter(grown.client, shard.seen, BLOOM, shard.seen_meta)
    assert all(view.contains_many(known))
    rate = sum(view.contains_many(probes)) / samples
    bound = BLOOM.false_positive_rate(grown.state().generations)
    assert rate <= bound + 3 * math.sqrt(bound * (1 - bound) / samples), f"{rate:.2%}"
    # The same URLs in one bitmap that never grows (no capacity recorded for it).
    single = SeenFilter(grown.client, shard.prefix + "single", BLOOM)
    list(single.test_and_set_many(known))
    assert grown.client.hget(single.meta_key, "generations") is None
    assert sum(single.contains_many(probes)) / samples > 0.5


def test_the_dupefilter_counts_and_grows_the_slice_the_scheduler_uses(
        redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime = runtime_for(redis_url, {"WEBCRAWL_BLOOM_CAPACITY": 100}, name="dupegrowth")
    dupes = BloomDupeFilter.from_crawler(runtime.crawler)
    shard = runtime.layout.shard("d.test")
    with caplog.at_level(logging.WARNING, logger="webcrawl.dupefilter"):
        answers = [dupes.request_seen(Request(f"http://d.test/p/{i}")) for i in range(350)]
    new = answers.count(False)
    (state,) = seen_state(runtime.client, [shard.seen_meta])
    assert state.count == new and state.generations == new // 100 + 1 == 4
    assert runtime.stats.get_value("dupefilter/seen/over_capacity") == new - 100
    assert runtime.stats.get_value("dupefilter/seen/generations") == 4
    grew = [r.getMessage() for r in caplog.records if "grew to" in r.getMessage()]
    assert len(grew) == 3 and "grew to 4 generations" in grew[-1]
    # The scheduler's push tests the same generations and counts into the same slice.
    offsets = runtime.bloom.offsets_function()
    statuses: list[int] = []
    for url in ("http://d.test/p/7", "http://d.test/p/349", "http://d.test/fresh"):
        runtime.batch.push(Entry("d.test", 0, "{}", offsets(url)), statuses.append)
    runtime.batch.flush()
    assert statuses[:2] == [FILTERED, FILTERED]
    assert seen_state(runtime.client, [shard.seen_meta])[0].count == new + statuses[2:].count(PUSHED)
    runtime.close()


def test_the_false_positive_rate_at_a_fill_follows_the_sizing() -> None:
    params = BloomParams(10_000, 0.01)
    assert params.false_positive_rate_at(0) == 0.0
    assert params.false_positive_rate_at(5_000) < params.false_positive_rate_at(9_999) < 0.0105
    full = params.false_positive_rate_at(9_999)
    assert full == pytest.approx(0.01, rel=0.05), "a full generation is at its sized rate"
    assert params.generations_at(25_000) == 3
    assert params.false_positive_rate_at(20_000) == pytest.approx(
        1 - (1 - params.false_positive_rate_at(10_000 - 1)) ** 2, rel=0.01)
