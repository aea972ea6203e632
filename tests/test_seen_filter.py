"""The seen-URL bloom filter in real Redis bitmaps, one slice per shard: its size and its
false-positive rate, and BloomDupeFilter (Scrapy's DUPEFILTER_CLASS over the same slices) agreeing
with the scheduler's own push, on a single server and on a real Redis Cluster."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from pybloom_live import BloomFilter
from scrapy import Request

from tests.runtimes import runtime_for
from webcrawl.dupefilter import BloomDupeFilter
from webcrawl.runtime import CrawlRuntime
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.queue import FILTERED, PUSHED, CrawlQueue, Entry
from webcrawl.state.scripts import ScriptSet
from webcrawl.state.seen import BloomParams, SeenFilter


def random_urls(rng: random.Random, n: int, tag: str) -> list[str]:
    return [f"https://h{rng.randrange(10_000)}.example/{tag}/{rng.getrandbits(64):x}?p={i}"
            for i in range(n)]


def probe(client: redis.Redis, key: str, params: BloomParams, urls: list[str]) -> int:
    """How many of ``urls`` the filter claims to have seen, without adding them (the bitmap is
    read once; Redis numbers bits from the most significant bit of each byte)."""
    bitmap = client.get(key) or b""
    offsets = params.offsets_function()

    def bit(i: int) -> bool:
        return (i >> 3) < len(bitmap) and bool(bitmap[i >> 3] >> (7 - (i & 7)) & 1)

    return sum(all(bit(i) for i in offsets(url)) for url in urls)


def test_false_positive_rate_within_configured_rate(redis_client: redis.Redis) -> None:
    """At capacity (100,000 URLs inserted), 100,000 other URLs: within the configured rate, give
    or take three standard errors of a 100,000-sample measurement (at capacity the expected rate
    is the configured one itself)."""
    capacity, error_rate, samples = 100_000, 0.01, 100_000
    params = BloomParams(capacity, error_rate)
    seen = SeenFilter(redis_client, "test:seen", params)
    rng = random.Random(20261201)
    inserted = random_urls(rng, capacity, "in")
    newly_seen = sum(not s for s in seen.test_and_set_many(inserted))
    assert newly_seen >= capacity * (1 - error_rate)
    assert probe(redis_client, "test:seen", params, inserted) == capacity  # no false negative
    rate = probe(redis_client, "test:seen", params, random_urls(rng, samples, "out")) / samples
    tolerance = 3 * math.sqrt(error_rate * (1 - error_rate) / samples)
    assert rate <= error_rate + tolerance, f"{rate:.4%} false positives, {error_rate:.2%} configured"


def test_each_shards_slice_is_sized_by_the_formula_once(redis_client: redis.Redis) -> None:
    n, p = 1_000_000, 0.01
    params = BloomParams(n, p)
    k = math.ceil(math.log2(1 / p))
    bits_per_slice = math.ceil(n * abs(math.log(p)) / (k * math.log(2) ** 2))
    assert (params.num_slices, params.bits_per_slice) == (k, bits_per_slice)
    layout = CrawlLayout("bloom", 4)
    queue = CrawlQueue(redis_client, ScriptSet(redis_client), layout, cap=0, default_delay=0,
                       lease_seconds=1)
    queue.check_seen_filter(params)
    for shard in layout.all_shards:  # allocated at once, not bit by bit as URLs come
        assert redis_client.strlen(shard.seen) == math.ceil(k * bits_per_slice / 8)
    assert params.num_bytes / n <= 1.3  # bytes per URL at 1 %
    queue.check_seen_filter(params)  # the same size again: fine
    with pytest.raises(ValueError, match="sized for 1000000 URLs per shard at error rate 0.01"):
        queue.check_seen_filter(BloomParams(2 * n, p))
    # Same bit positions as pybloom-live's own filter of that size.
    reference = BloomFilter(n, p)
    assert reference.num_bits == params.num_bits
    reference.add("http://a.example/")
    on = [i for i in range(reference.num_bits) if reference.bitarray[i]]
    assert on == sorted(params.offsets_function()("http://a.example/"))


@pytest.mark.parametrize(("shards", "per_shard"), [(1, 1000), (4, 275), (64, 17)])
def test_the_crawls_capacity_is_split_over_its_shards(redis_url: str, shards: int, per_shard: int) -> None:
    runtime = runtime_for(redis_url, {"WEBCRAWL_BLOOM_CAPACITY": 1000, "WEBCRAWL_SHARDS": shards})
    assert runtime.layout.shards == shards and runtime.bloom.capacity == per_shard  # 10% headroom
    runtime.close()


@pytest.fixture(params=["single", "cluster"])
def runtime(request: pytest.FixtureRequest, redis_url: str) -> Iterator[CrawlRuntime]:
    url = redis_url if request.param == "single" else request.getfixturevalue("redis_cluster_url")
    runtime = runtime_for(url, {"WEBCRAWL_BLOOM_CAPACITY": 10_000, "WEBCRAWL_SHARDS": 6}, name="dupes")
    runtime.queue.check_seen_filter(runtime.bloom)
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
        offsets = runtime.bloom.offsets_function()("http://%s/c" % host)
        for index, shard in enumerate(runtime.layout.all_shards):
            marked = all(runtime.client.getbit(shard.seen, o) for o in offsets)
            assert marked is (index == runtime.layout.shard_index(host))


def test_the_dupefilter_refuses_a_filter_sized_differently(redis_url: str) -> None:
    first = runtime_for(redis_url, {"WEBCRAWL_BLOOM_CAPACITY": 10_000}, name="sized")
    BloomDupeFilter.from_crawler(first.crawler)  # the first user records the size
    first.close()
    second = runtime_for(redis_url, {"WEBCRAWL_BLOOM_CAPACITY": 50_000}, name="sized")
    with pytest.raises(ValueError, match="WEBCRAWL_BLOOM_CAPACITY"):
        BloomDupeFilter.from_crawler(second.crawler)
    with pytest.raises(ValueError, match="WEBCRAWL_BLOOM_CAPACITY"):
        second.queue.check_seen_filter(second.bloom)  # as the scheduler would
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
