"""What a crawl holds, shard by shard, for ``scrapy crawlstate`` (read-only): queued requests,
revisits, leases, known pages, and the seen-filter slice (URLs taken in, capacity, generations, the
chance it takes a new URL for a seen one at its fill)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from webcrawl.state.seen import BloomParams, params_from_meta

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout

__all__ = ["ShardFigures", "server_time", "shard_figures"]


@dataclass
class ShardFigures:
    index: int
    queued: int
    revisits: int
    leased: int
    pages: int
    seen: int
    hosts_queued: int
    ready_now: int
    refused: int = 0  #: refused URLs noted for another try (:mod:`webcrawl.state.refused`)
    #: (requests queued, host, when its next turn comes) of the hosts with queued requests
    frontiers: list[tuple[int, str, float]] = field(default_factory=list)
    #: the seen-filter slice: URLs its first generation holds (0: not recorded), and the
    #: generations it has grown to (webcrawl.state.seen)
    seen_capacity: int = 0
    seen_generations: int = 1
    #: the bound on its false positives (of the layout before: the rate of a full generation)
    seen_error_rate: float = 0.0
    #: its sizes as recorded (None: not recorded)
    seen_params: BloomParams | None = None

    @property
    def seen_false_positive_rate(self) -> float | None:
        """The chance the slice takes a new URL for a seen one at its current fill (None: its
        size is not recorded yet)."""
        if self.seen_params is None:
            return None
        return self.seen_params.false_positive_rate_at(self.seen)


def server_time(client: Any) -> float:
    seconds, micros = client.time()
    return seconds + micros / 1e6


def shard_figures(client: Any, layout: CrawlLayout, now: float) -> list[ShardFigures]:
    out = []
    for shard in layout.all_shards:
        pipe = client.pipeline(transaction=False)
        pipe.get(shard.queued)
        pipe.zcard(shard.due)
        pipe.zcard(shard.leases)
        pipe.hlen(shard.pages)
        pipe.hmget(shard.seen_meta, "count", "capacity", "generations", "error_rate", "growth",
                   "tightening")
        pipe.zrange(shard.ready_new, 0, -1, withscores=True)
        pipe.zrange(shard.ready_due, 0, -1, withscores=True)
        pipe.hlen(shard.refused)
        (queued, due, leased, pages, (seen, capacity, generations, rate, growth, tightening),
         new, ready_due, refused) = pipe.execute()
        figures = ShardFigures(shard.index, int(queued or 0), int(due), int(leased), int(pages),
                               int(seen or 0), len(new),
                               sum(1 for _, t in [*new, *ready_due] if t <= now),
                               refused=int(refused),
                               seen_capacity=int(capacity or 0),
                               seen_generations=int(generations or 1),
                               seen_error_rate=float(rate or 0),
                               seen_params=params_from_meta(*(
                                   v.decode() if isinstance(v, bytes) else v
                                   for v in (capacity, rate, growth, tightening))))
        for host, at in new:
            name = host.decode() if isinstance(host, bytes) else host
            count = int(client.zlexcount(shard.frontier, f"[{name}\0", f"({name}\1"))
            figures.frontiers.append((count, name, float(at)))
        out.append(figures)
    return out
