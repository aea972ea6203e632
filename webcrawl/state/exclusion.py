"""The exclusion list: hosts whose owners asked to be left alone, shared by every crawl on the
server (``webcrawl:excluded``, a set, with a change counter ``webcrawl:excluded:events``).

Each crawl mirrors the list into every shard (``excluded`` with ``excluded:version``) so its push
and pop scripts can refuse excluded hosts atomically; a running crawl brings its mirrors up to
date within a tick of a change (:func:`sync`), dropping the queued work of newly excluded hosts.
:func:`exclude` also updates every crawl it finds on the server at once, so ``scrapy crawlstate``
shows their queues dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webcrawl.state.layout import EXCLUDED, EXCLUDED_EVENTS, GLOBAL_PREFIX, CrawlLayout

if TYPE_CHECKING:
    from webcrawl.state.queue import CrawlQueue

__all__ = ["exclude", "excluded", "known_crawls", "normalise", "sync", "unexclude", "version"]


def normalise(domain: str) -> str:
    host = domain.strip().lower().rstrip(".")
    if not host or "/" in host or " " in host:
        raise ValueError(f"{domain!r} is not a host name: expected e.g. www.example.org")
    return host


def version(client: Any) -> int:
    return int(client.get(EXCLUDED_EVENTS) or 0)


def excluded(client: Any) -> list[str]:
    return sorted(d.decode() if isinstance(d, bytes) else d for d in client.smembers(EXCLUDED))


def sync(client: Any, queue: CrawlQueue, seen_version: int) -> tuple[int, int]:
    """Mirror the list into the crawl's shards if it changed since ``seen_version``; returns the
    version now mirrored and the queued requests dropped."""
    current = version(client)
    if current <= seen_version:
        return seen_version, 0
    return current, queue.sync_exclusions(current, excluded(client))


def known_crawls(client: Any) -> list[CrawlLayout]:
    """Every crawl whose state is on this server (from their ``meta`` hashes)."""
    found = []
    nodes = client.get_primaries() if hasattr(client, "get_primaries") else [None]
    for node in nodes:
        kwargs = {"target_nodes": node} if node is not None else {}
        for key in client.scan_iter(match=GLOBAL_PREFIX + "{*}:meta", count=1000, **kwargs):
            name = key.decode()[len(GLOBAL_PREFIX) + 1:-len("}:meta")]
            shards = int(client.hget(key, "shards") or 1)
            try:
                found.append(CrawlLayout(name, shards))
            except ValueError:
                continue
    return found


def exclude(client: Any, domain: str, queues: list[CrawlQueue] | None = None) -> int:
    """Put ``domain`` on the list; returns how many queued requests were dropped in the crawls
    ``queues`` (every crawl's shards are brought up to date by their own processes otherwise)."""
    host = normalise(domain)
    client.sadd(EXCLUDED, host)
    new = int(client.incr(EXCLUDED_EVENTS))
    return sum(q.sync_exclusions(new, excluded(client)) for q in queues or [])


def unexclude(client: Any, domain: str, queues: list[CrawlQueue] | None = None) -> bool:
    host = normalise(domain)
    removed = bool(client.srem(EXCLUDED, host))
    new = int(client.incr(EXCLUDED_EVENTS))
    for q in queues or []:
        q.sync_exclusions(new, excluded(client))
    return removed
