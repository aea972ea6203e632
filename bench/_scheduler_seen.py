"""Seen-URL memory at 1,000,000 URLs: webcrawl's bloom bitmap against scrapy-redis's fingerprint set.

Both are filled in the Redis server of the benchmark, with pipelined commands. The URLs are built
canonical (``canonicalize_url`` leaves them unchanged, checked on a sample), so the bloom filter's
key and scrapy-redis's fingerprint input are the URL itself:

- webcrawl: the filter a crawl opens with the default sizes (a small first generation) grown to
  the million URLs by the filter's own rule (``lua2/seen.lua``): the first URLs go through
  :class:`SeenFilter` test-and-set, the rest through the same rule 2,000 URLs a script call.
  False positives are counted (nothing set) for 100,000 URLs that were not inserted.
- scrapy-redis: ``RFPDupeFilter.request_fingerprint`` (SHA-1 hex of method, canonical URL, body),
  recomputed here with the same formula (checked equal on a sample) and ``SADD``-ed in batches.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
from scrapy import Request
from scrapy_redis.dupefilter import RFPDupeFilter
from w3lib.url import canonicalize_url

from webcrawl.config import DEFAULTS
from webcrawl.state.layout import CrawlLayout
from webcrawl.state.queue import CrawlQueue
from webcrawl.state.scripts import ScriptSet
from webcrawl.state.seen import LUA, BloomParams, SeenFilter

URLS = 1_000_000
PROBES = 100_000
BATCH = 2_000
THROUGH_SEENFILTER = 5_000


# Many URLs a call, through the filter's own rule: ARGV[1] "set" (test-and-set) or "count" (test
# only); then each URL's key. Returns the URLs found seen.
_MANY = LUA + """
local setting = ARGV[1] == 'set'
local s = seen_open(KEYS[1], KEYS[2], setting)
local hits = 0
for a = 2, #ARGV, 3 do
  if seen_test(s, a, 3) then hits = hits + 1 elseif setting then seen_mark(s, a, 3) end
end
seen_close(s)
return hits
"""


def _keys(offsets: Callable[[str], list[int]], lo: int, hi: int) -> list[int]:
    return [o for i in range(lo, hi) for o in offsets(url(i))]


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

    params = BloomParams(DEFAULTS["WEBCRAWL_BLOOM_CAPACITY"], 0.01)
    offsets = params.offsets_function()
    layout = CrawlLayout("bench-seen")
    queue = CrawlQueue(client, ScriptSet(client), layout, cap=1, default_delay=0,
                       lease_seconds=1)
    shard = layout.all_shards[0]
    key = shard.seen
    client.delete(key, shard.seen_meta)
    start = time.perf_counter()
    queue.check_seen_filter(params)  # records and allocates the first generation, as a crawl does
    seen = SeenFilter(client, key, params, shard.seen_meta)
    assert sum(seen.test_and_set_many(url(i) for i in range(THROUGH_SEENFILTER))) < THROUGH_SEENFILTER // 100
    many = client.register_script(_MANY)
    pipe = client.pipeline(transaction=False)
    for lo in range(THROUGH_SEENFILTER, URLS, BATCH):
        many(keys=[key, shard.seen_meta], args=["set", *_keys(offsets, lo, min(lo + BATCH, URLS))],
             client=pipe)
        if len(pipe) >= 20:
            pipe.execute()
    pipe.execute()
    bloom_seconds = time.perf_counter() - start
    assert all(seen.test_and_set_many(url(i) for i in range(0, URLS, URLS // 1000)))
    for lo in range(URLS, URLS + PROBES, BATCH):
        many(keys=[key, shard.seen_meta], args=["count", *_keys(offsets, lo, lo + BATCH)], client=pipe)
    false_positives = sum(pipe.execute())
    bloom_bytes = int(client.memory_usage(key, samples=0) or 0)
    bloom_strlen = int(client.strlen(key))  # type: ignore[arg-type]
    count = int(client.hget(shard.seen_meta, "count") or 0)
    formula = params.generation(params.generations_at(count) - 1).stop // 8
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
    return SeenMemory(bloom_bytes, bloom_strlen, formula, false_positives, bloom_seconds,
                      set_bytes, set_seconds)
