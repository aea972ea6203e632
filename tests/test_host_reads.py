"""What a request needs to know of its host (delay, health, validator trust) comes from Redis in
one round trip per host and cache period, on a real redis-server; an outage keeps what was known."""

from __future__ import annotations

import json
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from webcrawl.change.trust import ValidatorTrust
from webcrawl.state.client import connect
from webcrawl.state.hosts import _HEALTH, DomainHealth, HostStore
from webcrawl.state.layout import CrawlLayout


def _store(url: str, **kwargs):
    client, trips, _ = connect(url, retries=False)
    layout = CrawlLayout("hostreads")
    return HostStore(client, layout, default_delay=0.5, **kwargs), trips, layout, client


def test_a_hosts_three_reads_take_one_round_trip(redis_url: str) -> None:
    hosts, trips, layout, client = _store(redis_url)
    shard = layout.shard("a.example")
    trust = ValidatorTrust(state="trusted", confirmed=4)
    client.hset(shard.delay, "a.example", "2.5")
    client.hset(shard.health, "a.example", _HEALTH.pack(1.0, 2.0, 3.0, 4, 5.0))
    client.hset(shard.trust_validators, "a.example", json.dumps(trust.to_dict()))
    before = trips.count
    assert hosts.validators("a.example") == trust
    assert hosts.delay("a.example") == 2.5
    assert hosts.health("a.example") == DomainHealth(1.0, 2.0, 3.0, 4, 5.0)
    assert trips.count - before == 1
    # A host Redis knows nothing of: the defaults, in one round trip too.
    assert hosts.health("b.example") == DomainHealth()
    assert hosts.delay("b.example") == 0.5 and hosts.validators("b.example") == ValidatorTrust()
    assert trips.count - before == 2


def test_each_read_is_fresh_after_the_cache_period(redis_url: str) -> None:
    hosts, trips, layout, client = _store(redis_url, cache_seconds=0.0)
    shard = layout.shard("a.example")
    assert hosts.delay("a.example") == 0.5
    client.hset(shard.delay, "a.example", "3")
    client.hset(shard.trust_validators, "a.example", "not json")
    assert hosts.delay("a.example") == 3.0
    assert hosts.validators("a.example") == ValidatorTrust()  # unreadable: start over


def test_an_outage_keeps_what_was_known(redis_url: str, tmp_path: Path) -> None:
    hosts, trips, layout, client = _store(redis_url, cache_seconds=0.0)
    client.hset(layout.shard("a.example").delay, "a.example", "4")
    assert hosts.delay("a.example") == 4.0
    errors: list[Exception] = []
    hosts.on_error = errors.append
    hosts.client = redis.Redis(unix_socket_path=str(tmp_path / "gone.sock"), socket_timeout=1,
                               retry=Retry(NoBackoff(), 0))  # a server that is not there
    assert hosts.delay("a.example") == 4.0
    assert hosts.health("a.example") == DomainHealth()
    assert len(errors) == 2
    hosts.offline = lambda: True  # known to be down: no read is tried
    assert hosts.validators("a.example") == ValidatorTrust() and len(errors) == 2
