"""The durable record of change events: one Redis stream per shard (``events``), written by the land
script in the same step as the verdict that makes each event (lua2/lifecycle.lua), read here.

Two ways to read it:

- by time, for a command or a catch-up: :meth:`EventLog.events` merges every shard's stream in
  the order the events were recorded, from a time on;
- as a *consumer* that must apply each event once (a database writer, notifications): a Redis
  consumer group per consumer name on every shard's stream. :meth:`EventLog.read` hands out
  events not yet delivered to the group (first those a dead member of the group left pending
  for longer than ``claim_after`` seconds), and :meth:`EventLog.ack` marks them applied. An
  event handed out and never acknowledged (the consumer died) is handed out again, with the
  same ``event_id``; the consumer applies it idempotently.

The stream keeps each event ``WEBCRAWL_EVENTS_RETENTION_SECONDS`` (7 days) and trims it after, whether
read or not: :meth:`EventLog.lag` tells how far behind each consumer is, so a consumer close to the
retention is warned of (webcrawl/extensions/eventwatch.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from webcrawl.change.events import event_from_entry, event_id

if TYPE_CHECKING:
    from webcrawl.state.layout import CrawlLayout

__all__ = ["Delivered", "EventLog", "entry_time"]

#: Events land at most this long after their fetch (a flush, a retry, a Redis outage waited out):
#: a read "since T" starts this much earlier in the stream and keeps what was detected since T.
LANDING_SLACK_SECONDS = 3600.0


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def entry_time(entry_id: str) -> float:
    """When the entry was recorded (server time, seconds): its id's milliseconds."""
    return int(entry_id.split("-", 1)[0]) / 1000.0


@dataclass(frozen=True)
class Delivered:
    """One event handed to a consumer: its shard and entry id (what :meth:`EventLog.ack` takes),
    the event, and the entry's raw fields (``b``: the stored body's pointer)."""

    shard: int
    entry_id: str
    event: dict[str, Any]
    fields: dict[str, str]


class EventLog:
    """The event streams of one crawl."""

    def __init__(self, client: Any, layout: CrawlLayout) -> None:
        self.client = client
        self.layout = layout

    def _delivered(self, shard: int, entry_id: Any, fields: dict[Any, Any]) -> Delivered:
        eid = _text(entry_id)
        texts = {_text(k): _text(v) for k, v in fields.items()}
        return Delivered(shard, eid, event_from_entry(texts, event_id(self.layout.crawl, shard, eid)),
                         texts)

    # -- by time ------------------------------------------------------------------------------

    def _range(self, shard: int, start: str, batch: int) -> Iterator[Delivered]:
        key = self.layout.all_shards[shard].events
        while True:
            entries = self.client.xrange(key, min=start, count=batch)
            for entry_id, fields in entries:
                yield self._delivered(shard, entry_id, fields)
            if len(entries) < batch:
                return
            last = _text(entries[-1][0])
            start = "(" + last

    def entries(self, since: float | None = None, batch: int = 1000) -> Iterator[Delivered]:
        """Every kept event detected at or after ``since`` (all when None), in the order they were
        recorded (by entry id across shards)."""
        start = "-"
        if since is not None:
            start = str(max(int((since - LANDING_SLACK_SECONDS) * 1000), 0))
        streams = [self._range(shard, start, batch) for shard in range(self.layout.shards)]
        for item in heapq.merge(*streams, key=lambda d: _order(d.entry_id)):
            detected = item.event["detected_at"]
            if since is None or (detected is not None and detected >= since):
                yield item

    def events(self, since: float | None = None) -> Iterator[dict[str, Any]]:
        for item in self.entries(since):
            yield item.event

    def oldest(self) -> float | None:
        """When the oldest kept event was recorded, None when none is kept."""
        times = []
        for shard in self.layout.all_shards:
            first = self.client.xrange(shard.events, count=1)
            if first:
                times.append(entry_time(_text(first[0][0])))
        return min(times) if times else None

    def count(self) -> int:
        return sum(int(self.client.xlen(shard.events)) for shard in self.layout.all_shards)

    # -- consumers ------------------------------------------------------------------------------

    def join(self, group: str, *, from_start: bool = True) -> None:
        """Make ``group`` a consumer of every shard's stream (nothing when it is one already):
        from the oldest kept event, or only of events recorded from now on."""
        for shard in self.layout.all_shards:
            try:
                self.client.xgroup_create(shard.events, group, id="0" if from_start else "$",
                                          mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    def read(self, group: str, consumer: str, count: int = 500,
             claim_after: float = 60.0) -> list[Delivered]:
        """Up to ``count`` events for ``consumer`` of ``group``: first those handed out more than
        ``claim_after`` seconds ago and never acknowledged (a member that died), then new ones."""
        out: list[Delivered] = []
        for index, shard in enumerate(self.layout.all_shards):
            room = count - len(out)
            if room <= 0:
                break
            reply = self.client.xautoclaim(shard.events, group, consumer,
                                           int(claim_after * 1000), start_id="0-0", count=room)
            for entry_id, fields in reply[1]:
                if fields:  # trimmed while pending: nothing left to apply
                    out.append(self._delivered(index, entry_id, fields))
            room = count - len(out)
            if room <= 0:
                break
            fresh = self.client.xreadgroup(group, consumer, {shard.events: ">"}, count=room)
            for _, entries in fresh or []:
                for entry_id, fields in entries:
                    out.append(self._delivered(index, entry_id, fields))
        return out

    def pending(self, group: str, consumer: str, count: int = 500) -> list[Delivered]:
        """Events handed to ``consumer`` before and not acknowledged (what it held when it
        stopped): a consumer that starts again applies these first."""
        out: list[Delivered] = []
        for index, shard in enumerate(self.layout.all_shards):
            reply = self.client.xreadgroup(group, consumer, {shard.events: "0"}, count=count)
            for _, entries in reply or []:
                for entry_id, fields in entries:
                    if fields:
                        out.append(self._delivered(index, entry_id, fields))
        return out

    def ack(self, group: str, delivered: Iterable[Delivered]) -> int:
        by_shard: dict[int, list[str]] = {}
        for item in delivered:
            by_shard.setdefault(item.shard, []).append(item.entry_id)
        if not by_shard:
            return 0
        pipe = self.client.pipeline(transaction=False)
        for shard, ids in by_shard.items():
            pipe.xack(self.layout.all_shards[shard].events, group, *ids)
        return sum(int(n) for n in pipe.execute())

    def lag(self) -> dict[str, float]:
        """For each consumer group: seconds since the oldest event it has not acknowledged was
        recorded (pending, or not yet delivered); 0 when it is caught up."""
        now = _server_now(self.client)
        worst: dict[str, float] = {}
        for shard in self.layout.all_shards:
            try:
                groups = self.client.xinfo_groups(shard.events)
            except redis.ResponseError:
                continue  # no stream yet
            last = self.client.xrevrange(shard.events, count=1)
            newest = _text(last[0][0]) if last else None
            for info in groups:
                name = _text(info["name"])
                oldest = None
                if int(info["pending"]):
                    summary = self.client.xpending(shard.events, name)
                    oldest = _text(summary["min"])
                elif newest is not None and _order(newest) > _order(_text(info["last-delivered-id"])):
                    after = self.client.xrange(shard.events, min="(" + _text(info["last-delivered-id"]),
                                               count=1)
                    oldest = _text(after[0][0]) if after else None
                lag = max(now - entry_time(oldest), 0.0) if oldest else 0.0
                worst[name] = max(worst.get(name, 0.0), lag)
        return worst


def _order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _server_now(client: Any) -> float:
    seconds, micros = client.time()
    return float(seconds) + int(micros) / 1e6
