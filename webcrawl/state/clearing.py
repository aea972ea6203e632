"""What clearing a crawl deletes, in one place: the queue, or everything.

``scrapy crawlstate <crawl> --queue`` clears the *queue*: the frontiers (and their size counter),
the ready queue of hosts, the leases of in-flight requests and the requests deferred to the next
cycle. The seen filter, the page histories, the learned statistics and the cycles stay, so
the crawl goes on knowing what it knows; URLs it has already met are not queued again.

``scrapy crawlstate <crawl> --clear`` deletes *everything* under the crawl's prefix: the queue,
the seen filter, the page histories (with their pointers into the body store; the bodies on disk
stay, and ``scrapy body`` still reads them), the learned statistics and every cycle's ledger (the
report's history).

The functions take a Redis client and the crawl's :class:`~webcrawl.state.keys.CrawlKeys`; the
key names and their meanings are those :mod:`webcrawl.state.keys` documents. When that layout
changes, this module is the one the commands rely on to change with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from webcrawl.state.keys import GLOBAL_PREFIX

if TYPE_CHECKING:
    import redis

    from webcrawl.state.keys import CrawlKeys

__all__ = ["Group", "Plan", "clear_everything", "clear_queue", "crawl_has_keys", "everything",
           "known_crawls", "queue"]

_BATCH = 1000
_CRAWL_TAG = re.compile(rb"^webcrawl:\{([^}]+)\}:")


@dataclass(frozen=True)
class Group:
    """One kind of state a clear deletes: its name, how much it holds and in what unit."""

    name: str
    count: int
    unit: str

    def line(self) -> str:
        return f"{self.name + ':':<22}{self.count:>9} {self.unit}"


@dataclass(frozen=True)
class Plan:
    """What a clear would delete: the groups, and how many Redis keys that is."""

    groups: list[Group]
    keys: int


def _scan(client: redis.Redis, pattern: str) -> Iterator[bytes]:
    return client.scan_iter(match=pattern, count=_BATCH)


def _glob(text: str) -> str:
    """``text`` with SCAN's pattern characters escaped."""
    return re.sub(r"([\[\]*?\\])", r"\\\1", text)


def _int(value: object) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


def crawl_has_keys(client: redis.Redis, keys: CrawlKeys) -> bool:
    """Whether Redis holds any key of the crawl."""
    return next(iter(_scan(client, keys.pattern)), None) is not None


def known_crawls(client: redis.Redis, limit: int = 200_000) -> list[str]:
    """Names of the crawls with keys on this server (looking at most at ``limit`` keys)."""
    names: set[str] = set()
    for n, key in enumerate(_scan(client, _glob(GLOBAL_PREFIX) + "{*}:*")):
        if n >= limit:
            break
        match = _CRAWL_TAG.match(key)
        if match:
            names.add(match.group(1).decode(errors="replace"))
    return sorted(names)


def _frontier_keys(client: redis.Redis, keys: CrawlKeys) -> list[bytes]:
    return list(_scan(client, _glob(keys.frontier_prefix) + "*"))


def _queue_keys(keys: CrawlKeys) -> list[str]:
    """The queue's keys besides the frontiers."""
    return [keys.queued, keys.ready, keys.leases, keys.leased, keys.deferred]


def queue(client: redis.Redis, keys: CrawlKeys) -> Plan:
    """What :func:`clear_queue` deletes, with counts."""
    frontiers = _frontier_keys(client, keys)
    groups = [
        Group("frontiers", _int(client.get(keys.queued)),
              f"queued requests in {len(frontiers)} frontiers"),
        Group("ready hosts", int(client.zcard(keys.ready)), "hosts with queued requests"),
        Group("leases", int(client.zcard(keys.leases)), "in-flight requests"),
        Group("deferred requests", int(client.llen(keys.deferred)), "waiting for the next cycle"),
    ]
    return Plan(groups, len(frontiers) + int(client.exists(*_queue_keys(keys))))


def _kind(suffix: str) -> str:
    """Which group of :func:`everything` a key belongs to, by its name after the prefix."""
    if suffix.startswith("frontier:") or suffix in ("queued", "seq", "ready", "next", "leases",
                                                    "leased", "deferred", "evicted"):
        return "queue"
    if suffix in ("seen", "seen:meta"):
        return "seen"
    if suffix.startswith("page:"):
        return "histories"
    if suffix in ("cycle", "cycles", "planner:lock") or suffix.startswith(("cycle:", "freshness:")):
        return "cycles"
    return "learned"  # page index, costs, health, trust, listings, sitemaps, delays, counters


def everything(client: redis.Redis, keys: CrawlKeys) -> Plan:
    """What :func:`clear_everything` deletes, with counts (one pass over the crawl's keys)."""
    by_kind: dict[str, int] = {}
    pages: list[bytes] = []
    prefix = len(keys.prefix.encode())
    for key in _scan(client, keys.pattern):
        kind = _kind(key[prefix:].decode(errors="replace"))
        by_kind[kind] = by_kind.get(kind, 0) + 1
        if kind == "histories":
            pages.append(key)
    with_body = 0
    for start in range(0, len(pages), _BATCH):
        pipe = client.pipeline(transaction=False)
        for key in pages[start:start + _BATCH]:
            pipe.hexists(key, "body")
        with_body += sum(1 for found in pipe.execute() if found)
    groups = [*queue(client, keys).groups,
              Group("seen filter", by_kind.get("seen", 0), "keys (every URL met so far)"),
              Group("page histories", len(pages), "pages"),
              Group("stored-body index", with_body,
                    "pointers to stored bodies (the bodies on disk stay)"),
              Group("learned statistics", by_kind.get("learned", 0),
                    "keys (costs, health, trust, page index, listings)"),
              Group("cycles", int(client.zcard(keys.prefix + "cycles")),
                    "cycles (ledgers and freshness: the report's history)")]
    return Plan(groups, sum(by_kind.values()))


def _unlink(client: redis.Redis, names: Iterable[bytes | str]) -> int:
    deleted, batch = 0, []
    for name in names:
        batch.append(name)
        if len(batch) >= _BATCH:
            deleted += int(client.unlink(*batch))
            batch.clear()
    if batch:
        deleted += int(client.unlink(*batch))
    return deleted


def clear_queue(client: redis.Redis, keys: CrawlKeys) -> int:
    """Delete the queue (see the module docstring); returns the number of keys deleted.

    Each queued host's next-allowed time moves from the ready queue to ``next``, where an
    idle host's time is kept, so a host is not fetched sooner than its delay allows."""
    times = client.zrange(keys.ready, 0, -1, withscores=True)
    if times:
        client.hset(keys.next, mapping={host: repr(at) for host, at in times})
    return _unlink(client, [*_frontier_keys(client, keys), *_queue_keys(keys)])


def clear_everything(client: redis.Redis, keys: CrawlKeys) -> int:
    """Delete every key of the crawl; returns how many."""
    return _unlink(client, _scan(client, keys.pattern))
