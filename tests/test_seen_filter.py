"""The seen-URL bloom filter in a real Redis bitmap: its size and its false-positive rate."""

from __future__ import annotations

import math
import random

import pytest
import redis
from pybloom_live import BloomFilter

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


def test_bitmap_size_matches_formula(redis_client: redis.Redis) -> None:
    from webcrawl.state.frontier import Frontier
    from webcrawl.state.keys import CrawlKeys

    n, p = 1_000_000, 0.01
    params = BloomParams(n, p)
    k = math.ceil(math.log2(1 / p))
    bits_per_slice = math.ceil(n * abs(math.log(p)) / (k * math.log(2) ** 2))
    assert (params.num_slices, params.bits_per_slice) == (k, bits_per_slice)
    frontier = Frontier(redis_client, CrawlKeys("bloom"), params, cap=0, default_delay=0,
                        lease_seconds=1)
    frontier.check_seen_filter()
    assert redis_client.strlen(CrawlKeys("bloom").seen) == math.ceil(k * bits_per_slice / 8)
    assert params.num_bytes / n <= 1.3  # bytes per URL at 1 %
    # Same bit positions as pybloom-live's own filter of that size.
    reference = BloomFilter(n, p)
    assert reference.num_bits == params.num_bits
    reference.add("http://a.example/")
    on = [i for i in range(reference.num_bits) if reference.bitarray[i]]
    assert on == sorted(params.offsets_function()("http://a.example/"))
