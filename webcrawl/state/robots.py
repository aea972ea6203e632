"""robots.txt answers in Redis: one hash per origin, with a Redis expiry, under the key the crawl
gives (the host's shard, :meth:`webcrawl.state.layout.ShardKeys.robots`). The policy and the
in-process cache in front are :mod:`webcrawl.robots.cache`'s."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["ROBOTS_PREFIX", "RobotsStore", "robots_key"]

ROBOTS_PREFIX = "webcrawl:robots:"


def robots_key(origin: str) -> str:
    """A stand-alone key of an origin's answer (``origin`` is ``scheme://host:port``), for a cache
    used outside a crawl."""
    return ROBOTS_PREFIX + origin


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class RobotsStore:
    """Get, put and forget the stored answer of an origin (raises the state's errors)."""

    def __init__(self, client: Any, key_for: Callable[[str], str] = robots_key) -> None:
        self.client = client
        self.key_for = key_for

    def get(self, origin: str) -> dict[str, str] | None:
        raw = self.client.hgetall(self.key_for(origin))
        return {_text(k): _text(v) for k, v in raw.items()} if raw else None

    def put(self, origin: str, fields: dict[str, str], ttl_seconds: float) -> None:
        key = self.key_for(origin)
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(key)
        pipe.hset(key, mapping=fields)
        pipe.pexpire(key, max(1, math.ceil(ttl_seconds * 1000)))
        pipe.execute()

    def delete(self, origin: str) -> None:
        self.client.delete(self.key_for(origin))
