"""The crawl state's Redis client: a single server or a Redis Cluster, told apart by asking the
server, with every round trip counted.

:func:`connect` takes any node's URL. When the server says ``cluster_enabled:1`` the client is
redis-py's :class:`redis.cluster.RedisCluster` (it routes each command by its keys' slot and
follows MOVED/ASK); otherwise a plain :class:`redis.Redis`. Either way commands time out after
``socket_timeout`` and are retried a few times on connection errors (a blip, a failover), never
on timeouts: a server that does not answer is the crawl's to wait out or give up on, within its
own limit (``WEBCRAWL_REDIS_OUTAGE_SECONDS``), and nested retries would block for many timeouts.
Every script that must not run twice carries an operation id (:mod:`webcrawl.state.scripts`), so
the crawl's own resend after a timeout that hid a success has no second effect.

Round trips: every packet of commands sent (one command, or one pipeline to one node) adds one
to :attr:`RoundTrips.count` of the client, which the crawl publishes as a stat.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

__all__ = ["RedisUnavailable", "RoundTrips", "connect", "describe", "is_cluster"]

logger = logging.getLogger(__name__)

SOCKET_TIMEOUT_SECONDS = 5.0


class RedisUnavailable(RuntimeError):
    """The crawl's Redis did not answer."""


class RoundTrips:
    """A counter shared by the connections of one client, from any thread (the write batch
    sends from a thread of its own)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.count += 1


def _counting(base: type, counter: RoundTrips) -> type:
    class CountingConnection(base):  # type: ignore[misc, valid-type]
        counts = True

        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            counter.add()
            super().send_packed_command(command, check_health)

    CountingConnection.__name__ = f"Counting{base.__name__}"
    return CountingConnection


def describe(url: str | None) -> str:
    return url if url else "the embedded redis-server"


def _retry() -> Retry:
    # A short retry rides out a blip or a failover; past it the crawl stops (see the scheduler).
    # Connection errors only: redis-py's default list also retries timeouts.
    return Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=3,
                 supported_errors=(redis.ConnectionError,))


def _cluster_client(url: str, counter: RoundTrips, options: dict[str, Any]) -> Any:
    """A RedisCluster for ``url`` (any node), built from host and port: the node pools that
    ``RedisCluster.from_url`` makes are not closed by ``close()``. Its pipelines route EVALSHA
    by the keys they name, without asking a server for them (see :class:`_Policies`)."""
    from redis.cluster import RedisCluster
    from redis.connection import parse_url

    parsed = parse_url(url)
    if "path" in parsed:
        raise RedisUnavailable(f"a Redis Cluster is reached over TCP (redis://host:port), not {url}")
    parsed.pop("db", None)  # a cluster has only database 0, and refuses the keyword

    class CrawlCluster(RedisCluster):  # type: ignore[misc]
        def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
            pipe = super().pipeline(transaction, shard_hint)
            pipe._policy_resolver = _Policies(pipe._policy_resolver)
            return pipe

    client = CrawlCluster(**parsed, **options)
    client.round_trips = counter
    count_round_trips(client)
    return client


def count_round_trips(client: Any) -> None:
    """Make every node connection of a cluster client count its round trips (nodes appear when
    the cluster's topology is read again: call it after that, e.g. once a tick)."""
    counter = getattr(client, "round_trips", None)
    manager = getattr(client, "nodes_manager", None)
    if counter is None or manager is None:
        return
    for node in list(manager.nodes_cache.values()):
        pool = node.redis_connection.connection_pool if node.redis_connection else None
        if pool is not None and not getattr(pool.connection_class, "counts", False):
            pool.connection_class = _counting(pool.connection_class, counter)


class _Policies:
    """A cluster pipeline's command policies, with EVALSHA and EVAL known to be keyed: redis-py
    would otherwise ask a server (COMMAND GETKEYS) for the keys of each script call it queues, a
    round trip per call, though it reads them off the arguments itself when it routes them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def resolve(self, name: str) -> Any:
        if name in ("evalsha", "eval"):
            from redis.commands.policies import CommandPolicies, RequestPolicy, ResponsePolicy

            return CommandPolicies(request_policy=RequestPolicy.DEFAULT_KEYED,
                                   response_policy=ResponsePolicy.DEFAULT_KEYED)
        return self.inner.resolve(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def is_cluster(url: str) -> bool:
    """Whether the server at ``url`` is a Redis Cluster node."""
    probe = redis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT_SECONDS,
                                 socket_connect_timeout=SOCKET_TIMEOUT_SECONDS, retry=None,
                                 driver_info=None)
    try:
        return bool(probe.info("cluster").get("cluster_enabled"))
    finally:
        probe.close()


def connect(url: str, *, socket_timeout: float = SOCKET_TIMEOUT_SECONDS, check: bool = True,
            retries: bool = True) -> tuple[Any, RoundTrips, bool]:
    """``(client, round-trip counter, is cluster)`` for ``url``; fails with a one-line
    :class:`RedisUnavailable` if nothing answers. The first command (INFO cluster) tells a
    cluster node from a single server and checks the server answers, in one round trip; a
    cluster gets a cluster client instead. Connections skip CLIENT SETINFO (two round trips
    each, which Redis 6 refuses anyway). ``check`` is kept for callers: the server is always
    asked."""
    counter = RoundTrips()
    options: dict[str, Any] = dict(socket_timeout=socket_timeout,
                                   socket_connect_timeout=socket_timeout, driver_info=None)
    if retries:
        options.update(retry=_retry(), retry_on_error=[redis.ConnectionError])
    client: Any = redis.Redis.from_url(url, health_check_interval=30, **options)
    pool = client.connection_pool
    pool.connection_class = _counting(pool.connection_class, counter)
    try:
        cluster = bool(client.info("cluster").get("cluster_enabled"))
    except redis.RedisError as exc:
        client.close()
        raise RedisUnavailable(
            f"Redis at {url} does not answer ({exc}); check WEBCRAWL_REDIS_URL, or unset it to use "
            "the embedded redis-server") from None
    if cluster:
        client.close()
        client = _cluster_client(url, counter, options)
    return client, counter, cluster


class Handle:
    """A client with what started it: the embedded server, if one (one-shot commands)."""

    def __init__(self, client: Any, embedded: Any, url: str, cluster: bool) -> None:
        self.client = client
        self.embedded = embedded
        self.url = url
        self.cluster = cluster


def open_handle(url: str | None, data_dir: Any) -> Handle:
    """Connect to ``url``, or start (or join) the embedded server under ``data_dir``."""
    from webcrawl.state.embedded import EmbeddedRedis

    if url:
        client, _, cluster = connect(url)
        return Handle(client, None, url, cluster)
    embedded = EmbeddedRedis(data_dir)
    client, _, cluster = connect(embedded.start())
    return Handle(client, embedded, embedded.url, cluster)
