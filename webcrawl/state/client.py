"""The crawl state's Redis client: a single server or a Redis Cluster, told apart by asking the
server, with every round trip counted.

:func:`connect` takes any node's URL. When the server says ``cluster_enabled:1`` the client is
redis-py's :class:`redis.cluster.RedisCluster` (it routes each command by its keys' slot and
follows MOVED/ASK); otherwise a plain :class:`redis.Redis`. Either way commands time out after
``socket_timeout`` and are retried a few times on connection errors and timeouts: every script
that must not run twice carries an operation id (:mod:`webcrawl.state.scripts`), so a retry
after a timeout that hid a success has no second effect.

Round trips: every packet of commands sent (one command, or one pipeline to one node) adds one
to :attr:`RoundTrips.count` of the client, which the crawl publishes as a stat.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

__all__ = ["RedisUnavailable", "RoundTrips", "connect", "describe", "is_cluster"]

logger = logging.getLogger(__name__)

SOCKET_TIMEOUT_SECONDS = 10.0


class RedisUnavailable(RuntimeError):
    """The crawl's Redis did not answer."""


class RoundTrips:
    """A counter shared by the connections of one client."""

    def __init__(self) -> None:
        self.count = 0


def _counting(base: type, counter: RoundTrips) -> type:
    class CountingConnection(base):  # type: ignore[misc, valid-type]
        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            counter.count += 1
            super().send_packed_command(command, check_health)

    CountingConnection.__name__ = f"Counting{base.__name__}"
    return CountingConnection


def describe(url: str | None) -> str:
    return url if url else "the embedded redis-server"


def _retry() -> Retry:
    # A short retry rides out a blip or a failover; past it the crawl stops (see the scheduler).
    return Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=3)


def is_cluster(url: str) -> bool:
    """Whether the server at ``url`` is a Redis Cluster node."""
    probe = redis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT_SECONDS,
                                 socket_connect_timeout=SOCKET_TIMEOUT_SECONDS)
    try:
        return bool(probe.info("cluster").get("cluster_enabled"))
    finally:
        probe.close()


def connect(url: str, *, socket_timeout: float = SOCKET_TIMEOUT_SECONDS, check: bool = True,
            retries: bool = True) -> tuple[Any, RoundTrips, bool]:
    """``(client, round-trip counter, is cluster)`` for ``url``; with ``check``, fail now with a
    one-line :class:`RedisUnavailable` if nothing answers."""
    counter = RoundTrips()
    try:
        cluster = is_cluster(url)
    except redis.RedisError as exc:
        raise RedisUnavailable(
            f"Redis at {url} does not answer ({exc}); check WEBCRAWL_REDIS_URL, or unset it to use "
            "the embedded redis-server") from None
    options: dict[str, Any] = dict(socket_timeout=socket_timeout,
                                   socket_connect_timeout=socket_timeout)
    if retries:
        options.update(retry=_retry(), retry_on_error=[redis.ConnectionError, redis.TimeoutError])
    if cluster:
        from redis.cluster import RedisCluster

        client: Any = RedisCluster.from_url(
            url, connection_class=_counting(redis.Connection, counter), **options)
    else:
        client = redis.Redis.from_url(url, health_check_interval=30, **options)
        pool = client.connection_pool
        pool.connection_class = _counting(pool.connection_class, counter)
    if check:
        try:
            client.ping()
        except redis.RedisError as exc:
            raise RedisUnavailable(
                f"Redis at {url} does not answer ({exc}); check WEBCRAWL_REDIS_URL, or unset it "
                "to use the embedded redis-server") from None
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
