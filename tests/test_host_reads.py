"""What a request needs to know of its host (delay, health, validator trust) comes from Redis in
one round trip per host and cache period, on a real redis-server; an outage keeps what was known.
In a crawl, a host known before is answered from memory when its period ends, and read again with
the next write batch sent behind, so the reactor does not wait for that read."""

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


def test_a_stale_host_is_answered_from_memory_and_read_when_asked(redis_url: str) -> None:
    hosts, trips, layout, client = _store(redis_url, cache_seconds=0.0)
    shard = layout.shard("a.example")
    client.hset(shard.delay, "a.example", "2")
    due: list[int] = []
    hosts.due_now = lambda: due.append(hosts.due)
    assert hosts.delay("a.example") == 2.0, "a host never seen is read at once"
    client.hset(shard.delay, "a.example", "3")
    before = trips.count
    assert hosts.delay("a.example") == 2.0 and hosts.health("a.example") == DomainHealth()
    assert trips.count == before, "a stale host waited for Redis"
    assert due == [1] and hosts.due == 1, "due once, however often asked"
    assert hosts.delay("b.example") == 0.5 and trips.count == before + 1
    [host] = hosts.take_due()
    assert host == "a.example" and hosts.due == 0
    pipe = client.pipeline(transaction=False)
    hosts.refresh_build([host])(pipe)
    hosts.refreshed([host], pipe.execute())
    assert hosts.delay("a.example") == 3.0
    hosts.forget_validators("a.example")  # its trust changed: the next answer is read now
    client.hset(shard.trust_validators, "a.example",
                json.dumps(ValidatorTrust(state="trusted", confirmed=4).to_dict()))
    assert hosts.validators("a.example").state == "trusted"


def test_a_crawl_reads_a_stale_host_with_its_next_send_behind(
        redis_url: str, redis_client: redis.Redis) -> None:
    """The crawl's runtime: the stale answer comes at once (Redis already holds a newer one, which
    a read now would have returned), and the read rides the next send behind."""
    from tests.runtimes import run, runtime_for, until

    runtime = runtime_for(redis_url, {"WEBCRAWL_CRAWL_NAME": "stale-hosts",
                                      "WEBCRAWL_FLUSH_SECONDS": 0.0})
    hosts, host = runtime.hosts, "a.example"
    assert hosts.health(host) == DomainHealth()  # known from now on
    for cache in (hosts._delays, hosts._health, hosts._validators):
        cache.seconds = 0.0  # every answer is stale at once
    newer = DomainHealth(1.0, 2.0, 3.0, 4, 5.0)
    redis_client.hset(runtime.layout.shard(host).health, host, _HEALTH.pack(1.0, 2.0, 3.0, 4, 5.0))
    sent: list[int] = []
    send_behind = runtime.batch.send_behind
    runtime.batch.send_behind = lambda *a: sent.append(len(a[2])) or send_behind(*a)  # type: ignore[method-assign]

    async def scenario() -> None:
        assert hosts.health(host) == DomainHealth(), "the reactor waited for a read"
        assert hosts.health(host) == DomainHealth() and hosts.due == 1
        await until(lambda: hosts._health.stale(host, None) == newer)
        assert sent == [1] and hosts.due == 0 and not runtime.failed

    try:
        run(scenario())
    finally:
        runtime.close()


def test_an_estimate_of_a_host_never_read_does_not_wait_for_redis(redis_url: str) -> None:
    hosts, trips, layout, client = _store(redis_url)
    shard = layout.shard("new.example")
    client.hset(shard.health, "new.example", _HEALTH.pack(1.0, 2.0, 3.0, 4, 5.0))
    client.hset(shard.delay, "new.example", "7")
    due: list[int] = []
    hosts.due_now = lambda: due.append(hosts.due)
    before = trips.count
    assert hosts.health("new.example", wait=False) == DomainHealth()  # healthy until read
    assert hosts.health("new.example", wait=False) == DomainHealth()
    assert trips.count == before and due == [1], "due once, read behind, no round trip now"
    [host] = hosts.take_due()
    pipe = client.pipeline(transaction=False)
    hosts.refresh_build([host])(pipe)
    hosts.refreshed([host], pipe.execute())
    assert hosts.health("new.example", wait=False) == DomainHealth(1.0, 2.0, 3.0, 4, 5.0)
    assert hosts.delay("new.example") == 7.0 and trips.count == before + 1  # the read behind
    # Where a request needs the answer, a host never read is still read at once.
    assert hosts.health("other.example") == DomainHealth() and trips.count == before + 2
