"""URLs the crawl refused to fetch, remembered so that they are not lost to the seen filter.

A URL is marked seen when it is queued (``lua2/push.lua``); whether it may be fetched is decided
later, when it is popped: the SSRF guard, robots.txt. A refused URL would stay seen for good,
and a later run (the network allowed, robots.txt reachable again) would never fetch it. So a
refusal is noted here, in the shard of the URL's host: the hash ``refused`` (key of
:class:`~webcrawl.state.layout.ShardKeys`) maps the URL's fingerprint (its seen-filter bit
offsets, ``"o1,o2,...,ok"``: what the push script has at hand) to ``reason\\turl\\ttime``. The push
script lets a seen URL whose fingerprint is there in again, once, and forgets the note: met again
(a seed at the next run's start, a link, a sitemap entry) it is queued and fetched if the reason
is gone, or refused and noted again. Notes survive restarts and hold for every process.

A request evicted from a host's full frontier (``WEBCRAWL_FRONTIER_CAP``) is noted the same way,
reason ``frontier:evicted``, by the push script itself: met again, it is queued again.

A shard keeps at most ``limit`` notes (``WEBCRAWL_REFUSED_LIMIT``); the zset ``refused:at`` orders
them by time and past the limit the oldest go, so the newest refusals are always kept (written once,
in ``lua2/refused.lua``). ``scrapy crawlstate`` shows the notes; clearing the queue keeps them,
clearing the crawl deletes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from webcrawl.state.layout import CrawlLayout
from webcrawl.state.scripts import ScriptSet

__all__ = ["DEFAULT_LIMIT", "Refusal", "RefusedStore", "fingerprint"]

DEFAULT_LIMIT = 100_000

def fingerprint(offsets: list[int]) -> str:
    """A URL's key in ``refused``: its seen-filter offsets, as the push script joins them."""
    return ",".join(str(o) for o in offsets)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


@dataclass(frozen=True)
class Refusal:
    """A noted refusal: why (``ssrf:<reason>``, ``robots:disallowed``, ``robots:unreachable``),
    the URL and when (seconds since the epoch)."""

    reason: str
    url: str
    at: float


class RefusedStore:
    """Notes of refused URLs, over every shard of a crawl (see the module docstring).

    ``offsets`` maps a canonical URL to its seen-filter offsets (the crawl's
    :meth:`~webcrawl.state.seen.BloomParams.offsets_function`): the same the scheduler pushes with.
    """

    def __init__(self, client: Any, scripts: ScriptSet, layout: CrawlLayout,
                 offsets: Callable[[str], list[int]], *, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 0:
            raise ValueError(f"WEBCRAWL_REFUSED_LIMIT={limit!r}: expected 0 or more")
        self.client = client
        self.layout = layout
        self.offsets = offsets
        self.limit = limit
        self.scripts = scripts

    def note(self, url: str, host: str, reason: str, at: float) -> None:
        """Remember that the canonical ``url`` (of ``host``) was refused for ``reason`` (past the
        shard's limit, its oldest note goes)."""
        value = f"{reason}\t{url}\t{at:.3f}"
        self.scripts.call("note", self.layout.shard(host),
                          [self.limit, repr(float(at)), fingerprint(self.offsets(url)), value])

    def counts(self) -> list[int]:
        """Notes per shard."""
        pipe = self.client.pipeline(transaction=False)
        for shard in self.layout.all_shards:
            pipe.hlen(shard.refused)
        return [int(n) for n in pipe.execute()]

    def entries(self, limit: int = 100) -> Iterator[Refusal]:
        """Up to ``limit`` notes, shard by shard (in no particular order)."""
        given = 0
        for shard in self.layout.all_shards:
            for _, raw in self.client.hscan_iter(shard.refused, count=max(limit, 10)):
                reason, url, at = (_text(raw).split("\t") + ["", "0"])[:3]
                yield Refusal(reason, url, float(at or 0))
                given += 1
                if given >= limit:
                    return
