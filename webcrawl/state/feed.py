"""URLs pushed to a running crawl through Redis, the way scrapy-redis's ``RedisSpider`` takes them.

A feeder pushes to the key ``<spider>:start_urls`` (scrapy-redis's ``REDIS_START_URLS_KEY``,
``%(name)s`` standing for the spider's name) on the crawl's Redis: a list by default
(``LPUSH``/``RPUSH``; read from its head, as scrapy-redis reads it), a set with
``REDIS_START_URLS_AS_SET`` (``SADD``), a sorted set with ``REDIS_START_URLS_AS_ZSET`` (``ZADD``,
highest score first). Each entry is a plain URL, or JSON ``{"url": ..., "meta": {...}}`` with
optional ``method`` and any other keys as form data, as scrapy-redis reads them. The ``meta``
read here is the feeder's, untrusted: the spiders keep only the keys of their allowlist
(:mod:`webcrawl.spiders._feed`).

:class:`StartUrlsFeed` takes entries off the key atomically (one command: two processes never take
the same entry); :func:`parse_entry` reads one. Nothing here knows Scrapy: the spiders turn
entries into requests (:mod:`webcrawl.spiders._feed`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["DEFAULT_KEY", "FeedEntry", "FeedError", "StartUrlsFeed", "feed_key", "parse_entry"]

DEFAULT_KEY = "%(name)s:start_urls"  #: scrapy-redis's default ``REDIS_START_URLS_KEY``
Kind = Literal["list", "set", "zset"]
MAX_ENTRY_BYTES = 64 * 1024


class FeedError(ValueError):
    """An entry that is no request: why, in a few words."""


@dataclass(frozen=True)
class FeedEntry:
    """One pushed request: its URL, HTTP method, the ``meta`` the feeder gave and form data."""

    url: str
    method: str = "GET"
    meta: dict[str, Any] = field(default_factory=dict)
    formdata: dict[str, str] = field(default_factory=dict)


def feed_key(template: str, spider_name: str) -> str:
    """The key a spider reads: ``template`` with ``%(name)s`` filled in (scrapy-redis's rule)."""
    key = template % {"name": spider_name}
    if not key.strip():
        raise ValueError(f"REDIS_START_URLS_KEY={template!r}: the feed key is empty")
    return key


def parse_entry(data: bytes | str, encoding: str = "utf-8") -> FeedEntry:
    """Read one pushed entry; :class:`FeedError` says why it is not a request."""
    if isinstance(data, bytes):
        if len(data) > MAX_ENTRY_BYTES:
            raise FeedError(f"entry of {len(data)} bytes (at most {MAX_ENTRY_BYTES})")
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise FeedError(f"not {encoding} text") from None
    else:
        text = data
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            raise FeedError("a JSON object that does not parse") from None
        if not isinstance(value, dict):
            raise FeedError("JSON that is not an object")
        url = value.pop("url", None)
        method = value.pop("method", "GET")
        meta = value.pop("meta", {})
        if not isinstance(meta, dict):
            raise FeedError("'meta' that is not an object")
        if not isinstance(method, str) or method.upper() not in ("GET", "POST", "HEAD"):
            raise FeedError(f"method {method!r}")
        formdata = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
        return FeedEntry(_url(url), method.upper(), meta, formdata)
    return FeedEntry(_url(text))


def _url(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise FeedError("no 'url'")
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or any(c.isspace() for c in value):
        raise FeedError(f"{value[:80]!r} is not an absolute http(s) URL")
    return value


class StartUrlsFeed:
    """Entries waiting under one key (see the module docstring)."""

    def __init__(self, client: Any, key: str, kind: Kind = "list") -> None:
        if kind not in ("list", "set", "zset"):
            raise ValueError(f"feed kind {kind!r}: expected list, set or zset")
        self.client = client
        self.key = key
        self.kind = kind

    def take(self, count: int) -> list[bytes]:
        """Up to ``count`` entries, removed from the key in one atomic command."""
        if count <= 0:
            return []
        if self.kind == "list":
            taken = self.client.lpop(self.key, count)
        elif self.kind == "set":
            taken = self.client.spop(self.key, count)
        else:
            taken = [member for member, _ in self.client.zpopmax(self.key, count)]
        return list(taken or [])

    def waiting(self) -> int:
        """Entries waiting under the key."""
        if self.kind == "list":
            return int(self.client.llen(self.key))
        if self.kind == "set":
            return int(self.client.scard(self.key))
        return int(self.client.zcard(self.key))
