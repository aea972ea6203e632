"""What clearing a crawl deletes, in one place: the queue, or everything.

``scrapy crawlstate <crawl> --queue`` clears the *queue*: every shard's frontier (queued requests)
and their counters, the ready queues of hosts and the leases of in-flight requests. Revisits stay
scheduled, and so do the seen filter (with its notes of refused URLs to retry), the page records,
the learned statistics and the cycles:
the crawl goes on knowing what it knows; URLs it has already met are not queued again.

``scrapy crawlstate <crawl> --clear`` deletes *everything*: the crawl's own slot (cycles, ledger,
spend bucket, allocation, page types) and every shard (queue, revisits, seen filter, page records,
the typed pages' latest records and the change events: the bodies on disk stay, and ``scrapy
body`` still reads them; hosts' delays, health, trust and robots.txt answers).

The functions take a Redis client and the crawl's :class:`~webcrawl.state.layout.CrawlLayout`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from webcrawl.state.layout import GLOBAL_PREFIX, CrawlLayout

__all__ = ["Group", "Plan", "clear_crawl", "clear_everything", "clear_queue", "crawl_has_keys",
           "everything", "known_crawls", "layout_of", "queue"]

_BATCH = 1000
_CRAWL_TAG = re.compile(rb"^webcrawl:\{([^}:]+)(?::\d+)?\}:")


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


def _scan(client: Any, pattern: str) -> Iterator[bytes]:
    if hasattr(client, "get_primaries"):  # a cluster: every primary holds some keys
        for node in client.get_primaries():
            yield from client.scan_iter(match=pattern, count=_BATCH, target_nodes=node)
    else:
        yield from client.scan_iter(match=pattern, count=_BATCH)


def _glob(text: str) -> str:
    return re.sub(r"([\[\]*?\\])", r"\\\1", text)


def layout_of(client: Any, crawl: str) -> CrawlLayout:
    """The crawl's layout as its ``meta`` hash records it (1 shard when there is none)."""
    layout = CrawlLayout(crawl)
    return CrawlLayout(crawl, int(client.hget(layout.meta, "shards") or 1))


def crawl_has_keys(client: Any, layout: CrawlLayout) -> bool:
    """Whether Redis holds any key of the crawl."""
    return any(next(iter(_scan(client, p)), None) is not None for p in layout.patterns)


def known_crawls(client: Any, limit: int = 200_000) -> list[str]:
    """Names of the crawls with keys on this server (looking at most at ``limit`` keys)."""
    names: set[str] = set()
    for n, key in enumerate(_scan(client, _glob(GLOBAL_PREFIX) + "{*}:*")):
        if n >= limit:
            break
        match = _CRAWL_TAG.match(key)
        if match:
            names.add(match.group(1).decode(errors="replace"))
    return sorted(names)


def _sum(client: Any, layout: CrawlLayout, command: str, name: str) -> int:
    pipe = client.pipeline(transaction=False)
    for shard in layout.all_shards:
        getattr(pipe, command)(getattr(shard, name))
    return sum(int(v or 0) for v in pipe.execute())


def _seen(client: Any, layout: CrawlLayout) -> int:
    pipe = client.pipeline(transaction=False)
    for shard in layout.all_shards:
        pipe.hget(shard.seen_meta, "count")
    return sum(int(v or 0) for v in pipe.execute())


_QUEUE = ("frontier", "queued", "ready_new", "leases", "leased")


def queue(client: Any, layout: CrawlLayout) -> Plan:
    """What :func:`clear_queue` deletes, with counts."""
    groups = [
        Group("frontiers", _sum(client, layout, "get", "queued"), "queued requests"),
        Group("ready hosts", _sum(client, layout, "zcard", "ready_new"), "hosts with queued requests"),
        Group("leases", _sum(client, layout, "zcard", "leases"), "in-flight requests"),
    ]
    return Plan(groups, len(_QUEUE) * layout.shards)


def everything(client: Any, layout: CrawlLayout) -> Plan:
    """What :func:`clear_everything` deletes, with counts."""
    keys = sum(1 for p in layout.patterns for _ in _scan(client, p))
    groups = [*queue(client, layout).groups,
              Group("revisits", _sum(client, layout, "zcard", "due"), "known pages scheduled"),
              Group("page records", _sum(client, layout, "hlen", "pages"), "pages"),
              Group("latest records", _sum(client, layout, "hlen", "records"),
                    "typed pages' latest records (the bodies on disk stay)"),
              Group("change events", _sum(client, layout, "xlen", "events"),
                    "kept change events (a consumer that has not read them loses them)"),
              Group("seen filter", _seen(client, layout), "URLs met so far"),
              Group("refused", _sum(client, layout, "hlen", "refused"),
                    "refused URLs noted for another try"),
              Group("cycles", int(client.zcard(layout.key("cycles"))),
                    "cycles (ledgers and figures: the report's history)")]
    return Plan(groups, keys)


def _unlink(client: Any, names: Iterable[bytes | str]) -> int:
    deleted = 0
    for name in names:  # one by one: on a cluster the keys live in many slots
        deleted += int(client.unlink(name))
    return deleted


def clear_queue(client: Any, layout: CrawlLayout) -> int:
    """Delete the queue (see the module docstring); returns the number of keys deleted. The
    revisits' ready entries are rebuilt by the next pop and push of each host."""
    names = [getattr(shard, n) for shard in layout.all_shards for n in _QUEUE]
    return _unlink(client, names)


def clear_everything(client: Any, layout: CrawlLayout) -> int:
    """Delete every key of the crawl; returns how many."""
    return sum(_unlink(client, list(_scan(client, p))) for p in layout.patterns)


clear_crawl = clear_everything
