"""The seen filter starts small, counts what it holds and grows larger generations as it fills
(webcrawl.state.seen, lua2/seen.lua run by the push script and by BloomDupeFilter), in real Redis
bitmaps on a single server and on a real 3-master cluster: a full generation is followed by one
twice its size, allocated at once and exactly; nothing once seen is ever taken for new; false
positives stay under the configured rate; the scheduler's push and the dupefilter count into the
same slice; and a crawl whose filter the version before made keeps filtering with it."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from typing import Any

import pytest
from pybloom_live import BloomFilter
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

    def __init__(self, client: Any, bloom: BloomParams = BLOOM, crawl: str = "growth") -> None:
        self.client = client
        self.layout = CrawlLayout(crawl, 3)
        scripts = ScriptSet(client)
        self.queue = CrawlQueue(client, scripts, self.layout, cap=0, default_delay=0.0,
                                lease_seconds=30)
        self.bloom = self.queue.check_seen_filter(bloom)
        self.batch = WriteBatch(client, scripts, self.layout, self.queue, LandSettings(0.0),
                                bloom_slices=self.bloom.num_slices)
        self.shard = self.layout.shard(HOST)
        self.offsets = self.bloom.offsets_function()

    def push(self, urls: list[str]) -> list[int]:
        statuses: list[int] = []
        for url in urls:
            self.batch.push(Entry(HOST, 0, '{"url": "%s"}' % url, self.offsets(url)), statuses.append)
        self.batch.flush()
        return statuses

    def push_all(self, urls: list[str], batch: int = 500) -> list[int]:
        statuses = []
        for start in range(0, len(urls), batch):  # batches, as a crawl's turns push them
            statuses += self.push(urls[start:start + batch])
        return statuses

    def state(self) -> Any:
        (state,) = seen_state(self.client, [self.shard.seen_meta])
        return state


@pytest.fixture(params=["single", "cluster"])
def backend(request: pytest.FixtureRequest, redis_url: str) -> Iterator[Any]:
    url = redis_url if request.param == "single" else request.getfixturevalue("redis_cluster_url")
    client, _, _ = connect(url)
    yield client
    client.close()


@pytest.fixture
def grown(backend: Any) -> Slice:
    return Slice(backend)


def urls(n: int, tag: str) -> list[str]:
    return [f"http://{HOST}/{tag}/{i}" for i in range(n)]


def test_an_empty_slice_is_its_first_generation(grown: Slice) -> None:
    """Opening the crawl allocates each slice's first generation, exactly: 200 URLs at a tenth of
    1 %, 1,024-bit slices (the fewest), 1,280 bytes."""
    assert grown.bloom == BLOOM and BLOOM.num_bytes == 1_280
    for shard in grown.layout.all_shards:
        assert grown.client.strlen(shard.seen) == BLOOM.num_bytes
        assert grown.client.memory_usage(shard.seen, samples=0) <= BLOOM.num_bytes + 128
    assert grown.state().generations == 1 and grown.state().count == 0


def test_a_full_generation_grows_a_larger_one_and_forgets_nothing(grown: Slice) -> None:
    known = urls(40 * CAPACITY, "in")
    statuses = grown.push_all(known)
    new = statuses.count(PUSHED)
    state = grown.state()
    assert state.count == new >= 0.99 * len(known)
    # 200 + 400 + ... + 6,400 = 12,600 > 8,000 >= 200 + ... + 3,200: six generations.
    assert state.capacity == CAPACITY and state.generations == BLOOM.generations_at(new) == 6
    # Each generation allocated at once, end to end, the string exactly that long (grown by copy
    # under 8 MB: no allocator slack).
    newest = BLOOM.generation(state.generations - 1)
    assert grown.client.strlen(grown.shard.seen) * 8 == newest.stop
    assert grown.client.memory_usage(grown.shard.seen, samples=0) <= newest.stop // 8 + 128
    assert set(grown.push(known)) == {FILTERED}, "a URL once seen is never new again"
    assert grown.state().count == new
    (figures,) = [f for f in shard_figures(grown.client, grown.layout, 0.0)
                  if f.index == grown.shard.index]
    assert (figures.seen, figures.seen_capacity, figures.seen_generations) == (new, CAPACITY, 6)
    assert figures.seen_false_positive_rate == BLOOM.false_positive_rate_at(new) < 0.01


def test_false_positives_stay_under_the_configured_rate(grown: Slice) -> None:
    """At 40 times its first capacity (six generations), the slice takes new URLs for seen ones
    at about the rate its sizing expects, under the configured 1 % whatever its growth (20,000
    probes: one standard error is under 0.05 %); the URLs of the fill pushed again are all
    seen."""
    known = urls(40 * CAPACITY, "in")
    grown.push_all(known)
    view = SeenFilter(grown.client, grown.shard.seen, BLOOM, grown.shard.seen_meta)
    assert view.params == BLOOM and all(view.contains_many(known))
    samples = 20_000
    probes = [f"http://{HOST}/out/{random.Random(5).getrandbits(64):x}/{i}" for i in range(samples)]
    rate = sum(view.contains_many(probes)) / samples
    expected = BLOOM.false_positive_rate_at(grown.state().count)
    assert expected < BLOOM.false_positive_rate(BLOOM.max_generations) < BLOOM.error_rate
    assert rate < BLOOM.error_rate and rate < 3 * expected + 0.001, f"{rate:.2%}"
    assert grown.state().count == view.count or view.count == 0  # contains marks nothing


def test_the_dupefilter_counts_and_grows_the_slice_the_scheduler_uses(
        redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime = runtime_for(redis_url, {"WEBCRAWL_BLOOM_CAPACITY": 100}, name="dupegrowth")
    dupes = BloomDupeFilter.from_crawler(runtime.crawler)
    shard = runtime.layout.shard("d.test")
    with caplog.at_level(logging.DEBUG, logger="webcrawl.dupefilter"):
        answers = [dupes.request_seen(Request(f"http://d.test/p/{i}")) for i in range(350)]
    new = answers.count(False)
    (state,) = seen_state(runtime.client, [shard.seen_meta])
    assert state.count == new and state.generations == runtime.bloom.generations_at(new) == 3
    assert runtime.stats.get_value("dupefilter/seen/generations") == 3
    rate = runtime.stats.get_value("dupefilter/seen/false_positive_rate")
    assert rate == round(runtime.bloom.false_positive_rate_at(new), 6) < 0.01
    assert runtime.stats.get_value("dupefilter/seen/over_capacity") is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    grew = [r.getMessage() for r in caplog.records if "grew to" in r.getMessage()]
    assert len(grew) == 2 and "grew to 3 generations" in grew[-1]
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
    assert params.false_positive_rate_at(5_000) < params.false_positive_rate_at(9_999) < 0.00105
    full = params.false_positive_rate_at(9_999)
    assert full == pytest.approx(0.001, rel=0.05), "a full first generation is at its sized rate"
    assert params.generations_at(9_999) == 1 and params.generations_at(10_000) == 2
    assert params.generations_at(29_999) == 2 and params.generations_at(30_000) == 3
    # The second generation holds 20,000 more, at 0.09 % when full.
    assert params.false_positive_rate_at(29_999) == pytest.approx(
        1 - (1 - params.generation(0).rate_at(10_000)) * (1 - params.generation(1).rate_at(19_999)))
    # However far it grows: under the configured rate (about 6.5 % of it per generation, less
    # each time), up to the last generation that fits in a Redis string.
    rates = [params.false_positive_rate_at(n) for n in (10**5, 10**6, 10**7, 10**8)]
    assert rates == sorted(rates) and rates[-1] < params.false_positive_rate(params.max_generations) < 0.01
    assert params.max_generations == 14 and sum(g.capacity for g in params._chain) > 1.6e8
    # A filter of the layout before: equal generations, each at the configured rate.
    old = BloomParams(10_000, 0.01, legacy=True)
    assert old.false_positive_rate_at(9_999) == pytest.approx(0.01, rel=0.05)
    assert old.generations_at(25_000) == 3
    assert old.false_positive_rate_at(20_000) == pytest.approx(
        1 - (1 - old.false_positive_rate_at(10_000 - 1)) ** 2, rel=0.01)


def _old_layout_filter(client: Any, slice_: Slice, capacity: int, known: list[str]) -> BloomParams:
    """What the version before left of a crawl: each shard's slice recorded and allocated at once
    for ``capacity`` URLs at 1 %; the host's grown to a second generation of the same size
    ``stride`` bits on, the first holding ``known[:capacity]`` and the second the rest, each URL
    at the bits pybloom-live's own filter of that size gives it."""
    reference = BloomFilter(capacity, 0.01)
    stride = 8 * ((reference.num_bits + 7) // 8)
    for shard in slice_.layout.all_shards:
        client.delete(shard.seen, shard.seen_meta)
        client.hset(shard.seen_meta, mapping={"capacity": capacity, "error_rate": repr(0.01)})
        client.setbit(shard.seen, stride - 1, 0)
    shard = slice_.shard
    client.hset(shard.seen_meta, mapping={"generations": 2, "stride": stride, "count": len(known)})
    client.setbit(shard.seen, 2 * stride - 1, 0)
    hashes = reference.make_hashes
    pipe = client.pipeline(transaction=False)
    for n, url in enumerate(known):
        base = 0 if n < capacity else stride
        for i, h in enumerate(hashes(url)):
            pipe.setbit(shard.seen, base + i * reference.bits_per_slice + h, 1)
    pipe.execute()
    return BloomParams(capacity, 0.01, legacy=True)


def test_a_crawl_of_the_layout_before_still_filters(backend: Any) -> None:
    """A crawl whose filter the version before made (equal generations, pybloom-live's bit
    offsets) is opened as it is: its sizes win over the settings, the URLs it held are seen in
    both its generations, new ones are taken in and it keeps growing the way it did."""
    first = Slice(backend, crawl="before")  # the layout and its keys (the slices are replaced)
    capacity = 300
    known = urls(450, "old")
    old = _old_layout_filter(backend, first, capacity, known)
    reopened = Slice(backend, crawl="before")  # the new version opens the crawl, new settings
    assert reopened.bloom == old and reopened.bloom.legacy
    assert reopened.offsets("http://x/") != BLOOM.offsets_function()("http://x/")
    assert set(reopened.push(known)) == {FILTERED}, "both old generations still filter"
    fresh = urls(300, "new")
    statuses = reopened.push(fresh)
    assert statuses.count(PUSHED) >= 290
    state = reopened.state()
    assert state.count == 450 + statuses.count(PUSHED) and state.generations == 3
    assert backend.strlen(reopened.shard.seen) * 8 == 3 * int(backend.hget(reopened.shard.seen_meta, "stride"))
    assert backend.hget(reopened.shard.seen_meta, "growth") is None, "not migrated: read as it is"
    assert set(reopened.push(known + fresh)) == {FILTERED}
    view = SeenFilter(backend, reopened.shard.seen, BLOOM, reopened.shard.seen_meta)
    assert view.params == old and all(view.contains_many(known + fresh))
    (figures,) = [f for f in shard_figures(backend, reopened.layout, 0.0)
                  if f.index == reopened.shard.index]
    assert figures.seen_false_positive_rate == old.false_positive_rate_at(state.count)
