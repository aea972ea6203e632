"""The crawl state's per-shard streams (change events, the check log), read by time or by consumers.

The land script appends to a Redis stream per shard (``events``, ``checks``; lua2/lifecycle.lua,
lua2/checks.lua). :class:`ShardStream` reads one kind across every shard:

- by time: :meth:`ShardStream.entries` merges the shards' streams in the order entries were
  recorded (their ids: the server's clock), from a time on;
- as a *consumer* that must apply each entry once (the database writer): a Redis consumer group
  per consumer name on every shard's stream. :meth:`ShardStream.read` hands out entries not yet
  delivered to the group (first those a dead member left unacknowledged for longer than
  ``claim_after`` seconds), :meth:`ShardStream.ack` marks them applied, :meth:`ShardStream.pending`
  gives back what a member held when it stopped. An entry handed out and never acknowledged is
  handed out again; the consumer applies it idempotently (by its id).

:meth:`ShardStream.lag` tells how far behind each group is; :meth:`ShardStream.trim_consumed`
deletes what every member of a group has acknowledged (for a stream kept only until consumed).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout

__all__ = ["Entry", "ShardStream", "entry_order", "entry_time"]


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def entry_time(entry_id: str) -> float:
    """When the entry was recorded (server time, seconds): its id's milliseconds."""
    return int(entry_id.split("-", 1)[0]) / 1000.0


def entry_order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


@dataclass(frozen=True)
class Entry:
    """One stream entry: its shard, its id and its fields (text)."""

    shard: int
    entry_id: str
    fields: dict[str, str]


class ShardStream:
    """The stream ``name`` (a key of :class:`~webcrawl.state.layout.ShardKeys`) of every shard."""

    def __init__(self, client: Any, layout: CrawlLayout, name: str) -> None:
        self.client = client
        self.layout = layout
        self.name = name

    def key(self, shard: int) -> str:
        return getattr(self.layout.all_shards[shard], self.name)

    @staticmethod
    def _entry(shard: int, entry_id: Any, fields: dict[Any, Any]) -> Entry:
        return Entry(shard, _text(entry_id), {_text(k): _text(v) for k, v in fields.items()})

    # -- by time ------------------------------------------------------------------------------

    def _range(self, shard: int, start: str, batch: int) -> Iterator[Entry]:
        key = self.key(shard)
        while True:
            entries = self.client.xrange(key, min=start, count=batch)
            for entry_id, fields in entries:
                yield self._entry(shard, entry_id, fields)
            if len(entries) < batch:
                return
            start = "(" + _text(entries[-1][0])

    def entries(self, recorded_since: float | None = None, batch: int = 1000) -> Iterator[Entry]:
        """Every kept entry recorded at or after ``recorded_since`` (server time; all when None),
        in the order they were recorded across shards."""
        start = "-" if recorded_since is None else str(max(int(recorded_since * 1000), 0))
        streams = [self._range(shard, start, batch) for shard in range(self.layout.shards)]
        return heapq.merge(*streams, key=lambda e: entry_order(e.entry_id))

    def oldest(self) -> float | None:
        """When the oldest kept entry was recorded, None when none is kept."""
        times = []
        for shard in range(self.layout.shards):
            first = self.client.xrange(self.key(shard), count=1)
            if first:
                times.append(entry_time(_text(first[0][0])))
        return min(times) if times else None

    def count(self) -> int:
        return sum(int(self.client.xlen(self.key(s))) for s in range(self.layout.shards))

    # -- consumers ------------------------------------------------------------------------------

    def join(self, group: str, *, from_start: bool = True) -> None:
        """Make ``group`` a consumer of every shard's stream (nothing when it is one already):
        from the oldest kept entry, or only of entries recorded from now on."""
        for shard in range(self.layout.shards):
            try:
                self.client.xgroup_create(self.key(shard), group, id="0" if from_start else "$",
                                          mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    def read(self, group: str, consumer: str, count: int = 500,
             claim_after: float = 60.0) -> list[Entry]:
        """Up to ``count`` entries for ``consumer`` of ``group``: first those handed out more than
        ``claim_after`` seconds ago and never acknowledged (a member that died), then new ones."""
        out: list[Entry] = []
        for shard in range(self.layout.shards):
            key = self.key(shard)
            room = count - len(out)
            if room <= 0:
                break
            reply = self.client.xautoclaim(key, group, consumer, int(claim_after * 1000),
                                           start_id="0-0", count=room)
            for entry_id, fields in reply[1]:
                if fields:  # trimmed while pending: nothing left to apply
                    out.append(self._entry(shard, entry_id, fields))
            room = count - len(out)
            if room <= 0:
                break
            for _, entries in self.client.xreadgroup(group, consumer, {key: ">"}, count=room) or []:
                for entry_id, fields in entries:
                    out.append(self._entry(shard, entry_id, fields))
        return out

    def pending(self, group: str, consumer: str, count: int = 500) -> list[Entry]:
        """Entries handed to ``consumer`` before and not acknowledged (what it held when it
        stopped): a consumer that starts again applies these first."""
        out: list[Entry] = []
        for shard in range(self.layout.shards):
            reply = self.client.xreadgroup(group, consumer, {self.key(shard): "0"}, count=count)
            for _, entries in reply or []:
                out.extend(self._entry(shard, entry_id, fields)
                           for entry_id, fields in entries if fields)
        return out

    def ack(self, group: str, entries: Iterable[Entry]) -> int:
        by_shard: dict[int, list[str]] = {}
        for entry in entries:
            by_shard.setdefault(entry.shard, []).append(entry.entry_id)
        if not by_shard:
            return 0
        pipe = self.client.pipeline(transaction=False)
        for shard, ids in by_shard.items():
            pipe.xack(self.key(shard), group, *ids)
        return sum(int(n) for n in pipe.execute())

    def _groups(self, shard: int) -> list[dict[str, Any]]:
        try:
            return list(self.client.xinfo_groups(self.key(shard)))
        except redis.ResponseError:
            return []  # no stream yet

    def _first_unacked(self, shard: int, info: dict[str, Any]) -> str | None:
        """The oldest entry ``info``'s group has not acknowledged (pending, or not delivered)."""
        key, name = self.key(shard), _text(info["name"])
        if int(info["pending"]):
            return _text(self.client.xpending(key, name)["min"])
        after = self.client.xrange(key, min="(" + _text(info["last-delivered-id"]), count=1)
        return _text(after[0][0]) if after else None

    def lag(self) -> dict[str, float]:
        """For each consumer group: seconds since the oldest entry it has not acknowledged was
        recorded (pending, or not yet delivered); 0 when it is caught up."""
        seconds, micros = self.client.time()
        now = float(seconds) + int(micros) / 1e6
        worst: dict[str, float] = {}
        for shard in range(self.layout.shards):
            for info in self._groups(shard):
                oldest = self._first_unacked(shard, info)
                lag = max(now - entry_time(oldest), 0.0) if oldest else 0.0
                name = _text(info["name"])
                worst[name] = max(worst.get(name, 0.0), lag)
        return worst

    def trim_consumed(self, group: str) -> int:
        """Delete every entry ``group`` has acknowledged (those before its oldest unacknowledged
        one); returns how many. For a stream kept only until its one consumer took it."""
        deleted = 0
        for shard in range(self.layout.shards):
            info = next((g for g in self._groups(shard) if _text(g["name"]) == group), None)
            if info is None:
                continue
            first = self._first_unacked(shard, info)
            key = self.key(shard)
            if first is not None:
                deleted += int(self.client.xtrim(key, minid=first, approximate=False))
                continue
            last = _text(info["last-delivered-id"])  # everything delivered was acknowledged
            if last != "0-0":
                deleted += int(self.client.xtrim(key, minid=last, approximate=False))
                deleted += int(self.client.xdel(key, last))
        return deleted
