"""The test Redis Cluster (tests/rediscluster.py), and what redis-py 8.1's RedisCluster does there.

Findings about ``redis.cluster.RedisCluster`` (redis-py 8.1.0) against this Redis 6.2.14 cluster,
found by experiment unless marked "(code)" (read in redis-py, not provoked here) or "(Redis 7
docs)" (not testable with this server); the tests below pin the ones the crawl state builds on.

Connecting, and telling a cluster from a single server
    ``RedisCluster.from_url("redis://host:port")`` needs one reachable node: it reads CLUSTER
    SLOTS and connects to the masters. It refuses ``unix://`` URLs and a db other than 0
    (RedisClusterException), and a server without cluster mode (RedisClusterException "Redis
    Cluster cannot be connected ... Cluster mode is not enabled on this node"). To decide which
    client a URL needs, ask with a plain client: ``INFO cluster`` gives ``cluster_enabled`` 1 on a
    cluster node, 0 elsewhere (CLUSTER INFO would raise ResponseError on a plain server). A plain
    client on a cluster node only reaches that node's slots; other keys raise MovedError.
    redis-py 8 speaks RESP3 by default (HELLO 3, then CLIENT SETINFO twice: four commands per new
    connection); ``protocol=2`` opts out. ``close()`` of a client made by ``from_url`` leaves the
    node connections open until garbage collection (its node pools are not auto-closed; a
    ResourceWarning, an error in this suite): build it from host and port instead
    (:func:`tests.rediscluster.cluster_client`).

Pipelines
    ``pipeline()`` is NOT transactional by default (``transaction=None``; a plain client's
    default is MULTI/EXEC). Queued commands are grouped by the master owning their slot; every
    group is written to its node first, then the replies are read node by node: one write and
    one read per node, about one round trip in all. ``pipeline(transaction=True)`` wraps one
    slot's commands in MULTI/EXEC and raises CrossSlotTransactionError for keys of several slots.
    Commands answered with MOVED or ASK, or hit by a connection error, are re-sent one at a time
    through the ordinary command path (a round trip each); the caller sees plain results.
    MGET/MSET of several slots raise RedisClusterException before sending; ``mget_nonatomic``,
    ``mset_nonatomic`` and multi-key DEL/EXISTS/UNLINK are split per slot (not atomic).

Lua scripts
    ``register_script(text)(keys=..., args=...)`` sends EVALSHA to the master owning the keys'
    slot; keys of several slots raise RedisClusterException ("EVALSHA - all keys must map to the
    same key slot") before anything is sent, and a node asked directly answers CROSSSLOT
    (ClusterCrossSlotError). No keys: a random master. On NoScriptError the Script loads itself on
    every master (SCRIPT LOAD goes to all primaries) and retries: the first call costs five round
    trips, later ones one. Declare every key a script touches, under one hash tag: Redis 6.2
    lets a script touch an undeclared key only on the node owning it ("Lua script attempted to
    access a non local key in a cluster node"), Redis 7 refuses any other slot (Redis 7 docs).
    Script objects
    cannot run on a ClusterPipeline ("Calling pipelined function evalsha is blocked");
    ``pipe.execute_command("EVALSHA", sha, n, *keys, *args)`` works and is routed by its keys,
    but each queued EVALSHA first costs a COMMAND GETKEYS round trip to the default node (30
    queued: 30 extra reads there), because the pipeline asks the server for the keys of commands
    with movable keys; a policy resolver that names evalsha DEFAULT_KEYED avoids it, but
    ``pipeline()`` does not hand the client's ``policy_resolver`` on (only the private
    ``pipe._policy_resolver`` takes it). A missing script comes back as NoScriptError per
    command (no reload): load scripts up front with ``client.script_load(text)`` (all masters)
    and reload-and-retry on NoScriptError. Redis 6.2 replicates SCRIPT LOAD, so a promoted
    replica has the scripts; Redis 7 does not (Redis 7 docs).
    WAIT goes to the client's default node, not to the node that took the write: to wait for a
    replica, write and WAIT on one connection of the owning node (a plain client of that node).

Retries, redirections, failover
    ``retry=Retry(backoff, retries)`` sets the retry count (default 10);
    ``cluster_error_retry_attempts`` is deprecated (a DeprecationWarning, an error in this suite)
    and ignored when ``retry`` is given. Only the count is used: ordinary commands and pipelines
    retry at once, without backoff (transactions do use it; code). Retried, by exact type:
    ConnectionError, TimeoutError, ClusterDownError, SlotNotCoveredError; before each retry the
    client re-reads CLUSTER SLOTS from another node (ClusterDownError: after a 0.25 s sleep).
    MOVED (slot table patched; fully re-read every ``reinitialize_steps``, 5, MOVEDs), ASK (sent
    again after ASKING) and TRYAGAIN (code) are followed up to 16 times and never reach the
    caller.
    A master killed (SIGKILL; node timeout 2000 ms; one replica each): commands on its slots
    raise ``redis.exceptions.ConnectionError`` ("Connection refused") after about 40 ms (the ten
    immediate retries re-read a slot table that still names the dead master) for 3.3 to 3.8 s,
    until its replica is promoted; 30 retries give the same window, only slower failures
    (~120 ms each). Commands on the other masters: every node answers CLUSTERDOWN for about
    1.4 s between the failure verdict and the promotion; the retries absorb it (calls block up
    to ~1 s, then succeed); with 0 retries ClusterDownError surfaces. The same client recovers
    by itself: the first call after the promotion succeeds. A frozen master (SIGSTOP) gives
    TimeoutError after ``socket_timeout`` per attempt; the defaults are 5 s (connect and read),
    so one call may block about a minute with 10 retries; with ``socket_timeout=0.5`` a call
    blocked 4 s and then succeeded on the promoted replica. A TimeoutError may come after the
    server applied the command, so a retried script must be idempotent. For the crawl state:
    set ``socket_timeout`` explicitly and retry ``redis.RedisError`` subclasses
    ConnectionError/TimeoutError/ClusterDownError at its own level, with backoff, for longer
    than node timeout + 2 s.
"""

from __future__ import annotations

import itertools

import pytest
import redis
import redis.cluster
from redis.backoff import NoBackoff
from redis.exceptions import ClusterCrossSlotError, RedisClusterException
from redis.retry import Retry

from tests._clusternode import ClusterNodeProcess
from tests.rediscluster import HASH_SLOTS, LocalRedisCluster, cluster_client

SET_TWO = "redis.call('SET', KEYS[1], ARGV[1]) redis.call('SET', KEYS[2], ARGV[1]) return 2"


def keys_on_every_master(cluster: LocalRedisCluster, per_master: int
                         ) -> dict[ClusterNodeProcess, list[str]]:
    """``per_master`` keys owned by each master."""
    found: dict[ClusterNodeProcess, list[str]] = {node: [] for node in cluster.masters()}
    for index in itertools.count():
        key = f"page:{index}"
        owned = found[cluster.master_for_key(key)]
        if len(owned) < per_master:
            owned.append(key)
        if all(len(keys) == per_master for keys in found.values()):
            return found
    raise AssertionError("unreachable")


def test_cluster_forms_and_keys_land_on_every_master(
    redis_cluster: LocalRedisCluster, redis_cluster_url: str
) -> None:
    slots = redis_cluster.slot_map()
    assert sum(end - start + 1 for start, end, _, _ in slots) == HASH_SLOTS
    assert len(redis_cluster.masters()) == 3 and redis_cluster.replicas() == []
    for node in redis_cluster.masters():
        assert node.client().info("cluster")["cluster_enabled"] == 1
    client = cluster_client(redis_cluster_url)
    try:
        keys = [key for owned in keys_on_every_master(redis_cluster, 5).values() for key in owned]
        for key in keys:
            assert client.set(key, f"body of {key}")
        assert [client.get(key) for key in keys] == [f"body of {key}".encode() for key in keys]
        # Each key is stored on the master that the slot map names, and nowhere else.
        for node in redis_cluster.masters():
            stored = set(node.client().keys("*"))
            assert stored == {k.encode() for k in keys if redis_cluster.master_for_key(k) is node}
    finally:
        client.close()


def test_flush_empties_every_master(redis_cluster: LocalRedisCluster, redis_cluster_url: str
                                    ) -> None:
    with redis_cluster.client() as client:
        for owned in keys_on_every_master(redis_cluster, 2).values():
            client.set(owned[0], "x")
    assert all(node.client().dbsize() == 1 for node in redis_cluster.masters())
    redis_cluster.flush()
    assert all(node.client().dbsize() == 0 for node in redis_cluster.masters())


def test_script_runs_on_one_hash_tag_and_is_refused_across_slots(
    redis_cluster: LocalRedisCluster, redis_cluster_url: str
) -> None:
    with cluster_client(redis_cluster_url) as client:
        set_two = client.register_script(SET_TWO)
        assert set_two(keys=["{example.com}:queue", "{example.com}:seen"], args=["v"]) == 2
        owner = redis_cluster.master_for_key("{example.com}:queue").client()
        assert owner.mget("{example.com}:queue", "{example.com}:seen") == [b"v", b"v"]
        apart = ("host:a.example", "host:b.example")
        assert client.keyslot(apart[0]) != client.keyslot(apart[1])
        # The client refuses before sending; a node asked directly answers CROSSSLOT.
        with pytest.raises(RedisClusterException, match="same key slot"):
            set_two(keys=list(apart), args=["v"])
        with pytest.raises(ClusterCrossSlotError):
            redis_cluster.master_for_key(apart[0]).client().eval(SET_TWO, 2, *apart, "v")
        assert client.exists(*apart) == 0


def reads_processed(nodes: list[ClusterNodeProcess]) -> dict[int, int]:
    """Per node: how many socket reads of client queries it has processed so far."""
    return {node.port: node.client().info("stats")["total_reads_processed"] for node in nodes}


def test_pipeline_reaches_each_master_in_one_read(
    redis_cluster: LocalRedisCluster, redis_cluster_url: str
) -> None:
    with cluster_client(redis_cluster_url) as client:
        keys = [key for owned in keys_on_every_master(redis_cluster, 40).values() for key in owned]
        client.ping(target_nodes=redis.cluster.RedisCluster.PRIMARIES)  # connections made
        masters = redis_cluster.masters()
        before = reads_processed(masters)
        pipe = client.pipeline()
        for key in keys:
            pipe.incr(key)
        assert pipe.execute() == [1] * len(keys)
        after = reads_processed(masters)
    # 40 INCRs per master arrive in one read; the other read is the INFO asking.
    assert {port: after[port] - before[port] for port in after} == dict.fromkeys(after, 2)


def test_killed_master_fails_over_and_keeps_acknowledged_writes(
    redis_cluster_with_replicas: LocalRedisCluster,
) -> None:
    cluster = redis_cluster_with_replicas
    assert len(cluster.masters()) == 3 and len(cluster.replicas()) == 3
    owned = keys_on_every_master(cluster, 10)
    for master, keys in owned.items():
        # Write and WAIT on one connection of the owning master: WAIT counts that client's writes.
        pipe = master.client().pipeline(transaction=False)
        for key in keys:
            pipe.set(key, f"v:{key}")
        pipe.execute_command("WAIT", 1, 0)
        assert pipe.execute()[-1] == 1
    victim = cluster.masters()[0]
    heirs = {n.port for n in cluster.replicas() if n.master_port == victim.port}
    with cluster.client() as client, cluster.client(retry=Retry(NoBackoff(), 0)) as probe:
        assert probe.get(owned[victim][0]) == f"v:{owned[victim][0]}".encode()
        cluster.kill(victim)
        # No replica can take over before the node timeout: the dead master's slots fail now.
        with pytest.raises(redis.ConnectionError):
            probe.set(owned[victim][0], "lost")
        heir = cluster.wait_failover(victim)
        assert heir.port in heirs and heir in cluster.masters() and victim not in cluster.masters()
        # The same client finds the promoted replica by itself; every acknowledged write is there.
        for keys in owned.values():
            assert client.mget_nonatomic(keys) == [f"v:{key}".encode() for key in keys]
        assert all(cluster.master_for_key(key) is heir for key in owned[victim])
        assert client.set(owned[victim][0], "after")
