"""The seen-URL bloom filter in real Redis bitmaps, one slice per shard: what an empty one costs, its
sizes (the Lua's, recorded, against a Python oracle of the same rule), its false-positive rate
once grown, and BloomDupeFilter (Scrapy's DUPEFILTER_CLASS over the same slices) agreeing with the
scheduler's own push, on a single server and on a real Redis Cluster."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from scrapy import Request

from tests.runtimes import runtime_for
from webcrawl.config import DEFAULTS
from webcrawl.dupefilter import BloomDupeFilter
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.queue import FILTERED, PUSHED, CrawlQueue, Entry
from webcrawl.state.scripts import ScriptSet
from webcrawl.state.seen import BloomParams, SeenFilter


def random_urls(rng: random.Random, n: int, tag: str) -> list[str]:
    return [f"https://h{rng.randrange(10_000)}.example/{tag}/{rng.getrandbits(64):x}?p={i}"
            for i in range(n)]


# -- the oracle: the rule of lua2/seen.lua written again, in Python, for the tests only ----------

def oracle_bits(params: BloomParams, g: int, key: list[int]) -> list[int]:
    """The bits of a URL's key (three words) in generation ``g``."""
    generation = params.generation(g)
    h1, h2, h3 = key
    m = generation.m
    return [generation.start + i * m + (h1 + i * (h2 + i * h3)) % m for i in range(generation.k)]


class Bitmap:
    """A slice's bitmap read once (Redis numbers bits from the most significant bit of a byte)."""

    def __init__(self, client: Any, key: str) -> None:
        self.data = client.get(key) or b""

    def bit(self, i: int) -> bool:
        return (i >> 3) < len(self.data) and bool(self.data[i >> 3] >> (7 - (i & 7)) & 1)

    def holds(self, params: BloomParams, generations: int, url: str) -> bool:
        key = params.offsets_function()(url)
        return any(all(self.bit(b) for b in oracle_bits(params, g, key))
                   for g in range(generations))


def test_an_empty_crawls_filter_costs_its_first_generation(redis_client: redis.Redis) -> None:
    """Opened with the default sizes, each shard's slice is one small generation (a few KB, where
    the filter sized up front took 12 MB a crawl); 300 crawls' filters stay under 2 MB."""
    params = BloomParams(DEFAULTS["WEBCRAWL_BLOOM_CAPACITY"], DEFAULTS["WEBCRAWL_BLOOM_ERROR_RATE"])
    first = params.generation(0)
    assert params.num_bytes == math.ceil(first.k * first.m / 8) < 4096
    before = int(redis_client.info("memory")["used_memory"])
    for crawl in range(300):
        layout = CrawlLayout(f"site{crawl}")
        queue = CrawlQueue(redis_client, ScriptSet(redis_client), layout, cap=0, default_delay=0,
                           lease_seconds=1)
        assert queue.check_seen_filter(params) == params
        (shard,) = layout.all_shards
        assert redis_client.strlen(shard.seen) == params.num_bytes
        assert redis_client.memory_usage(shard.seen, samples=0) <= params.num_bytes + 128
    grown = int(redis_client.info("memory")["used_memory"]) - before
    assert grown < 2_000_000, f"{grown} bytes for 300 empty crawls' seen filters"
    # A crawl split over 16 shards: each slice starts with its share, at least 1,024 bits a slice.
    share = BloomParams(int(2_000 * 1.1 / 16), 0.01)
    assert share.generation(0).m == 1024 and share.num_bytes == 1280


def test_the_sizes_the_lua_records_are_the_rules(redis_client: redis.Redis) -> None:
    """Grown to several generations, the slice records each one's k and m as the sizing says:
    twice the URLs of the one before, sized for 0.9 times its false-positive rate, allocated at
    once end to end; every URL taken in is held in the bits the oracle expects."""
    params = BloomParams(300, 0.01)
    seen = SeenFilter(redis_client, "test:sizes", params)
    urls = random_urls(random.Random(1), 4_000, "in")
    new = sum(not s for s in seen.test_and_set_many(urls))
    gens = params.generations_at(new)
    assert seen.generations == gens == 4  # 300 + 600 + 1,200 < 4,000 < 300 + ... + 2,400
    sizes = redis_client.hget(seen.meta_key, "sizes").decode().split()
    assert sizes == [f"{params.generation(g).k}:{params.generation(g).m}" for g in range(gens)]
    for g in range(1, gens):
        before, now = params.generation(g - 1), params.generation(g)
        assert now.capacity == 2 * before.capacity and now.start == before.stop
        assert now.error_rate == pytest.approx(0.9 * before.error_rate)
    assert params.generation(0).error_rate == pytest.approx(0.001)  # 1 % x (1 - 0.9)
    assert redis_client.strlen(seen.key) * 8 == params.generation(gens - 1).stop
    bitmap = Bitmap(redis_client, seen.key)
    assert all(bitmap.holds(params, gens, url) for url in urls)
    probes = random_urls(random.Random(2), 2_000, "out")
    assert [bitmap.holds(params, gens, u) for u in probes] == seen.contains_many(probes)


def test_false_positives_of_a_grown_filter_stay_under_the_configured_rate(
        redis_client: redis.Redis) -> None:
    """100,000 URLs into a filter whose first generation holds 2,000 (six generations), then
    50,000 other URLs: none taken in is forgotten, and the share of the others taken for seen
    ones stays under the configured 1 % (the sizing expects about 0.5 %: a wide margin over the
    sample's noise, 0.03 % for one standard error)."""
    params = BloomParams(2_000, 0.01)
    seen = SeenFilter(redis_client, "test:seen", params)
    rng = random.Random(20261201)
    inserted = random_urls(rng, 100_000, "in")
    newly_seen = sum(not s for s in seen.test_and_set_many(inserted))
    assert newly_seen >= 99_000 and seen.generations == params.generations_at(newly_seen) == 6
    assert all(seen.contains_many(inserted)), "no false negative"
    samples = 50_000
    rate = sum(seen.contains_many(random_urls(rng, samples, "out"))) / samples
    expected = params.false_positive_rate_at(newly_seen)
    assert 0.002 < expected < 0.01
    assert rate < params.error_rate, f"{rate:.4%} false positives, {params.error_rate:.2%} configured"
    assert rate == pytest.approx(expected, abs=8 * math.sqrt(expected / samples))


@pytest.mark.parametrize(("shards", "per_shard"), [(1, 1000), (4, 275), (64, 17)])
def test_the_crawls_capacity_is_split_over_its_shards(redis_url: str, shards: int, per_shard: int) -> None:
    runtime = runtime_for(redis_url, {"WEBCRAWL_BLOOM_CAPACITY": 1000, "WEBCRAWL_SHARDS": shards})
    assert runtime.layout.shards == shards and runtime.bloom.capacity == per_shard  # 10% headroom
    runtime.close()


@pytest.fixture(params=["single", "cluster"])
def runtime(request: pytest.FixtureRequest, redis_url: str) -> Iterator[CrawlRuntime]:
    url = redis_url if request.param == "single" else request.getfixturevalue("redis_cluster_url")
    runtime = runtime_for(url, {"WEBCRAWL_BLOOM_CAPACITY": 10_000, "WEBCRAWL_SHARDS": 6}, name="dupes")
    runtime.bloom = runtime.queue.check_seen_filter(runtime.bloom)
    yield runtime
    runtime.close()


def push(runtime: CrawlRuntime, url: str) -> int:
    """What the scheduler does with a new request: a push tested against the host's slice."""
    from w3lib.url import canonicalize_url

    statuses: list[int] = []
    host = url.split("/")[2]
    offsets = runtime.bloom.offsets_function()(canonicalize_url(url))
    runtime.batch.push(Entry(host, 0, '{"url": "%s"}' % url, offsets), statuses.append)
    runtime.batch.flush()
    return statuses[0]


def test_the_dupefilter_and_the_scheduler_share_each_hosts_slice(runtime: CrawlRuntime) -> None:
    dupes = BloomDupeFilter.from_crawler(runtime.crawler)
    hosts = [f"h{i}.example" for i in range(12)]
    assert len({runtime.layout.shard_index(h) for h in hosts}) > 1
    for host in hosts:
        assert dupes.request_seen(Request(f"http://{host}/a?y=2&x=1")) is False
        assert dupes.request_seen(Request(f"http://{host}/a?x=1&y=2#top")) is True  # canonical form
        assert push(runtime, f"http://{host}/a?x=1&y=2") == FILTERED  # the scheduler sees it too
        assert push(runtime, f"http://{host}/b") == PUSHED
    other = BloomDupeFilter.from_crawler(runtime.crawler)  # another process: no local cache
    assert all(other.request_seen(Request(f"http://{h}/b")) for h in hosts)
    assert not any(other.request_seen(Request(f"http://{h}/c")) for h in hosts)
    # Each URL marked only its own host's slice.
    for host in hosts:
        for index, shard in enumerate(runtime.layout.all_shards):
            marked = Bitmap(runtime.client, shard.seen).holds(runtime.bloom, 1, f"http://{host}/c")
            assert marked is (index == runtime.layout.shard_index(host))


def test_a_later_process_keeps_the_sizes_the_crawl_recorded(redis_url: str) -> None:
    """The first user records the filter's sizes; a process with other settings uses them (its
    URLs' bits must land where the first one's do), and both filter the same URLs."""
    first = runtime_for(redis_url, {"WEBCRAWL_BLOOM_CAPACITY": 10_000}, name="sized")
    dupes = BloomDupeFilter.from_crawler(first.crawler)  # the first user records the size
    assert dupes.request_seen(Request("http://a.example/1")) is False
    first.close()
    second = runtime_for(redis_url, {"WEBCRAWL_BLOOM_CAPACITY": 50_000,
                                     "WEBCRAWL_BLOOM_ERROR_RATE": 0.001}, name="sized")
    assert second.queue.check_seen_filter(second.bloom) == BloomParams(10_000, 0.01)
    again = BloomDupeFilter.from_crawler(second.crawler)
    assert second.bloom == BloomParams(10_000, 0.01)
    assert again.request_seen(Request("http://a.example/1")) is True
    assert push(second, "http://a.example/2") == PUSHED
    assert again.request_seen(Request("http://a.example/2")) is True
    second.close()


def test_duplicates_are_counted_and_logged_once(redis_url: str, caplog: Any) -> None:
    runtime = runtime_for(redis_url, name="logged")
    dupes = BloomDupeFilter.from_crawler(runtime.crawler)
    for _ in range(3):
        request = Request("http://a.example/x")
        if dupes.request_seen(request):
            dupes.log(request, runtime.crawler.spider)
    assert runtime.stats.get_value("dupefilter/filtered") == 2
    runtime.close()
