"""The robots.txt cache: Redis hash per origin shared by processes, a bounded LRU in front, and
expiry by the injected clock (never more than 24 hours)."""

from __future__ import annotations

import pytest

from webcrawl.clock import ManualClock
from webcrawl.robots import Kind, RobotsPolicy, verdict_for_error, verdict_for_response
from webcrawl.robots.cache import RobotsCache, robots_key

ORIGIN = "https://a.example:443"
GOOD = verdict_for_response(200, b"User-agent: *\nDisallow: /private\n", ttl=3600, error_ttl=60)


def test_key_uses_the_documented_prefix():
    assert robots_key(ORIGIN) == "webcrawl:robots:https://a.example:443"


def test_round_trip_through_redis(redis_client):
    clock = ManualClock()
    RobotsCache(redis_client, clock=clock).put(ORIGIN, GOOD)
    fields = redis_client.hgetall(robots_key(ORIGIN))
    assert fields[b"kind"] == b"rules"
    assert fields[b"status"] == b"200"
    assert float(fields[b"expires"]) - float(fields[b"fetched"]) == 3600
    assert 0 < redis_client.ttl(robots_key(ORIGIN)) <= 3600

    other_process = RobotsCache(redis_client, clock=clock)
    policy = other_process.get(ORIGIN)
    assert policy == GOOD.policy
    assert not policy.allowed("https://a.example/private", "webcrawl")
    assert other_process.redis_hits == 1
    assert other_process.get(ORIGIN) == GOOD.policy
    assert other_process.lru_hits == 1


def test_answers_expire_by_the_clock(redis_client):
    clock = ManualClock()
    writer = RobotsCache(redis_client, clock=clock)
    reader = RobotsCache(redis_client, clock=clock, lru_seconds=10_000)
    writer.put(ORIGIN, GOOD)
    assert reader.get(ORIGIN) is not None
    clock.advance(3599)
    assert reader.get(ORIGIN) is not None  # from the LRU, whose entry ends with Redis's
    clock.advance(1)
    assert reader.get(ORIGIN) is None
    assert writer.get(ORIGIN) is None
    assert reader.misses == 1


def test_error_answers_are_short(redis_client):
    clock = ManualClock()
    cache = RobotsCache(redis_client, clock=clock)
    cache.put(ORIGIN, verdict_for_error(error_ttl=120))
    assert cache.get(ORIGIN).kind is Kind.DISALLOW_ALL
    assert redis_client.hget(robots_key(ORIGIN), "status") == b""
    clock.advance(120)
    assert cache.get(ORIGIN) is None


def test_an_over_long_expiry_in_redis_is_capped_at_a_day(redis_client):
    clock = ManualClock()
    RobotsCache(redis_client, clock=clock).put(ORIGIN, GOOD)
    redis_client.hset(robots_key(ORIGIN), "expires", repr(clock.time() + 30 * 86400))
    cache = RobotsCache(redis_client, clock=clock, lru_size=0)
    clock.advance(86400 - 1)
    assert cache.get(ORIGIN) is not None
    clock.advance(1)
    assert cache.get(ORIGIN) is None


def test_lru_expires_before_redis_so_refreshes_are_seen(redis_client):
    clock = ManualClock()
    reader = RobotsCache(redis_client, clock=clock, lru_seconds=60)
    writer = RobotsCache(redis_client, clock=clock)
    writer.put(ORIGIN, GOOD)
    assert reader.get(ORIGIN) == GOOD.policy
    writer.put(ORIGIN, verdict_for_response(404, b"", ttl=3600, error_ttl=60))
    assert reader.get(ORIGIN) == GOOD.policy  # still the LRU's copy
    clock.advance(60)
    assert reader.get(ORIGIN) == RobotsPolicy.allow_all()


def test_lru_is_bounded_and_evicts_least_recently_used():
    clock = ManualClock()
    cache = RobotsCache(None, clock=clock, lru_size=2)
    for name in "abc":
        if name == "c":
            assert cache.get("http://a:80") is not None  # a is now more recent than b
        cache.put(f"http://{name}:80", GOOD)
    assert len(cache) == 2
    assert cache.get("http://b:80") is None
    assert cache.get("http://a:80") is not None
    assert cache.get("http://c:80") is not None


def test_foreign_or_broken_hash_is_ignored(redis_client):
    redis_client.hset(robots_key(ORIGIN), mapping={"kind": "bogus", "fetched": "x"})
    assert RobotsCache(redis_client).get(ORIGIN) is None


def test_forget(redis_client):
    cache = RobotsCache(redis_client)
    cache.put(ORIGIN, GOOD)
    cache.forget(ORIGIN)
    assert cache.get(ORIGIN) is None
    assert not redis_client.exists(robots_key(ORIGIN))


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="lru_size"):
        RobotsCache(None, lru_size=-1)
