"""One Redis client per crawler process: the server named by ``WEBCRAWL_REDIS_URL``, or the
embedded one (see :mod:`webcrawl.state.embedded`).

Every webcrawl component of a crawler shares the client returned by :func:`redis_for`, so a process
holds one connection. Errors name the URL, so a user knows which server did not answer.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
from scrapy import signals

from webcrawl.state.embedded import EmbeddedRedis

if TYPE_CHECKING:
    from pathlib import Path

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

SOCKET_TIMEOUT_SECONDS = 10.0


class RedisUnavailable(RuntimeError):
    """The crawl's Redis did not answer."""


def describe(url: str | None) -> str:
    return url if url else "the embedded redis-server"


def connect(url: str, *, check: bool = True) -> redis.Redis:
    """A client for ``url``; with ``check``, fail now with a clear error if nothing answers."""
    client = redis.Redis.from_url(
        url,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
        # A short retry rides out a restart of the server; past it the crawl stops (see scheduler).
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=3),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
        health_check_interval=30,
    )
    if check:
        try:
            client.ping()
        except redis.RedisError as exc:
            raise RedisUnavailable(
                f"Redis at {url} does not answer ({exc}); check WEBCRAWL_REDIS_URL, or unset it to "
                "use the embedded redis-server"
            ) from exc
    return client


class _Handle:
    def __init__(self, client: redis.Redis, embedded: EmbeddedRedis | None, url: str) -> None:
        self.client = client
        self.embedded = embedded
        self.url = url


_handles: weakref.WeakKeyDictionary[Crawler, _Handle] = weakref.WeakKeyDictionary()


def open_handle(url: str | None, data_dir: Path) -> _Handle:
    if url:
        return _Handle(connect(url), None, url)
    embedded = EmbeddedRedis(data_dir)
    return _Handle(connect(embedded.start()), embedded, embedded.url)


def redis_for(crawler: Crawler, url: str | None, data_dir: Path, *, shutdown_embedded: bool = True
              ) -> redis.Redis:
    """The crawler's shared client, connecting (or starting the embedded server) on first use."""
    handle = _handles.get(crawler)
    if handle is None:
        handle = open_handle(url, data_dir)
        _handles[crawler] = handle

        def release() -> None:
            _handles.pop(crawler, None)
            if handle.embedded is not None and shutdown_embedded:
                handle.embedded.release(handle.client)
            handle.client.close()

        # Last receiver to run: every component has closed by then.
        crawler.signals.connect(release, signal=signals.engine_stopped, weak=False)
    return handle.client


def url_for(crawler: Crawler) -> str | None:
    handle = _handles.get(crawler)
    return handle.url if handle else None
