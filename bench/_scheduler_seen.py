"""Seen-URL memory at 1,000,000 URLs: webcrawl's bloom bitmap against scrapy-redis's fingerprint set.

Both are filled in the Redis server of the benchmark, with pipelined commands. The URLs are built
canonical (``canonicalize_url`` leaves them unchanged, checked on a sample), so the bloom filter's
key and scrapy-redis's fingerprint input are the URL itself:

- webcrawl: the bit offsets of :meth:`BloomParams.offsets_function` (what the scheduler's push
  script sets), written with ``BITFIELD ... SET u1``; the first URLs go through webcrawl's own
  :class:`SeenFilter` test-and-set, the rest take the fast path to the same bits. False positives
  are read (``BITFIELD_RO``, never set) for 100,000 URLs that were not inserted.
- scrapy-redis: ``RFPDupeFilter.request_fingerprint`` (SHA-1 hex of method, canonical URL, body),
  recomputed here with the same formula (checked equal on a sample) and ``SADD``-ed in batches.
"""

from __future__ import annotations

import hashlib
import sys
import json
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import redis
from scrapy import Request
from scrapy_redis.dupefilter import RFPDupeFilter
from w3lib.url import canonicalize_url

from webcrawl.state.layout import CrawlLayout
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.scripts import ScriptSet
from webcrawl.state.seen import BloomParams, SeenFilter

assert sys.byteorder == "little" and array("I").itemsize == 4, "offsets are packed as <I4"

URLS = 1_000_000
PROBES = 100_000
BATCH = 2_000
THROUGH_SEENFILTER = 5_000


# Offsets travel packed (little-endian uint32) and are set or read inside Redis: encoding seven
# command arguments per URL in redis-py would take a minute for a million URLs.
_SET_BITS = """
local s = ARGV[1]
for pos = 1, #s, 4 do redis.call('SETBIT', KEYS[1], struct.unpack('<I4', s, pos), 1) end
return 0
"""
_COUNT_SET = """
local k, s, hits = tonumber(ARGV[1]), ARGV[2], 0
for pos = 1, #s, 4 * k do
  local all_set = 1
  for j = 0, k - 1 do
    if redis.call('GETBIT', KEYS[1], (struct.unpack('<I4', s, pos + 4 * j))) == 0 then
      all_set = 0 break
    end
  end
  hits = hits + all_set
end
return hits
"""


def _packed(offsets: Callable[[str], list[int]], lo: int, hi: int) -> bytes:
    return array("I", (o for i in range(lo, hi) for o in offsets(url(i)))).tobytes()


def url(i: int) -> str:
    return f"http://www.site{i % 997}.example.org/docs/section-{i // 1000}/page-{i}.html"


def fingerprint(u: str) -> str:
    data = {"method": "GET", "url": u, "body": ""}
    return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()


@dataclass
class SeenMemory:
    bloom_bytes: int  # MEMORY USAGE of the bitmap key
    bloom_strlen: int
    bloom_formula: int
    false_positives: int
    bloom_seconds: float
    set_bytes: int
    set_seconds: float


def measure(client: redis.Redis) -> SeenMemory:
    reference = RFPDupeFilter(client, "unused")
    for i in range(0, URLS, URLS // 1000):
        assert canonicalize_url(url(i)) == url(i)
        assert reference.request_fingerprint(Request(url(i))) == fingerprint(url(i))

    params = BloomParams(URLS, 0.01)
    offsets = params.offsets_function()
    layout = CrawlLayout("bench-seen")
    queue = CrawlQueue(client, ScriptSet(client), layout, cap=1, default_delay=0,
                       lease_seconds=1)
    shard = layout.all_shards[0]
    key = shard.seen
    client.delete(key, shard.seen_meta)
    start = time.perf_counter()
    queue.check_seen_filter(params)  # sizes the bitmap as a crawl does
    seen = SeenFilter(client, key, params, shard.seen_meta)
    assert not any(seen.test_and_set_many(url(i) for i in range(THROUGH_SEENFILTER)))
    set_bits, count_set = client.register_script(_SET_BITS), client.register_script(_COUNT_SET)
    pipe = client.pipeline(transaction=False)
    for lo in range(THROUGH_SEENFILTER, URLS, BATCH):
        set_bits(keys=[key], args=[_packed(offsets, lo, min(lo + BATCH, URLS))], client=pipe)
        if len(pipe) >= 20:
            pipe.execute()
    pipe.execute()
    bloom_seconds = time.perf_counter() - start
    assert all(seen.test_and_set_many(url(i) for i in range(0, URLS, URLS // 1000)))
    for lo in range(URLS, URLS + PROBES, BATCH):
        count_set(keys=[key], args=[params.num_slices, _packed(offsets, lo, lo + BATCH)], client=pipe)
    false_positives = sum(pipe.execute())
    bloom_bytes = int(client.memory_usage(key, samples=0) or 0)
    bloom_strlen = int(client.strlen(key))  # type: ignore[arg-type]
    client.delete(key, shard.seen_meta)

    key = "bench:seen:fingerprints"
    start = time.perf_counter()
    for lo in range(0, URLS, BATCH):
        pipe.sadd(key, *(fingerprint(url(i)) for i in range(lo, min(lo + BATCH, URLS))))
        if len(pipe) >= 20:
            pipe.execute()
    pipe.execute()
    set_seconds = time.perf_counter() - start
    assert client.scard(key) == URLS
    set_bytes = int(client.memory_usage(key, samples=0) or 0)
    client.delete(key)
    return SeenMemory(bloom_bytes, bloom_strlen, params.num_bytes, false_positives, bloom_seconds,
                      set_bytes, set_seconds)
